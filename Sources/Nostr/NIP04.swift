import Foundation
import KeyfobCrypto

/// NIP-04 encrypted direct messages: AES-256-CBC under the unhashed x coordinate of
/// ECDH, written `base64(ciphertext)?iv=base64(iv)`. Deprecated by NIP-44, still widely used.
public enum NIP04 {
    /// Largest ciphertext payload accepted for decryption.
    public static let maxPayloadLength = 512 * 1024

    public static func encrypt(_ plaintext: String, from key: SecretKey, to peer: PublicKey, iv: [UInt8]? = nil) throws(NostrError) -> String {
        var shared = try key.sharedX(with: peer)
        defer { wipe(&shared) }
        let iv = iv ?? randomBytes(16)
        guard let ciphertext = Cipher.aes256CBC(encrypt: true, key: shared, iv: iv, input: Array(plaintext.utf8)) else {
            throw .init(.internalError, "NIP-04 encryption failed")
        }
        return Data(ciphertext).base64EncodedString() + "?iv=" + Data(iv).base64EncodedString()
    }

    public static func decrypt(_ payload: String, with key: SecretKey, from peer: PublicKey) throws(NostrError) -> String {
        guard payload.utf8.count <= maxPayloadLength else { throw .init(.payloadTooLarge, "NIP-04 payload is too large") }
        guard let separator = payload.range(of: "?iv="),
            let ciphertext = Data(base64Encoded: String(payload[..<separator.lowerBound])), !ciphertext.isEmpty,
            ciphertext.count % 16 == 0,
            let iv = Data(base64Encoded: String(payload[separator.upperBound...])), iv.count == 16
        else {
            throw .decrypt("not a NIP-04 payload (base64 ciphertext ?iv= base64 16-byte IV)")
        }
        return try decrypt(ciphertext: [UInt8](ciphertext), iv: [UInt8](iv), with: key, from: peer)
    }

    static func decrypt(ciphertext: [UInt8], iv: [UInt8], with key: SecretKey, from peer: PublicKey) throws(NostrError) -> String {
        var shared = try key.sharedX(with: peer)
        defer { wipe(&shared) }
        guard var plaintext = Cipher.aes256CBC(encrypt: false, key: shared, iv: iv, input: ciphertext) else {
            throw .decrypt("NIP-04 decryption failed (wrong key or corrupted payload)")
        }
        defer { wipe(&plaintext) }
        guard let text = String(validating: plaintext, as: UTF8.self) else { throw .decrypt("NIP-04 plaintext is not UTF-8") }
        return text
    }
}
