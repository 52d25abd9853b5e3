import KeyfobCodecs
import Testing
import WebAuthn
import WebAuthnTestSupport

/// §7.1, one test per step: a valid registration from the software authenticator,
/// then the same registration with exactly one thing corrupted.
@Suite struct RegistrationStepTests {
    let rp = RelyingParty(id: "example.com", name: "Example", origins: ["https://example.com"])
    let challenge = [UInt8](repeating: 7, count: 32)
    let authenticator = SoftwareAuthenticator(.es256)

    var fields: SoftwareAuthenticator.Fields {
        authenticator.registrationFields(challenge: challenge, rpID: "example.com", origin: "https://example.com")
    }

    func verify(_ edit: (inout SoftwareAuthenticator.Fields) -> Void) throws(WebAuthnError) -> VerifiedRegistration {
        var f = fields
        edit(&f)
        return try rp.verifyRegistration(authenticator.register(f), challenge: challenge, requireUserVerification: true)
    }

    func expectFailure(_ code: WebAuthnError.Code, _ edit: (inout SoftwareAuthenticator.Fields) -> Void) {
        #expect(throws: WebAuthnError.self) { _ = try verify(edit) }
        do { _ = try verify(edit) } catch { #expect(error.code == code, "\(error)") }
    }

    @Test(arguments: TestPrivateKey.Kind.allCases)
    func aValidRegistrationVerifiesForEveryAlgorithm(_ kind: TestPrivateKey.Kind) throws {
        for attestation in [SoftwareAuthenticator.Attestation.none, .packedSelf] {
            var a = SoftwareAuthenticator(kind)
            let result = try rp.verifyRegistration(
                a.register(challenge: challenge, rpID: "example.com", origin: "https://example.com", attestation: attestation),
                challenge: challenge)
            #expect(result.credentialID == a.credentialID)
            #expect(result.publicKey.algorithm == a.key.algorithm)
            #expect(result.attestation.format == (attestation == .none ? "none" : "packed"))
            #expect(result.attestation.type == (attestation == .none ? .none : .self))
            #expect(result.userVerified)
        }
    }

    @Test func clientDataTypeMustBeCreate() { expectFailure(.invalidRequest) { $0.type = "webauthn.get" } }
    @Test func challengeMustBeTheIssuedOne() { expectFailure(.challengeNotFound) { $0.challenge = Base64URL.encode([1, 2, 3]) } }
    @Test func originMustBeAllowed() { expectFailure(.originMismatch) { $0.origin = "https://evil.example" } }
    @Test func crossOriginIsRefused() { expectFailure(.originMismatch) { $0.crossOrigin = true } }
    @Test func topOriginIsRefused() { expectFailure(.originMismatch) { $0.topOrigin = "https://framer.example" } }
    @Test func rpIdHashMustMatch() { expectFailure(.rpIdMismatch) { $0.rpID = "evil.example" } }
    @Test func userPresenceIsRequired() { expectFailure(.userPresenceRequired) { $0.flags = 0x04 } }
    @Test func userVerificationIsRequired() { expectFailure(.userVerificationRequired) { $0.flags = 0x01 } }
    @Test func backupStateWithoutEligibilityIsInvalid() { expectFailure(.invalidRequest) { $0.flags = 0x05 | 0x10 } }
    @Test func idAndRawIdMustAgree() { expectFailure(.invalidRequest) { $0.rawId = Base64URL.encode([9, 9, 9]) } }
    @Test func idMustBeTheCredentialInAuthenticatorData() {
        expectFailure(.invalidRequest) {
            $0.id = Base64URL.encode([9, 9, 9]); $0.rawId = $0.id
        }
    }
    @Test func idMustBeBase64URL() {
        expectFailure(.invalidRequest) {
            $0.id = "not base64!"; $0.rawId = $0.id
        }
    }
    @Test func clientDataMustBeJSON() { expectFailure(.invalidRequest) { $0.clientDataJSON = Array("{nope".utf8) } }
    @Test func packedSelfSignatureMustVerify() {
        expectFailure(.attestationInvalid) {
            $0.attestation = .packedSelf; $0.corruptSignature = true
        }
    }
    @Test func packedSelfAlgorithmMustBeTheCredentials() {
        expectFailure(.attestationInvalid) {
            $0.attestation = .packedSelf; $0.algorithmInStatement = .es384
        }
    }
    @Test func authenticatorDataMayNotHaveTrailingBytes() {
        expectFailure(.invalidRequest) { $0.editAuthenticatorData = { $0 + [0] } }
    }

    @Test func algorithmMustBeOneThatWasOffered() {
        let credential = authenticator.register(fields)
        #expect(throws: WebAuthnError(.unsupportedAlgorithm, "credential algorithm -7 was not offered")) {
            _ = try rp.verifyRegistration(credential, challenge: challenge, allowedAlgorithms: [.rs256, .eddsa])
        }
    }

    @Test func uvCanBeOptional() throws {
        var f = fields
        f.flags = 0x01
        let result = try rp.verifyRegistration(authenticator.register(f), challenge: challenge, requireUserVerification: false)
        #expect(!result.userVerified)
    }

    @Test func subdomainOriginsAndAndroidOriginsFitTheRPID() {
        #expect(RelyingParty.origin("https://login.example.com", fitsRPID: "example.com"))
        #expect(RelyingParty.origin("https://example.com", fitsRPID: "example.com"))
        #expect(RelyingParty.origin("http://localhost:8080", fitsRPID: "localhost"))
        #expect(!RelyingParty.origin("https://badexample.com", fitsRPID: "example.com"))
        #expect(!RelyingParty.origin("https://example.com.evil.org", fitsRPID: "example.com"))
        #expect(RelyingParty.origin("android:apk-key-hash:abc", fitsRPID: "example.com"))
    }
}
