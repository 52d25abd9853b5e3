import COpenSSL

/// OpenSSL's ciphers, each one call: nil on a bad key or nonce size, or (opening) bytes that do
/// not authenticate. AEAD outputs are ciphertext ‖ 16-byte tag.
public enum Cipher {
    /// AES-256-GCM with a 12-byte nonce (Keyfob's own sealing).
    public static func aes256GCM(
        encrypt: Bool, key: UnsafeRawBufferPointer, nonce: [UInt8], aad: [UInt8],
        input: [UInt8]
    ) -> [UInt8]? {
        guard key.count == 32, nonce.count == 12 else { return nil }
        return aead(EVP_aes_256_gcm(), encrypt: encrypt, key: key, nonce: nonce, aad: aad, input: input)
    }

    public static func aes256GCM(encrypt: Bool, key: [UInt8], nonce: [UInt8], aad: [UInt8], input: [UInt8]) -> [UInt8]? {
        key.withUnsafeBytes { aes256GCM(encrypt: encrypt, key: $0, nonce: nonce, aad: aad, input: input) }
    }

    /// ChaCha20-Poly1305 (RFC 8439).
    public static func chacha20Poly1305(encrypt: Bool, key: [UInt8], nonce: [UInt8], aad: [UInt8], input: [UInt8]) -> [UInt8]? {
        guard key.count == 32, nonce.count == 12 else { return nil }
        return key.withUnsafeBytes { aead(EVP_chacha20_poly1305(), encrypt: encrypt, key: $0, nonce: nonce, aad: aad, input: input) }
    }

    /// XChaCha20-Poly1305 (NIP-49): HChaCha20 subkey, then ChaCha20-Poly1305 with nonce 0^4 ‖ nonce[16..<24].
    public static func xchacha20Poly1305(encrypt: Bool, key: [UInt8], nonce24: [UInt8], aad: [UInt8], input: [UInt8]) -> [UInt8]? {
        guard key.count == 32, nonce24.count == 24 else { return nil }
        var subkey = hchacha20(key: key, nonce16: Array(nonce24[0..<16]))
        defer { wipe(&subkey) }
        return chacha20Poly1305(encrypt: encrypt, key: subkey, nonce: [0, 0, 0, 0] + nonce24[16..<24], aad: aad, input: input)
    }

    /// AES-256-CBC with PKCS#7 padding (NIP-04).
    public static func aes256CBC(encrypt: Bool, key: [UInt8], iv: [UInt8], input: [UInt8]) -> [UInt8]? {
        guard key.count == 32, iv.count == 16 else { return nil }
        return stream(EVP_aes_256_cbc(), encrypt: encrypt, key: key, iv: iv, input: input)
    }

    /// ChaCha20 (RFC 8439 IETF variant, counter 0; NIP-44): OpenSSL's 16-byte IV is counter(LE) ‖ nonce.
    public static func chacha20(key: [UInt8], nonce: [UInt8], input: [UInt8]) -> [UInt8]? {
        guard key.count == 32, nonce.count == 12 else { return nil }
        return stream(EVP_chacha20(), encrypt: true, key: key, iv: [0, 0, 0, 0] + nonce, input: input)
    }

    private static func stream(_ type: OpaquePointer?, encrypt: Bool, key: [UInt8], iv: [UInt8], input: [UInt8]) -> [UInt8]? {
        guard let ctx = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: input.count + 32)
        var length: Int32 = 0
        var final: Int32 = 0
        guard EVP_CipherInit_ex(ctx, type, nil, key, iv, encrypt ? 1 : 0) == 1,
            input.count <= Int(Int32.max) - 32,
            EVP_CipherUpdate(ctx, &out, &length, input, Int32(input.count)) == 1
        else { ERR_clear_error(); return nil }
        let ok = out.withUnsafeMutableBufferPointer { EVP_CipherFinal_ex(ctx, $0.baseAddress! + Int(length), &final) }
        guard ok == 1 else { ERR_clear_error(); wipe(&out); return nil }
        return Array(out.prefix(Int(length + final)))
    }

    /// One AEAD pass; opening, Final fails when the tag does not match, so nothing unauthenticated comes out.
    private static func aead(
        _ type: OpaquePointer?, encrypt: Bool, key: UnsafeRawBufferPointer, nonce: [UInt8], aad: [UInt8],
        input: [UInt8]
    ) -> [UInt8]? {
        guard encrypt || input.count >= 16, input.count <= Int(Int32.max) - 32, let ctx = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let body = encrypt ? input : Array(input.dropLast(16))
        var tag = encrypt ? [UInt8](repeating: 0, count: 16) : Array(input.suffix(16))
        var out = [UInt8](repeating: 0, count: body.count + 16)
        var length: Int32 = 0, finalLength: Int32 = 0
        let ok: Bool = out.withUnsafeMutableBufferPointer { buffer in
            guard EVP_CipherInit_ex(ctx, type, nil, key.baseAddress?.assumingMemoryBound(to: UInt8.self), nonce, encrypt ? 1 : 0) == 1,
                aad.isEmpty || EVP_CipherUpdate(ctx, nil, &length, aad, Int32(aad.count)) == 1,
                EVP_CipherUpdate(ctx, buffer.baseAddress, &length, body, Int32(body.count)) == 1
            else { return false }
            if !encrypt {
                guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, &tag) == 1 else { return false }
            }
            guard EVP_CipherFinal_ex(ctx, buffer.baseAddress! + Int(length), &finalLength) == 1 else { return false }
            if encrypt {
                guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, &tag) == 1 else { return false }
            }
            return true
        }
        guard ok else {
            ERR_clear_error()
            wipe(&out)
            return nil
        }
        out.removeLast(out.count - Int(length + finalLength))
        return encrypt ? out + tag : out
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
    wipe(&s)
    return out
}

private func wipe(_ words: inout [UInt32]) {
    words.withUnsafeMutableBytes { wipe($0) }
}
