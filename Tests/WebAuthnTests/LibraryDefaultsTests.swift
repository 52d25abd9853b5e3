import Foundation
import Testing
import WebAuthn
import WebAuthnTestSupport

/// Defaults that keep hostile or legacy input out unless the caller opts in.
@Suite struct LibraryDefaultsTests {
    let rp = RelyingParty(id: "example.com", name: "Example", origins: ["https://example.com"])
    let challenge = [UInt8](repeating: 7, count: 32)

    func register(
        _ authenticator: SoftwareAuthenticator, legacy: Bool = false,
        edit: (inout SoftwareAuthenticator.Fields) -> Void = { _ in }
    ) throws(WebAuthnError) -> VerifiedRegistration {
        var fields = authenticator.registrationFields(challenge: challenge, rpID: "example.com", origin: "https://example.com")
        edit(&fields)
        return try rp.verifyRegistration(
            authenticator.register(fields), challenge: challenge,
            attestation: AttestationPolicy(allowLegacyAlgorithms: legacy))
    }

    func code(_ body: () throws(WebAuthnError) -> Void) -> WebAuthnError.Code? {
        do { try body(); return nil } catch { return error.code }
    }

    @Test func rs1AndShortRSAKeysAreRefusedUnlessLegacyIsAllowed() throws {
        let rs1 = SoftwareAuthenticator(key: TestPrivateKey(.rs256, sha1: true))
        #expect(code { () throws(WebAuthnError) in _ = try register(rs1) } == .unsupportedAlgorithm)
        #expect(try register(rs1, legacy: true).publicKey.algorithm == .rs1)

        let short = SoftwareAuthenticator(key: TestPrivateKey(.rs256, rsaBits: 1024))
        #expect(code { () throws(WebAuthnError) in _ = try register(short) } == .unsupportedAlgorithm)
        #expect(try register(short, legacy: true).publicKey.algorithm == .rs256)

        #expect(try register(SoftwareAuthenticator(.rs256)).publicKey.algorithm == .rs256)  // 2048 bits is fine
    }

    @Test func rsaKeysOver8192BitsOrWithHugeExponentsAreRefused() throws {
        // COSE RSA keys are checked before OpenSSL builds them.
        func cose(n: Int, e: [UInt8]) -> [UInt8] {
            encodeCBOR(
                .map([
                    (.unsigned(1), .unsigned(3)), (.unsigned(3), .negative(256)),
                    (.negative(0), .bytes([0xc1] + [UInt8](repeating: 0x5a, count: n - 1))), (.negative(1), .bytes(e)),
                ]))
        }
        #expect(throws: WebAuthnError.self) { _ = try CredentialPublicKey(cose: cose(n: 1025, e: [1, 0, 1])) }
        #expect(throws: WebAuthnError.self) { _ = try CredentialPublicKey(cose: cose(n: 256, e: [1, 0, 0, 0, 1])) }
        #expect(throws: WebAuthnError.self) { _ = try CredentialPublicKey(cose: cose(n: 256, e: [1, 0, 0, 0, 0, 0, 0, 1])) }
    }

    @Test func crossOriginMustBeABooleanAndTopOriginOfAnyTypeIsRefused() throws {
        let a = SoftwareAuthenticator(.es256)
        func withClientData(_ extra: String) -> (inout SoftwareAuthenticator.Fields) -> Void {
            { fields in
                let json = #"{"type":"webauthn.create","challenge":"\#(fields.challenge)","origin":"https://example.com"\#(extra)}"#
                fields.clientDataJSON = Array(json.utf8)
            }
        }
        #expect(try register(a, edit: withClientData("")).userVerified)
        #expect(try register(a, edit: withClientData(#","crossOrigin":false"#)).userVerified)
        for bad in [#","crossOrigin":0"#, #","crossOrigin":1"#, #","crossOrigin":"false""#, #","crossOrigin":{}"#] {
            #expect(code { () throws(WebAuthnError) in _ = try register(a, edit: withClientData(bad)) } == .invalidRequest, "\(bad)")
        }
        for top in [
            #","topOrigin":"https://evil.example""#, #","topOrigin":null"#, #","topOrigin":5"#,
            #","topOrigin":{"a":1}"#, #","topOrigin":[]"#,
        ] {
            #expect(code { () throws(WebAuthnError) in _ = try register(a, edit: withClientData(top)) } == .originMismatch, "\(top)")
        }
    }
}
