import Foundation
import KeyfobCodecs
import Testing
import WebAuthnTestSupport

@testable import WebAuthn

/// The parsers refuse bad input with a typed error and never allocate what input merely declares.
@Suite struct ParserTests {
    @Test func aCBORLengthBombIsRefusedBeforeLibcborSeesIt() {
        // An array head declaring ~52 GB of items (toolchain-notes.md, trap 1).
        #expect(throws: WebAuthnError.self) { _ = try CBORDecoder.decode([0xba, 0xc1, 0x41, 0x68, 0x3c]) }
        #expect(throws: WebAuthnError.self) { _ = try CBORDecoder.decode([0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]) }
    }

    @Test func deepNestingIsRefused() {
        #expect(throws: WebAuthnError.self) { _ = try CBORDecoder.decode([UInt8](repeating: 0x81, count: 100) + [0x00]) }
    }

    @Test func duplicateMapKeysAreRefused() {
        #expect(throws: WebAuthnError.self) { _ = try CBORDecoder.decode([0xa2, 0x01, 0x02, 0x01, 0x03]) }
    }

    @Test func truncatedAndTrailingCBORAreRefused() {
        #expect(throws: WebAuthnError.self) { _ = try CBORDecoder.decode([0xa1, 0x01]) }
        #expect(throws: WebAuthnError.self) { _ = try CBORDecoder.decode([0x01, 0x02]) }
        #expect(throws: WebAuthnError.self) { _ = try CBORDecoder.decode([0xff]) }
        #expect(throws: WebAuthnError.self) { _ = try CBORDecoder.decode([0xf8, 0x10]) }  // simple value < 32 in two bytes
    }

    @Test func cborValuesRoundTrip() throws {
        let value: CBOR = .map([
            (.text("a"), .array([.int(1), .int(-500), .bytes([1, 2]), .bool(true), .null])),
            (.int(3), .tagged(24, .text("ü"))),
        ])
        #expect(try CBORDecoder.decode(encodeCBOR(value)) == value)
        // Indefinite-length byte string: two chunks.
        #expect(try CBORDecoder.decode([0x5f, 0x41, 0x01, 0x42, 0x02, 0x03, 0xff]) == .bytes([1, 2, 3]))
    }

    @Test func authenticatorDataChecksLengthsFirst() {
        #expect(throws: WebAuthnError.self) { _ = try AuthenticatorData(bytes: [UInt8](repeating: 0, count: 36)) }
        // AT set but nothing follows.
        #expect(throws: WebAuthnError.self) { _ = try AuthenticatorData(bytes: [UInt8](repeating: 0, count: 32) + [0x41, 0, 0, 0, 0]) }
        // Credential id length 1024 is over the limit.
        let head = [UInt8](repeating: 0, count: 32) + [0x41, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 16)
        #expect(throws: WebAuthnError.self) { _ = try AuthenticatorData(bytes: head + [0x04, 0x00] + [UInt8](repeating: 0, count: 1024)) }
    }

    @Test func authenticatorDataReadsFlagsAndCounter() throws {
        let data = try AuthenticatorData(bytes: [UInt8](repeating: 0, count: 32) + [0x1d, 0, 0, 1, 2])
        #expect(data.signCount == 258)
        #expect(data.flags == [.userPresent, .userVerified, .backupEligible, .backupState])
        #expect(data.attestedCredentialData == nil)
    }

    @Test func coseKeysMustBeUsable() throws {
        // ML-DSA (kty AKP, alg -48) needs an OpenSSL newer than Debian 12's.
        let mldsa = encodeCBOR(.map([(.int(1), .int(7)), (.int(3), .int(-48)), (.int(-1), .bytes([1]))]))
        do { _ = try CredentialPublicKey(cose: mldsa); Issue.record("accepted ML-DSA") } catch {
            #expect(error.code == .unsupportedAlgorithm)
        }
        // A point that is not on P-256.
        let offCurve = encodeCBOR(
            .map([
                (.int(1), .int(2)), (.int(3), .int(-7)), (.int(-1), .int(1)),
                (.int(-2), .bytes([UInt8](repeating: 1, count: 32))),
                (.int(-3), .bytes([UInt8](repeating: 2, count: 32))),
            ]))
        #expect(throws: WebAuthnError.self) { _ = try CredentialPublicKey(cose: offCurve) }
        // alg that does not fit the curve.
        let a = SoftwareAuthenticator(.es256)
        var key = try CBORDecoder.decode(a.key.coseKey)
        if case .map(var pairs) = key { pairs[1].1 = .int(-35); key = .map(pairs) }
        #expect(throws: WebAuthnError.self) { _ = try CredentialPublicKey(cose: encodeCBOR(key)) }
    }

    @Test func base64urlIsStrictAboutItsAlphabet() {
        #expect(Base64URL.decode("AQID") == [1, 2, 3])
        #expect(Base64URL.decode("-_8") == [0xfb, 0xff])
        #expect(Base64URL.decode("+/8=") == [0xfb, 0xff])
        #expect(Base64URL.decode("A") == nil)
        #expect(Base64URL.decode("AQ*D") == nil)
        #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
    }

    /// The hand-written encoder against Foundation's base64 (alphabet swapped, padding dropped),
    /// for every length up to 200 and every byte value, and back through the decoder.
    @Test func base64urlEncodingMatchesFoundation() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...200 {
            let bytes = (0..<length).map { i in length % 2 == 0 ? UInt8(truncatingIfNeeded: i) : UInt8.random(in: 0...255, using: &generator) }
            let reference = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == reference)
            #expect(Base64URL.encode(bytes[...]) == reference)
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
    }

    @Test func creationOptionsHaveTheDesignDefaults() throws {
        let rp = RelyingParty(id: "localhost", name: "Keyfob", origins: ["http://localhost:8080"])
        let options = rp.creationOptions(challenge: [UInt8](repeating: 1, count: 32), userID: [9], userName: "alice")
        #expect(options.pubKeyCredParams.map(\.alg) == [-7, -8, -257])
        #expect(options.timeout == 60000)
        #expect(options.attestation == "none")
        #expect(options.authenticatorSelection.residentKey == "required")
        #expect(options.authenticatorSelection.userVerification == "required")
        #expect(Base64URL.decode(options.challenge)?.count == 32)
        let request = rp.requestOptions(challenge: [1])
        #expect(request.allowCredentials.isEmpty && request.rpId == "localhost" && request.userVerification == "required")
    }

    @Test func challengesAreThirtyTwoFreshBytes() {
        let a = ChallengeGenerator.live.generate(), b = ChallengeGenerator.live.generate()
        #expect(a.count == 32 && a != b)
    }
}
