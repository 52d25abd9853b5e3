import Foundation
import KeyfobCodecs
import KeyfobCrypto
import Testing
import WebAuthn

@testable import KeyfobServer

/// The sign-in options are encoded once and two values spliced in: byte for byte what encoding the
/// whole answer gives, for any challenge and key.
@Suite struct SignInOptionsTemplateTests {
    func answer(_ configuration: ServerConfiguration, challenge: [UInt8], key: String) -> [UInt8] {
        jsonBytes(
            CeremonyController.signInAnswer(
                configuration.relyingParty, configuration,
                challenge: challenge, key: key))
    }

    @Test(arguments: [false, true])
    func splicedAnswersAreTheEncodedOnes(_ preferred: Bool) throws {
        var configuration = ServerConfiguration()
        configuration.rpID = "example.com"
        configuration.requireUserVerification = !preferred
        let template = try #require(SignInOptionsTemplate { answer(configuration, challenge: $0, key: $1) })
        for _ in 0..<50 {
            let challenge = randomBytes(32)
            let key = Base64URL.encode(randomBytes(11))
            let spliced = template.body(challenge: challenge, key: key)
            #expect(Array(spliced.readableBytesView) == answer(configuration, challenge: challenge, key: key))
        }
    }

    /// A document in which a marker could be mistaken for another field is not templated.
    @Test func anAmbiguousDocumentIsEncodedEachTime() {
        #expect(
            SignInOptionsTemplate { challenge, key in
                Array("{\"c\":\"\(Base64URL.encode(challenge))\",\"a\":\"\(key)\",\"b\":\"\(key)\"}".utf8)
            } == nil)
        #expect(
            SignInOptionsTemplate { challenge, key in
                Array("{\"c\":\"\(Base64URL.encode(challenge))\",\"a\":\"\(key)\"}".utf8)
            } != nil)
    }
}
