import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import WebAuthn

/// Keys only the user's passkeys can open (WebAuthn PRF). Three layers, outermost first:
///
///     nostr_keys.sealed  = master-key layer( dataKey layer( nostr secret key ) )
///     key_wraps.wrapped  = AES-GCM( HKDF(PRF output of one passkey), dataKey )   one per sealing passkey
///     sessions.data_key  = AES-GCM( HKDF(session token), dataKey )               unlock window only
///
/// The PRF output is never stored, and the session token is stored only as its SHA-256, so
/// nothing at rest — database and master key together — opens the data key.
struct PasskeySeal: Sendable {
    /// The one PRF input of wraps made before salts were per wrap (`KeyWrapRecord.salt` empty):
    /// it depends on the rpId alone. Such a wrap is made again under a fresh salt the first time
    /// it opens (`second` of the same ceremony).
    let legacySalt: [UInt8]

    init(rpID: String) {
        legacySalt = sha256(Array("keyfob prf salt v1\0\(rpID)".utf8))
    }

    /// The PRF input of a wrap made in the ceremony whose challenge is `challenge`: random (the
    /// challenge is), and derived again from the signed challenge at verification, so nothing
    /// holds it in between. Stored with the wrap.
    static func salt(forChallenge challenge: [UInt8]) -> [UInt8] {
        sha256(Array("keyfob prf salt v2\0".utf8) + challenge)
    }

    func salt(of wrap: KeyWrapRecord) -> [UInt8] { wrap.salt.isEmpty ? legacySalt : wrap.salt }

    /// The `prf` input of a ceremony (with `challenge`) among `credentials`: a passkey with a wrap
    /// gets its wrap's salt (its output opens the data key), plus the fresh salt as `second` when
    /// the wrap is a legacy one; with `newWraps`, a passkey without one gets the fresh salt (its
    /// output makes its wrap). Nil when no passkey gets anything: the extension is not asked for.
    func inputs(for credentials: [CredentialDescriptor], wraps: [KeyWrapRecord], challenge: [UInt8], newWraps: Bool) -> PRFInputs? {
        let fresh = Base64URL.encode(Self.salt(forChallenge: challenge))
        var byCredential: [String: PRFValues] = [:]
        for credential in credentials {
            if let wrap = wraps.first(where: { Base64URL.encode($0.credentialID) == credential.id }) {
                byCredential[credential.id] = PRFValues(first: Base64URL.encode(salt(of: wrap)), second: wrap.salt.isEmpty ? fresh : nil)
            } else if newWraps {
                byCredential[credential.id] = PRFValues(first: fresh)
            }
        }
        return byCredential.isEmpty ? nil : PRFInputs(evalByCredential: byCredential)
    }

    /// The `prf` input of a registration (no credential id yet): the fresh salt.
    static func registrationInputs(challenge: [UInt8]) -> PRFInputs {
        PRFInputs(eval: PRFValues(first: Base64URL.encode(salt(forChallenge: challenge))))
    }

    static let dataKeyLength = 32

    static func newDataKey() -> SecretBytes { SecretBytes.random(dataKeyLength) }

    // MARK: The data key, wrapped per passkey

    private static func wrapContext(userID: String, credentialID: [UInt8]) -> String {
        "keyfob:data-key-wrap:v1:\(userID):\(Base64URL.encode(credentialID))"
    }

    /// A key from one passkey's PRF output, bound to its user and credential.
    private static func wrappingKey(prfOutput: SharedSecret, context: String) throws(KeyVaultError) -> SecretBytes {
        try prfOutput.withUnsafeBytes { raw throws(KeyVaultError) in
            try KeyVault.hkdfSecret(key: raw, salt: Array("keyfob prf".utf8), info: Array(context.utf8))
        }
    }

    static func wrap(_ dataKey: borrowing SecretBytes, prfOutput: SharedSecret, userID: String, credentialID: [UInt8]) throws -> [UInt8] {
        let context = wrapContext(userID: userID, credentialID: credentialID)
        let key = try wrappingKey(prfOutput: prfOutput, context: context)
        var plain = dataKey.exposedCopy()
        defer { wipe(&plain) }
        return try KeyVault.encrypt(plain, key: key, aad: context)
    }

    /// A new wrap for one passkey, made in the ceremony with `challenge` (whose fresh salt gave
    /// `prfOutput`): the salt is stored with it.
    static func newWrap(
        _ dataKey: borrowing SecretBytes, prfOutput: SharedSecret, userID: String, credentialID: [UInt8], challenge: [UInt8],
        at: Date
    ) throws -> KeyWrapRecord {
        KeyWrapRecord(
            userID: userID, credentialID: credentialID,
            wrapped: try wrap(dataKey, prfOutput: prfOutput, userID: userID, credentialID: credentialID),
            createdAt: at, salt: salt(forChallenge: challenge))
    }

    /// The data key, or nil when this PRF output is not the one the wrap was made with.
    static func unwrap(_ wrapped: [UInt8], prfOutput: SharedSecret, userID: String, credentialID: [UInt8]) -> SecretBytes? {
        let context = wrapContext(userID: userID, credentialID: credentialID)
        guard let key = try? wrappingKey(prfOutput: prfOutput, context: context),
            var plain = KeyVault.decrypt(wrapped, key: key, aad: context)
        else { return nil }
        return SecretBytes(taking: &plain)
    }

    // MARK: The data key, held by an unlocked session

    private static func sessionContext(tokenHash: [UInt8]) -> String {
        "keyfob:session-data-key:v1:\(Base64URL.encode(tokenHash))"
    }

    private static func sessionKey(token: [UInt8], tokenHash: [UInt8]) throws(KeyVaultError) -> SecretBytes {
        try KeyVault.hkdfSecret(key: token, salt: Array("keyfob session".utf8), info: Array(sessionContext(tokenHash: tokenHash).utf8))
    }

    static func sessionCopy(of dataKey: borrowing SecretBytes, token: [UInt8], tokenHash: [UInt8]) throws -> [UInt8] {
        let key = try sessionKey(token: token, tokenHash: tokenHash)
        var plain = dataKey.exposedCopy()
        defer { wipe(&plain) }
        return try KeyVault.encrypt(plain, key: key, aad: sessionContext(tokenHash: tokenHash))
    }

    static func openSessionCopy(_ copy: [UInt8], token: [UInt8], tokenHash: [UInt8]) -> SecretBytes? {
        guard let key = try? sessionKey(token: token, tokenHash: tokenHash),
            var plain = KeyVault.decrypt(copy, key: key, aad: sessionContext(tokenHash: tokenHash))
        else { return nil }
        return SecretBytes(taking: &plain)
    }

    // MARK: The nostr key under the data key

    static func keyContext(userID: String, version: Int) -> String {
        "keyfob:nostr-key-under-data-key:v1:\(version):\(userID)"
    }

    static func encryptKey(_ secret: [UInt8], dataKey: borrowing SecretBytes, userID: String, version: Int) throws -> [UInt8] {
        try KeyVault.encrypt(secret, key: dataKey, aad: keyContext(userID: userID, version: version))
    }

}

/// What a signed-in request brings to open a passkey-sealed key: its session and the raw token
/// the session's copy of the data key is encrypted under.
struct SessionUnlock: Sendable {
    let token: [UInt8]
    let session: SessionRecord

    /// The data key, while the session is unlocked and holds a copy.
    func dataKey(at now: Date) -> SecretBytes? {
        guard session.isUnlocked(at: now), let copy = session.dataKey else { return nil }
        return PasskeySeal.openSessionCopy(copy, token: token, tokenHash: session.tokenHash)
    }
}

extension KeyfobError {
    /// A passkey-sealed key with no data key at hand: only a sealing passkey's sign-in opens it.
    static let signerSealed = KeyfobError(
        .signerLocked,
        "your nostr key is sealed by your passkeys: unlock the signer with a passkey that seals it (the account page's Unlock, or signer.unlock)",
        status: .forbidden)
}
