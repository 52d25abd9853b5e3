import COpenSSL

/// Ed25519 through OpenSSL, for Substrate's `ed25519` accounts (the 32-byte seed is the secret).
public enum Ed25519 {
    public static func publicKey(seed: [UInt8]) -> [UInt8]? {
        guard let key = privateKey(seed) else { return nil }
        defer { EVP_PKEY_free(key) }
        var out = [UInt8](repeating: 0, count: 32)
        var length = 32
        guard EVP_PKEY_get_raw_public_key(key, &out, &length) == 1, length == 32 else { ERR_clear_error(); return nil }
        return out
    }

    public static func sign(_ message: [UInt8], seed: [UInt8]) -> [UInt8]? {
        guard let key = privateKey(seed), let ctx = EVP_MD_CTX_new() else { return nil }
        defer {
            EVP_PKEY_free(key)
            EVP_MD_CTX_free(ctx)
        }
        var signature = [UInt8](repeating: 0, count: 64)
        var length = 64
        guard EVP_DigestSignInit(ctx, nil, nil, nil, key) == 1,
            EVP_DigestSign(ctx, &signature, &length, message, message.count) == 1, length == 64
        else { ERR_clear_error(); return nil }
        return signature
    }

    public static func verify(signature: [UInt8], message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard signature.count == 64, publicKey.count == 32,
            let key = EVP_PKEY_new_raw_public_key(KF_EVP_PKEY_ED25519, nil, publicKey, 32)
        else { ERR_clear_error(); return false }
        defer { EVP_PKEY_free(key) }
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        let ok =
            EVP_DigestVerifyInit(ctx, nil, nil, nil, key) == 1
            && EVP_DigestVerify(ctx, signature, 64, message, message.count) == 1
        if !ok { ERR_clear_error() }
        return ok
    }

    private static func privateKey(_ seed: [UInt8]) -> OpaquePointer? {
        guard seed.count == 32 else { return nil }
        let key = EVP_PKEY_new_raw_private_key(KF_EVP_PKEY_ED25519, nil, seed, 32)
        if key == nil { ERR_clear_error() }
        return key
    }
}
