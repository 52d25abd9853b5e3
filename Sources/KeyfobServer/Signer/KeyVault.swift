import Foundation
import KeyfobCrypto

/// The master key at work (DESIGN.md §4.1): one key per purpose derived from it with HKDF-SHA256
/// (nostr keys, NIP-46 signer keys, waiting requests, derived secrets, Substrate keys), and AES-256-GCM sealing
/// bound to what is sealed (a nostr key to its user and key version). A key serves one purpose
/// only, so a flaw in one use cannot open another's data. The master key itself is not kept; the
/// derived keys are wiped when the vault goes away.
public final class KeyVault: @unchecked Sendable {
    /// What a derived key is for; the raw value is its HKDF info.
    enum Purpose: String, CaseIterable {
        /// The first derived key: its info is unchanged since it sealed everything.
        case nostrKeys = "keyfob nostr-key kek v1"
        case bunkerKeys = "keyfob bunker-key kek v1"
        case pendingRequests = "keyfob pending-request kek v1"
        case derivedSecrets = "keyfob derived-secret key v1"
        case substrateKeys = "keyfob substrate-key kek v1"
    }

    /// Made once in `init`; each wipes itself when the vault goes away.
    private let nostrKeysKey: SecretBytes
    private let bunkerKeysKey: SecretBytes
    private let pendingRequestsKey: SecretBytes
    private let derivedSecretsKey: SecretBytes
    private let substrateKeysKey: SecretBytes

    /// Runs `body` with `purpose`'s key.
    private func withKey<R>(_ purpose: Purpose, _ body: (UnsafeRawBufferPointer) throws(KeyVaultError) -> R) throws(KeyVaultError) -> R {
        switch purpose {
        case .nostrKeys: try nostrKeysKey.withUnsafeBytes(body)
        case .bunkerKeys: try bunkerKeysKey.withUnsafeBytes(body)
        case .pendingRequests: try pendingRequestsKey.withUnsafeBytes(body)
        case .derivedSecrets: try derivedSecretsKey.withUnsafeBytes(body)
        case .substrateKeys: try substrateKeysKey.withUnsafeBytes(body)
        }
    }
    /// Identifies the master key without revealing it (a second HKDF output).
    public let checkValue: [UInt8]

    public static let masterKeyLength = 32

    public init(masterKey: [UInt8]) throws(KeyVaultError) {
        guard masterKey.count == Self.masterKeyLength else {
            throw KeyVaultError("the master key must be \(Self.masterKeyLength) bytes, not \(masterKey.count)")
        }
        func derived(_ purpose: Purpose) throws(KeyVaultError) -> SecretBytes {
            try Self.hkdfSecret(key: masterKey, salt: Array("keyfob".utf8), info: Array(purpose.rawValue.utf8))
        }
        nostrKeysKey = try derived(.nostrKeys)
        bunkerKeysKey = try derived(.bunkerKeys)
        pendingRequestsKey = try derived(.pendingRequests)
        derivedSecretsKey = try derived(.derivedSecrets)
        substrateKeysKey = try derived(.substrateKeys)
        checkValue = try Self.hkdf(key: masterKey, salt: Array("keyfob".utf8), info: Array("keyfob master-key check v1".utf8))
    }

    /// What the ciphertext is bound to: moving a sealed key to another user or version, or
    /// claiming a passkey-sealed key is a plain one (or the reverse), fails to open.
    static func associatedData(userID: String, version: Int, passkeySealed: Bool) -> [UInt8] {
        Array("keyfob:\(passkeySealed ? "passkey-sealed-nostr-key" : "nostr-key"):\(version):\(userID)".utf8)
    }

    /// Seals `secret` with a fresh random 12-byte nonce. Returns the nonce and ciphertext + 16-byte tag.
    /// For a passkey-sealed key, `secret` is the key already encrypted under its data key.
    func seal(_ secret: [UInt8], userID: String, version: Int, passkeySealed: Bool = false) throws(KeyVaultError)
        -> (nonce: [UInt8], sealed: [UInt8])
    {
        let nonce = randomBytes(12)
        let aad = Self.associatedData(userID: userID, version: version, passkeySealed: passkeySealed)
        let sealed = try withKey(.nostrKeys) { key throws(KeyVaultError) in
            try Self.gcm(encrypt: true, key: key, nonce: nonce, aad: aad, input: secret)
        }
        return (nonce, sealed)
    }

    /// Opens a sealed key; nil when the master key, user, version or bytes do not match.
    /// The caller wipes the result.
    func open(nonce: [UInt8], sealed: [UInt8], userID: String, version: Int, passkeySealed: Bool = false) -> [UInt8]? {
        guard nonce.count == 12, sealed.count >= 16 else { return nil }
        let aad = Self.associatedData(userID: userID, version: version, passkeySealed: passkeySealed)
        return try? withKey(.nostrKeys) { key throws(KeyVaultError) in try Self.gcm(encrypt: false, key: key, nonce: nonce, aad: aad, input: sealed) }
    }

    /// AES-256-GCM under `key` with a fresh nonce: returns nonce ‖ ciphertext ‖ tag.
    static func encrypt(_ plaintext: [UInt8], key: borrowing SecretBytes, aad: String) throws(KeyVaultError) -> [UInt8] {
        let nonce = randomBytes(12)
        let sealed = try key.withUnsafeBytes { raw throws(KeyVaultError) in
            try gcm(encrypt: true, key: raw, nonce: nonce, aad: Array(aad.utf8), input: plaintext)
        }
        return nonce + sealed
    }

    /// Opens what `encrypt` made; nil when the key, `aad` or bytes do not match. The caller wipes the result.
    static func decrypt(_ box: [UInt8], key: borrowing SecretBytes, aad: String) -> [UInt8]? {
        guard box.count >= 12 + 16 else { return nil }
        return try? key.withUnsafeBytes { raw throws(KeyVaultError) in
            try gcm(encrypt: false, key: raw, nonce: Array(box.prefix(12)), aad: Array(aad.utf8), input: Array(box.dropFirst(12)))
        }
    }

    /// A value only this master key gives for `context` (e.g. a bunker secret from its expiry, so it
    /// can be shown again without being stored).
    func derive(_ context: String, length: Int = 16) throws(KeyVaultError) -> [UInt8] {
        try withKey(.derivedSecrets) { key throws(KeyVaultError) in
            try Self.hkdf(key: key, salt: Array("keyfob derive".utf8), info: Array(context.utf8), length: length)
        }
    }

    /// Seals other secrets (a NIP-46 signer key, a waiting request) under `purpose`'s key, bound to `context`.
    func seal(_ bytes: [UInt8], for purpose: Purpose, context: String) throws(KeyVaultError) -> (nonce: [UInt8], sealed: [UInt8]) {
        let nonce = randomBytes(12)
        let aad = Array("keyfob:\(context)".utf8)
        return (
            nonce, try withKey(purpose) { key throws(KeyVaultError) in try Self.gcm(encrypt: true, key: key, nonce: nonce, aad: aad, input: bytes) }
        )
    }

    /// Opens what `seal(_:for:context:)` sealed; nil when anything does not match. NIP-46 signer
    /// keys sealed before keys were per purpose (under the nostr keys' key) still open, until the
    /// next `rotate-master-key` seals them under their own.
    func open(nonce: [UInt8], sealed: [UInt8], for purpose: Purpose, context: String) -> [UInt8]? {
        guard nonce.count == 12, sealed.count >= 16 else { return nil }
        let aad = Array("keyfob:\(context)".utf8)
        for candidate in purpose == .bunkerKeys ? [purpose, .nostrKeys] : [purpose] {
            if let opened = try? withKey(
                candidate,
                { key throws(KeyVaultError) in
                    try Self.gcm(encrypt: false, key: key, nonce: nonce, aad: aad, input: sealed)
                })
            {
                return opened
            }
        }
        return nil
    }

    // MARK: Primitives (KeyfobCrypto), with the vault's errors

    static func hkdf(key: [UInt8], salt: [UInt8], info: [UInt8], length: Int = 32) throws(KeyVaultError) -> [UInt8] {
        guard let out = HKDF.derive(key: key, salt: salt, info: info, length: length) else { throw KeyVaultError("HKDF failed") }
        return out
    }

    static func hkdf(key: UnsafeRawBufferPointer, salt: [UInt8], info: [UInt8], length: Int = 32) throws(KeyVaultError) -> [UInt8] {
        guard let out = HKDF.derive(key: key, salt: salt, info: info, length: length) else { throw KeyVaultError("HKDF failed") }
        return out
    }

    /// HKDF-SHA256 whose output is a key: it never exists as an array past this call.
    static func hkdfSecret(key: [UInt8], salt: [UInt8], info: [UInt8]) throws(KeyVaultError) -> SecretBytes {
        guard let out = HKDF.deriveSecret(key: key, salt: salt, info: info) else { throw KeyVaultError("HKDF failed") }
        return out
    }

    static func hkdfSecret(key: UnsafeRawBufferPointer, salt: [UInt8], info: [UInt8]) throws(KeyVaultError) -> SecretBytes {
        guard let out = HKDF.deriveSecret(key: key, salt: salt, info: info) else { throw KeyVaultError("HKDF failed") }
        return out
    }

    /// AES-256-GCM with a 12-byte nonce and a 16-byte tag appended to the ciphertext.
    static func gcm(encrypt: Bool, key: [UInt8], nonce: [UInt8], aad: [UInt8], input: [UInt8]) throws(KeyVaultError) -> [UInt8] {
        guard let out = Cipher.aes256GCM(encrypt: encrypt, key: key, nonce: nonce, aad: aad, input: input) else {
            throw KeyVaultError(encrypt ? "sealing failed" : "the sealed key does not open with this master key")
        }
        return out
    }

    static func gcm(encrypt: Bool, key: UnsafeRawBufferPointer, nonce: [UInt8], aad: [UInt8], input: [UInt8]) throws(KeyVaultError) -> [UInt8] {
        guard let out = Cipher.aes256GCM(encrypt: encrypt, key: key, nonce: nonce, aad: aad, input: input) else {
            throw KeyVaultError(encrypt ? "sealing failed" : "the sealed key does not open with this master key")
        }
        return out
    }
}

public struct KeyVaultError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
