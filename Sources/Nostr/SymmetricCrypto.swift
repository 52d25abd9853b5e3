import COpenSSL

// OpenSSL's symmetric primitives that NIP-04, NIP-44 and NIP-49 need, each one call.

public enum Symmetric {
    /// AES-256-CBC with PKCS#7 padding. Returns nil on a bad key/IV size or (decrypting) bad padding.
    static func aes256CBC(encrypt: Bool, key: [UInt8], iv: [UInt8], input: [UInt8]) -> [UInt8]? {
        guard key.count == 32, iv.count == 16 else { return nil }
        return cipher(EVP_aes_256_cbc(), encrypt: encrypt, key: key, iv: iv, input: input)
    }

    /// ChaCha20 (RFC 8439 IETF variant, counter 0): OpenSSL's 16-byte IV is counter(LE) || nonce.
    static func chacha20(key: [UInt8], nonce: [UInt8], input: [UInt8]) -> [UInt8]? {
        guard key.count == 32, nonce.count == 12 else { return nil }
        return cipher(EVP_chacha20(), encrypt: true, key: key, iv: [0, 0, 0, 0] + nonce, input: input)
    }

    private static func cipher(_ type: OpaquePointer?, encrypt: Bool, key: [UInt8], iv: [UInt8], input: [UInt8]) -> [UInt8]? {
        guard let ctx = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: input.count + 32)
        var length: Int32 = 0
        var final: Int32 = 0
        guard EVP_CipherInit_ex(ctx, type, nil, key, iv, encrypt ? 1 : 0) == 1,
              input.count <= Int(Int32.max) - 32,
              EVP_CipherUpdate(ctx, &out, &length, input, Int32(input.count)) == 1 else { ERR_clear_error(); return nil }
        let ok = out.withUnsafeMutableBufferPointer { EVP_CipherFinal_ex(ctx, $0.baseAddress! + Int(length), &final) }
        guard ok == 1 else { ERR_clear_error(); return nil }
        return Array(out.prefix(Int(length + final)))
    }

    /// HMAC-SHA256 over the concatenation of `parts`.
    public static func hmacSHA256(key: [UInt8], _ parts: [UInt8]...) -> [UInt8] {
        var message = parts.count == 1 ? parts[0] : parts.flatMap { $0 }
        // The joined copy may hold key material (HKDF's input, a previous block): wiped.
        defer { if parts.count != 1 { wipe(&message) } }
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        // HMAC fails only when OpenSSL cannot allocate; a zero "MAC" must never stand in for one.
        precondition(HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &out, &length) != nil && length == 32,
                     "HMAC-SHA256 failed")
        return out
    }

    /// HKDF-Extract (RFC 5869) with SHA-256.
    public static func hkdfExtract(salt: [UInt8], ikm: [UInt8]) -> [UInt8] { hmacSHA256(key: salt, ikm) }

    /// HKDF-Expand (RFC 5869) with SHA-256. Every intermediate block is wiped.
    static func hkdfExpand(prk: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(length + 32)
        var block: [UInt8] = []
        var counter: UInt8 = 1
        while out.count < length {
            let next = hmacSHA256(key: prk, block, info, [counter])
            wipe(&block)
            block = next
            out += block
            counter += 1
        }
        wipe(&block)
        let result = Array(out.prefix(length))
        wipe(&out)
        return result
    }

    /// scrypt with r = 8, p = 1 (NIP-49).
    static func scrypt(password: [UInt8], salt: [UInt8], logN: UInt8, length: Int) -> [UInt8]? {
        guard logN <= 20 else { return nil }
        var out = [UInt8](repeating: 0, count: length)
        let n = UInt64(1) << UInt64(logN)
        let maxMemory: UInt64 = 128 * n * 8 + 1024 * 1024 * 64
        let ok = password.withUnsafeBufferPointer { pw in
            EVP_PBE_scrypt(pw.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) },
                           pw.count, salt, salt.count, n, 8, 1, maxMemory, &out, length)
        }
        guard ok == 1 else { ERR_clear_error(); return nil }
        return out
    }

    /// ChaCha20-Poly1305 (RFC 8439). Encrypt returns ciphertext || tag; decrypt checks the tag.
    static func chacha20Poly1305(encrypt: Bool, key: [UInt8], nonce: [UInt8], aad: [UInt8], input: [UInt8]) -> [UInt8]? {
        guard key.count == 32, nonce.count == 12, let ctx = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var body = input
        var tag = [UInt8](repeating: 0, count: 16)
        if !encrypt {
            guard input.count >= 16 else { return nil }
            tag = Array(input.suffix(16))
            body = Array(input.dropLast(16))
        }
        var out = [UInt8](repeating: 0, count: body.count + 16)
        var length: Int32 = 0
        var final: Int32 = 0
        guard EVP_CipherInit_ex(ctx, EVP_chacha20_poly1305(), nil, key, nonce, encrypt ? 1 : 0) == 1 else { return nil }
        if !aad.isEmpty { guard EVP_CipherUpdate(ctx, nil, &length, aad, Int32(aad.count)) == 1 else { return nil } }
        guard EVP_CipherUpdate(ctx, &out, &length, body, Int32(body.count)) == 1 else { ERR_clear_error(); return nil }
        if !encrypt {
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, &tag) == 1 else { return nil }
        }
        let ok = out.withUnsafeMutableBufferPointer { EVP_CipherFinal_ex(ctx, $0.baseAddress! + Int(length), &final) }
        guard ok == 1 else { ERR_clear_error(); return nil }
        var result = Array(out.prefix(Int(length + final)))
        if encrypt {
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, &tag) == 1 else { return nil }
            result += tag
        }
        return result
    }

    static func sha256(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        _ = EVP_Digest(data, data.count, &out, nil, EVP_sha256(), nil)
        return out
    }

    /// Constant-time comparison.
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.count == b.count && CRYPTO_memcmp(a, b, a.count) == 0
    }
}

/// HChaCha20 (draft-irtf-cfrg-xchacha §2.2): derives XChaCha20's subkey. OpenSSL 3.0 has
/// no XChaCha20, so this one block function is written out here; tested against the draft's vector.
func hchacha20(key: [UInt8], nonce16: [UInt8]) -> [UInt8] {
    func u32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
    }
    var s: [UInt32] = [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574]
    for i in 0..<8 { s.append(u32(key, i * 4)) }
    for i in 0..<4 { s.append(u32(nonce16, i * 4)) }
    func quarter(_ a: Int, _ b: Int, _ c: Int, _ d: Int) {
        s[a] &+= s[b]; s[d] ^= s[a]; s[d] = s[d] << 16 | s[d] >> 16
        s[c] &+= s[d]; s[b] ^= s[c]; s[b] = s[b] << 12 | s[b] >> 20
        s[a] &+= s[b]; s[d] ^= s[a]; s[d] = s[d] << 8 | s[d] >> 24
        s[c] &+= s[d]; s[b] ^= s[c]; s[b] = s[b] << 7 | s[b] >> 25
    }
    for _ in 0..<10 {
        quarter(0, 4, 8, 12); quarter(1, 5, 9, 13); quarter(2, 6, 10, 14); quarter(3, 7, 11, 15)
        quarter(0, 5, 10, 15); quarter(1, 6, 11, 12); quarter(2, 7, 8, 13); quarter(3, 4, 9, 14)
    }
    var out: [UInt8] = []
    for word in s[0..<4] + s[12..<16] { out += [UInt8(word & 0xff), UInt8(word >> 8 & 0xff), UInt8(word >> 16 & 0xff), UInt8(word >> 24)] }
    return out
}

/// XChaCha20-Poly1305 (NIP-49): HChaCha20 subkey, then ChaCha20-Poly1305 with nonce 0^4 || nonce[16..<24].
func xchacha20Poly1305(encrypt: Bool, key: [UInt8], nonce24: [UInt8], aad: [UInt8], input: [UInt8]) -> [UInt8]? {
    guard key.count == 32, nonce24.count == 24 else { return nil }
    var subkey = hchacha20(key: key, nonce16: Array(nonce24[0..<16]))
    defer { wipe(&subkey) }
    return Symmetric.chacha20Poly1305(encrypt: encrypt, key: subkey, nonce: [0, 0, 0, 0] + nonce24[16..<24], aad: aad, input: input)
}
