import Foundation
import KeyfobCrypto

/// NIP-44 version 2: secp256k1 ECDH, HKDF, padding, ChaCha20, HMAC-SHA256.
///
/// Plaintexts up to 65,535 bytes use the 2-byte length prefix of the original spec. Longer ones
/// (nips#1907, 2026) write a zero u16 followed by a u32 length; this module decrypts those up to
/// `maxPlaintextLength` and encrypts them only when asked (`allowExtended`).
public enum NIP44 {
    public static let version: UInt8 = 2
    /// The largest plaintext decrypted (extended prefix included); bounded memory per request.
    public static let maxPlaintextLength = 1 << 20
    static let salt = Array("nip44-v2".utf8)

    /// The conversation key: HKDF-extract(salt "nip44-v2", shared x).
    public static func conversationKey(_ key: SecretKey, _ peer: PublicKey) throws(NostrError) -> [UInt8] {
        var shared = try key.sharedX(with: peer)
        defer { wipe(&shared) }
        return HKDF.extract(salt: salt, ikm: shared)
    }

    /// chacha key, chacha nonce, hmac key from HKDF-expand(conversation key, nonce, 76).
    static func messageKeys(_ conversationKey: [UInt8], nonce: [UInt8]) -> (chachaKey: [UInt8], chachaNonce: [UInt8], hmacKey: [UInt8]) {
        var keys = HKDF.expand(prk: conversationKey, info: nonce, length: 76)
        defer { wipe(&keys) }
        return (Array(keys[0..<32]), Array(keys[32..<44]), Array(keys[44..<76]))
    }

    /// The padded length for a plaintext of `length` bytes (NIP-44 `calc_padded_len`).
    public static func paddedLength(_ length: Int) -> Int {
        guard length > 32 else { return 32 }
        let nextPower = 1 << (Int.bitWidth - (length - 1).leadingZeroBitCount)
        let chunk = nextPower <= 256 ? 32 : nextPower / 8
        return chunk * ((length - 1) / chunk + 1)
    }

    static func pad(_ plaintext: [UInt8], allowExtended: Bool) throws(NostrError) -> [UInt8] {
        let n = plaintext.count
        guard n >= 1 else { throw .content("NIP-44 plaintext must not be empty") }
        var out: [UInt8]
        if n <= 65535 {
            out = [UInt8(n >> 8), UInt8(n & 0xff)]
        } else {
            guard allowExtended, n <= maxPlaintextLength else {
                throw .init(.payloadTooLarge, "NIP-44 plaintext is over 65535 bytes")
            }
            out = [0, 0, UInt8(n >> 24 & 0xff), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)]
        }
        out.reserveCapacity(out.count + paddedLength(n))
        out += plaintext
        out += [UInt8](repeating: 0, count: paddedLength(n) - n)
        return out
    }

    static func unpad(_ padded: [UInt8]) throws(NostrError) -> [UInt8] {
        guard padded.count >= 2 else { throw .decrypt("NIP-44 padding is invalid") }
        var length = Int(padded[0]) << 8 | Int(padded[1])
        var start = 2
        if length == 0 {
            guard padded.count >= 6 else { throw .decrypt("NIP-44 padding is invalid") }
            length = Int(padded[2]) << 24 | Int(padded[3]) << 16 | Int(padded[4]) << 8 | Int(padded[5])
            start = 6
            guard length > 65535 else { throw .decrypt("NIP-44 extended length prefix for a short plaintext") }
        }
        guard length >= 1, length <= maxPlaintextLength, padded.count == start + paddedLength(length) else {
            throw .decrypt("NIP-44 padding is invalid")
        }
        return Array(padded[start..<(start + length)])
    }

    /// Encrypts with a given conversation key; `nonce` is random unless given (tests).
    public static func encrypt(
        _ plaintext: String, conversationKey: [UInt8], nonce: [UInt8]? = nil,
        allowExtended: Bool = false
    ) throws(NostrError) -> String {
        let nonce = nonce ?? randomBytes(32)
        guard nonce.count == 32, conversationKey.count == 32 else { throw .init(.internalError, "bad NIP-44 key or nonce") }
        var keys = messageKeys(conversationKey, nonce: nonce)
        defer { wipe(&keys.chachaKey); wipe(&keys.hmacKey) }
        var padded = try pad(Array(plaintext.utf8), allowExtended: allowExtended)
        defer { wipe(&padded) }
        guard let ciphertext = Cipher.chacha20(key: keys.chachaKey, nonce: keys.chachaNonce, input: padded) else {
            throw .init(.internalError, "ChaCha20 failed")
        }
        let mac = hmacSHA256(key: keys.hmacKey, nonce, ciphertext)
        return Data([version] + nonce + ciphertext + mac).base64EncodedString()
    }

    public static func encrypt(_ plaintext: String, from key: SecretKey, to peer: PublicKey) throws(NostrError) -> String {
        var ck = try conversationKey(key, peer)
        defer { wipe(&ck) }
        return try encrypt(plaintext, conversationKey: ck)
    }

    /// Decrypts; the MAC is checked in constant time before anything is decrypted.
    public static func decrypt(_ payload: String, conversationKey: [UInt8]) throws(NostrError) -> String {
        guard let first = payload.utf8.first else { throw .decrypt("NIP-44 payload is empty") }
        guard first != UInt8(ascii: "#") else { throw .decrypt("NIP-44 version is not supported") }
        let maxBase64 = (maxPlaintextLength + 6 + 99) * 4 / 3 + 4
        guard payload.utf8.count >= 132, payload.utf8.count <= maxBase64 else { throw .decrypt("NIP-44 payload has an invalid length") }
        guard let data = Data(base64Encoded: payload) else { throw .decrypt("NIP-44 payload is not base64") }
        let bytes = [UInt8](data)
        guard bytes.count >= 99 else { throw .decrypt("NIP-44 payload is too short") }
        guard bytes[0] == version else { throw .decrypt("NIP-44 version \(bytes[0]) is not supported") }
        let nonce = Array(bytes[1..<33])
        let ciphertext = Array(bytes[33..<(bytes.count - 32)])
        let mac = Array(bytes[(bytes.count - 32)...])
        var keys = messageKeys(conversationKey, nonce: nonce)
        defer { wipe(&keys.chachaKey); wipe(&keys.hmacKey) }
        guard constantTimeEqual(hmacSHA256(key: keys.hmacKey, nonce, ciphertext), mac) else {
            throw .decrypt("NIP-44 MAC does not verify (wrong key or corrupted payload)")
        }
        guard var padded = Cipher.chacha20(key: keys.chachaKey, nonce: keys.chachaNonce, input: ciphertext) else {
            throw .decrypt("ChaCha20 failed")
        }
        defer { wipe(&padded) }
        var plaintext = try unpad(padded)
        defer { wipe(&plaintext) }
        guard let text = String(validating: plaintext, as: UTF8.self) else { throw .decrypt("NIP-44 plaintext is not UTF-8") }
        return text
    }

    public static func decrypt(_ payload: String, with key: SecretKey, from peer: PublicKey) throws(NostrError) -> String {
        var ck = try conversationKey(key, peer)
        defer { wipe(&ck) }
        return try decrypt(payload, conversationKey: ck)
    }
}
