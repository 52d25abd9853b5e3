import KeyfobCrypto
import Testing
import WebAuthn

@testable import KeyfobServer

/// The returning-device cookie's MAC is one HMAC now (it was an OpenSSL HKDF call per sign-in):
/// the same bytes, so the cookies browsers already hold stay valid.
@Suite struct ReturningDeviceTests {
    @Test func theMACIsTheHKDFItWasBefore() throws {
        let vault = try KeyVault(masterKey: randomBytes(32))
        let device = ReturningDevice(vault: vault)
        let key = try vault.derive("returning-device cookie v1", length: 32)
        for _ in 0..<50 {
            let nonce = randomBytes(16)
            #expect(device.mac(nonce) == (try KeyVault.hkdf(key: key, salt: [], info: nonce, length: 16)))
        }
    }
}
