import Foundation
import KeyfobCrypto

/// NIP-49 `ncryptsec`: a secret key encrypted under a password (scrypt + XChaCha20-Poly1305).
public enum NIP49 {
    /// How the key was handled before encryption (the associated data byte).
    public enum KeySecurity: UInt8, Sendable {
        case unknown = 0x02, insecure = 0x00, secure = 0x01
    }

    /// The password as NIP-49 wants it: NFKC-normalized UTF-8.
    static func normalize(_ password: String) -> [UInt8] {
        Array(password.precomposedStringWithCompatibilityMapping.utf8)
    }

    public static func encrypt(
        _ key: SecretKey, password: String, logN: UInt8 = 16,
        security: KeySecurity = .unknown
    ) throws(NostrError) -> String {
        let salt = randomBytes(16), nonce = randomBytes(24)
        var pw = normalize(password)
        defer { wipe(&pw) }
        guard var symmetric = scrypt(password: pw, salt: salt, logN: logN, length: 32) else {
            throw .init(.internalError, "scrypt failed")
        }
        defer { wipe(&symmetric) }
        let sealed = key.withUnsafeSecretBytes {
            Cipher.xchacha20Poly1305(encrypt: true, key: symmetric, nonce24: nonce, aad: [security.rawValue], input: $0)
        }
        guard let sealed else { throw .init(.internalError, "XChaCha20-Poly1305 failed") }
        return Bech32.encode(hrp: "ncryptsec", data: [0x02, logN] + salt + nonce + [security.rawValue] + sealed)
    }

    /// Decrypts an ncryptsec; a wrong password or any tampering is `decrypt_failed`.
    /// `maxLogN` caps scrypt's cost: memory is 2^(log_n + 10) bytes (log_n 20 = 1 GiB), so a server
    /// decrypting what strangers send sets it lower.
    public static func decrypt(_ ncryptsec: String, password: String, maxLogN: UInt8 = 20) throws(NostrError) -> SecretKey {
        guard let (hrp, data) = Bech32.decode(ncryptsec), hrp == "ncryptsec", data.count == 91 else {
            throw .content("not an ncryptsec string")
        }
        guard data[0] == 0x02 else { throw .content("ncryptsec version \(data[0]) is not supported") }
        let logN = data[1]
        // scrypt's cost is 2^log_n and must be at least 2: log_n 0 is no ncryptsec any encoder writes.
        guard logN >= 1 else { throw .content("ncryptsec log_n 0 is not valid (scrypt needs at least 1)") }
        guard logN <= min(maxLogN, 20) else {
            throw .content("ncryptsec asks for too much memory (log_n \(logN) > \(min(maxLogN, 20))); re-encrypt it with a lower log_n")
        }
        let salt = Array(data[2..<18]), nonce = Array(data[18..<42]), security = data[42]
        var pw = normalize(password)
        defer { wipe(&pw) }
        guard var symmetric = scrypt(password: pw, salt: salt, logN: logN, length: 32) else {
            throw .init(.internalError, "scrypt failed")
        }
        defer { wipe(&symmetric) }
        guard
            var secret = Cipher.xchacha20Poly1305(
                encrypt: false, key: symmetric, nonce24: nonce, aad: [security],
                input: Array(data[43...])), secret.count == 32
        else {
            throw .decrypt("wrong password or corrupted ncryptsec")
        }
        defer { wipe(&secret) }
        return try SecretKey(bytes: secret)
    }
}
