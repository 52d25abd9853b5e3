import KeyfobCodecs
import Testing
import WebAuthn
import WebAuthnTestSupport

/// §7.2, one test per step, each corrupting exactly one thing of a valid assertion.
@Suite struct AuthenticationStepTests {
    let rp = RelyingParty(id: "example.com", name: "Example", origins: ["https://example.com"])
    let challenge = [UInt8](repeating: 3, count: 32)
    let authenticator: SoftwareAuthenticator
    let stored: StoredCredential

    init() throws {
        var a = SoftwareAuthenticator(.es256, signCount: 5)
        a.userHandle = [1, 2, 3, 4]
        authenticator = a
        stored = StoredCredential(
            id: a.credentialID, publicKey: try CredentialPublicKey(cose: a.key.coseKey),
            signCount: 5, userHandle: [1, 2, 3, 4], backupEligible: false)
    }

    var fields: SoftwareAuthenticator.Fields {
        authenticator.authenticationFields(challenge: challenge, rpID: "example.com", origin: "https://example.com")
    }

    func verify(stored: StoredCredential? = nil, _ edit: (inout SoftwareAuthenticator.Fields) -> Void) throws(WebAuthnError) -> VerifiedAuthentication
    {
        var f = fields
        edit(&f)
        return try rp.verifyAuthentication(authenticator.authenticate(f), challenge: challenge, stored: stored ?? self.stored)
    }

    func expectFailure(_ code: WebAuthnError.Code, stored: StoredCredential? = nil, _ edit: (inout SoftwareAuthenticator.Fields) -> Void) {
        do {
            _ = try verify(stored: stored, edit)
            Issue.record("verified, expected \(code)")
        } catch { #expect(error.code == code, "\(error)") }
    }

    @Test(arguments: TestPrivateKey.Kind.allCases)
    func aValidAssertionVerifiesAndAdvancesTheCounter(_ kind: TestPrivateKey.Kind) throws {
        var a = SoftwareAuthenticator(kind, signCount: 41)
        let stored = StoredCredential(id: a.credentialID, publicKey: try CredentialPublicKey(cose: a.key.coseKey), signCount: 41)
        let result = try rp.verifyAuthentication(
            a.authenticate(challenge: challenge, rpID: "example.com", origin: "https://example.com"),
            challenge: challenge, stored: stored)
        #expect(result.newSignCount == 42)
        #expect(result.userVerified)
    }

    @Test func clientDataTypeMustBeGet() { expectFailure(.invalidRequest) { $0.type = "webauthn.create" } }
    @Test func challengeMustBeTheIssuedOne() { expectFailure(.challengeNotFound) { $0.challenge = "AAAA" } }
    @Test func originMustBeAllowed() { expectFailure(.originMismatch) { $0.origin = "https://example.com:8443" } }
    @Test func crossOriginIsRefused() { expectFailure(.originMismatch) { $0.crossOrigin = true } }
    @Test func topOriginIsRefused() { expectFailure(.originMismatch) { $0.topOrigin = "https://example.com" } }
    @Test func rpIdHashMustMatch() { expectFailure(.rpIdMismatch) { $0.rpID = "example.org" } }
    @Test func userPresenceIsRequired() { expectFailure(.userPresenceRequired) { $0.flags = 0x04 } }
    @Test func userVerificationIsRequired() { expectFailure(.userVerificationRequired) { $0.flags = 0x01 } }
    @Test func backupStateWithoutEligibilityIsInvalid() { expectFailure(.invalidRequest) { $0.flags = 0x15 } }
    @Test func backupEligibilityMayNotChange() { expectFailure(.invalidRequest) { $0.flags = 0x0d } }
    @Test func signatureMustVerify() { expectFailure(.signatureInvalid) { $0.corruptSignature = true } }
    @Test func signatureCoversTheClientData() throws {
        // A valid assertion whose client data is swapped for other bytes with the same meaning.
        var credential = authenticator.authenticate(fields)
        let json = String(decoding: Base64URL.decode(credential.response.clientDataJSON)!, as: UTF8.self)
        credential.response.clientDataJSON = Base64URL.encode(Array((json.dropLast() + #","extra":1}"#).utf8))
        #expect(throws: WebAuthnError.self) { _ = try rp.verifyAuthentication(credential, challenge: challenge, stored: stored) }
        do { _ = try rp.verifyAuthentication(credential, challenge: challenge, stored: stored) } catch {
            #expect(error.code == .signatureInvalid)
        }
    }
    /// The caller's parse of the client data (made to find the ceremony) is used only for the
    /// very field it came from: a parse of other client data is ignored, never trusted.
    @Test func aParsedClientDataIsUsedOnlyForItsOwnField() throws {
        let credential = authenticator.authenticate(fields)
        let own = try ClientDataJSON(credential.response.clientDataJSON)
        #expect(try own.challenge() == challenge)
        #expect(try rp.verifyAuthentication(credential, challenge: challenge, stored: stored, clientData: own).newSignCount == 6)
        // Another response's client data, naming another origin: the signed field decides.
        var other = fields
        other.origin = "https://evil.example"
        let foreign = try ClientDataJSON(authenticator.authenticate(other).response.clientDataJSON)
        #expect(try rp.verifyAuthentication(credential, challenge: challenge, stored: stored, clientData: foreign).newSignCount == 6)
        var tampered = credential
        tampered.response.clientDataJSON = foreign.text
        do {
            _ = try rp.verifyAuthentication(tampered, challenge: challenge, stored: stored, clientData: own)
            Issue.record("verified client data that was not signed")
        } catch { #expect(error.code == .originMismatch || error.code == .signatureInvalid, "\(error)") }
    }
    @Test func counterMustMoveForward() { expectFailure(.counterRegression) { $0.signCount = 5 } }
    @Test func counterMayNotGoBack() { expectFailure(.counterRegression) { $0.signCount = 4 } }
    @Test func userHandleMustBeTheCredentialsUser() {
        expectFailure(.userHandleMismatch) { $0.userHandle = Base64URL.encode([9, 9]) }
    }
    @Test func responseMustBeForTheStoredCredential() {
        expectFailure(.credentialNotFound) {
            $0.id = Base64URL.encode([1]); $0.rawId = $0.id
        }
    }
    @Test func idAndRawIdMustAgree() { expectFailure(.invalidRequest) { $0.rawId = Base64URL.encode([1]) } }

    @Test func countersThatStayZeroAreFine() throws {
        var s = stored
        s.signCount = 0
        let result = try verify(stored: s) { $0.signCount = 0 }
        #expect(result.newSignCount == 0)
    }

    @Test func syncedPasskeysMayChangeBackupState() throws {
        var s = stored
        s.backupEligible = true
        let result = try verify(stored: s) { $0.flags = 0x05 | 0x08 | 0x10 }
        #expect(result.backupState)
    }
}
