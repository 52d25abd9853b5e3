import COpenSSL
import Foundation

/// The master key at work (DESIGN.md §4.1): one key per purpose derived from it with HKDF-SHA256
/// (nostr keys, NIP-46 signer keys, waiting requests, derived secrets), and AES-256-GCM sealing
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
    }

    /// Made once in `init`; each wipes itself when the vault goes away.
    private let nostrKeysKey: SecretBytes
    private let bunkerKeysKey: SecretBytes
    private let pendingRequestsKey: SecretBytes
    private let derivedSecretsKey: SecretBytes

    /// Runs `body` with `purpose`'s key.
    private func withKey<R>(_ purpose: Purpose, _ body: (UnsafeRawBufferPointer) throws(KeyVaultError) -> R) throws(KeyVaultError) -> R {
        switch purpose {
        case .nostrKeys: try nostrKeysKey.withUnsafeBytes(body)
        case .bunkerKeys: try bunkerKeysKey.withUnsafeBytes(body)
        case .pendingRequests: try pendingRequestsKey.withUnsafeBytes(body)
        case .derivedSecrets: try derivedSecretsKey.withUnsafeBytes(body)
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
        -> (nonce: [UInt8], sealed: [UInt8]) {
        var nonce = [UInt8](repeating: 0, count: 12)
        guard RAND_bytes(&nonce, 12) == 1 else { throw KeyVaultError("the random generator failed") }
        let aad = Self.associatedData(userID: userID, version: version, passkeySealed: passkeySealed)
        let sealed = try withKey(.nostrKeys) { key throws(KeyVaultError) in try Self.gcm(encrypt: true, key: key, nonce: nonce, aad: aad, input: secret) }
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
        var nonce = [UInt8](repeating: 0, count: 12)
        guard RAND_bytes(&nonce, 12) == 1 else { throw KeyVaultError("the random generator failed") }
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
        var nonce = [UInt8](repeating: 0, count: 12)
        guard RAND_bytes(&nonce, 12) == 1 else { throw KeyVaultError("the random generator failed") }
        let aad = Array("keyfob:\(context)".utf8)
        return (nonce, try withKey(purpose) { key throws(KeyVaultError) in try Self.gcm(encrypt: true, key: key, nonce: nonce, aad: aad, input: bytes) })
    }

    /// Opens what `seal(_:for:context:)` sealed; nil when anything does not match. NIP-46 signer
    /// keys sealed before keys were per purpose (under the nostr keys' key) still open, until the
    /// next `rotate-master-key` seals them under their own.
    func open(nonce: [UInt8], sealed: [UInt8], for purpose: Purpose, context: String) -> [UInt8]? {
        guard nonce.count == 12, sealed.count >= 16 else { return nil }
        let aad = Array("keyfob:\(context)".utf8)
        for candidate in purpose == .bunkerKeys ? [purpose, .nostrKeys] : [purpose] {
            if let opened = try? withKey(candidate, { key throws(KeyVaultError) in
                try Self.gcm(encrypt: false, key: key, nonce: nonce, aad: aad, input: sealed)
            }) { return opened }
        }
        return nil
    }

    // MARK: OpenSSL

    /// HKDF-SHA256 (RFC 5869) through OpenSSL's KDF, 32 bytes out.
    static func hkdf(key: [UInt8], salt: [UInt8], info: [UInt8], length: Int = 32) throws(KeyVaultError) -> [UInt8] {
        try withBytes(key) { raw throws(KeyVaultError) in try hkdf(key: raw, salt: salt, info: info, length: length) }
    }

    /// HKDF-SHA256 whose output is a key: it never exists as an array past this call.
    static func hkdfSecret(key: [UInt8], salt: [UInt8], info: [UInt8]) throws(KeyVaultError) -> SecretBytes {
        var out = try hkdf(key: key, salt: salt, info: info)
        return SecretBytes(taking: &out)
    }

    static func hkdfSecret(key: UnsafeRawBufferPointer, salt: [UInt8], info: [UInt8]) throws(KeyVaultError) -> SecretBytes {
        var out = try hkdf(key: key, salt: salt, info: info)
        return SecretBytes(taking: &out)
    }

    /// `body` with the array's bytes, keeping the typed error.
    private static func withBytes<R>(_ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(KeyVaultError) -> R) throws(KeyVaultError) -> R {
        let result: Result<R, KeyVaultError> = bytes.withUnsafeBytes { raw in
            do throws(KeyVaultError) { return .success(try body(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    static func hkdf(key: UnsafeRawBufferPointer, salt: [UInt8], info: [UInt8], length: Int = 32) throws(KeyVaultError) -> [UInt8] {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "HKDF", nil) else { throw KeyVaultError("HKDF is unavailable") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: length)
        var outLength = length
        guard EVP_PKEY_derive_init(ctx) == 1,
              EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) == 1,
              EVP_PKEY_CTX_set1_hkdf_salt(ctx, salt, Int32(salt.count)) == 1,
              EVP_PKEY_CTX_set1_hkdf_key(ctx, key.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(key.count)) == 1,
              EVP_PKEY_CTX_add1_hkdf_info(ctx, info, Int32(info.count)) == 1,
              EVP_PKEY_derive(ctx, &out, &outLength) == 1, outLength == length else {
            ERR_clear_error()
            throw KeyVaultError("HKDF failed")
        }
        return out
    }

    /// AES-256-GCM with a 12-byte nonce and a 16-byte tag appended to the ciphertext.
    static func gcm(encrypt: Bool, key: [UInt8], nonce: [UInt8], aad: [UInt8], input: [UInt8]) throws(KeyVaultError) -> [UInt8] {
        try withBytes(key) { raw throws(KeyVaultError) in try gcm(encrypt: encrypt, key: raw, nonce: nonce, aad: aad, input: input) }
    }

    static func gcm(encrypt: Bool, key: UnsafeRawBufferPointer, nonce: [UInt8], aad: [UInt8], input: [UInt8]) throws(KeyVaultError) -> [UInt8] {
        guard key.count == 32 else { throw KeyVaultError("an AES-256 key is 32 bytes") }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw KeyVaultError("cipher context allocation failed") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let body = encrypt ? input : Array(input.dropLast(16))
        var tag = encrypt ? [UInt8](repeating: 0, count: 16) : Array(input.suffix(16))
        var out = [UInt8](repeating: 0, count: body.count + 16)
        var length: Int32 = 0, finalLength: Int32 = 0
        let ok: Bool = out.withUnsafeMutableBufferPointer { buffer in
            guard EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), nil, key.baseAddress?.assumingMemoryBound(to: UInt8.self), nonce,
                                    encrypt ? 1 : 0) == 1,
                  EVP_CipherUpdate(ctx, nil, &length, aad, Int32(aad.count)) == 1,
                  EVP_CipherUpdate(ctx, buffer.baseAddress, &length, body, Int32(body.count)) == 1 else { return false }
            if !encrypt {
                guard EVP_CIPHER_CTX_ctrl(ctx, KF_EVP_CTRL_GCM_SET_TAG, 16, &tag) == 1 else { return false }
            }
            // Decrypting, Final fails when the tag does not match: nothing unauthenticated comes out.
            guard EVP_CipherFinal_ex(ctx, buffer.baseAddress! + Int(length), &finalLength) == 1 else { return false }
            if encrypt {
                guard EVP_CIPHER_CTX_ctrl(ctx, KF_EVP_CTRL_GCM_GET_TAG, 16, &tag) == 1 else { return false }
            }
            return true
        }
        guard ok else {
            ERR_clear_error()
            out.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) }
            throw KeyVaultError(encrypt ? "sealing failed" : "the sealed key does not open with this master key")
        }
        out.removeLast(out.count - Int(length + finalLength))
        return encrypt ? out + tag : out
    }
}

public struct KeyVaultError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
