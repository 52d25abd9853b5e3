import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore

/// Sign-in challenges that need no storage, so sign-in options cost no database round trip and
/// any instance of a deployment can finish a sign-in another began. The challenge is itself
/// AES-256-GCM under a key every instance derives from the master key:
///
///     version (1) ‖ nonce (12) ‖ sealed { random (8) ‖ expiry, ms since 1970 (8) } ‖ tag (16)
///
/// with the purpose and the rpID as associated data. Only this deployment can make one that opens
/// (so a client cannot choose its challenge or its expiry), it opens only as a sign-in challenge
/// for this rpID, and 20 of its bytes are fresh randomness (WebAuthn asks for at least 16).
/// Single use is the store's: the sign-in records the challenge's SHA-256 in its own transaction
/// (`UsedChallenge`), as does a refused one.
struct SealedChallenges: Sendable {
    static let version: UInt8 = 1
    /// 45 bytes: 60 base64url characters.
    static let length = 1 + 12 + 16 + 16

    private let key: SharedSecret
    private let aad: [UInt8]

    /// The key comes from the master key: every instance that shares it opens every challenge.
    /// (Should the derivation ever fail, a random key: challenges then open on this instance only.)
    init(vault: KeyVault, rpID: String) {
        var key = (try? vault.derive("sign-in challenge seal v1", length: 32)) ?? randomBytes(32)
        self.key = SharedSecret(taking: &key)
        aad = Array("keyfob sign-in challenge v1\u{0}\(rpID)".utf8)
    }

    /// Whether `challenge` has this kind's shape (a stored challenge is 32 random bytes). Whether it
    /// is one is `open`'s to say.
    static func isSealed(_ challenge: [UInt8]) -> Bool { challenge.count == length && challenge[0] == version }

    /// A new challenge that expires at `expiresAt`.
    func issue(expiresAt: Date) -> [UInt8] {
        var plain = randomBytes(8)
        let milliseconds = UInt64(max(0, expiresAt.timeIntervalSince1970 * 1000))
        withUnsafeBytes(of: milliseconds.bigEndian) { plain.append(contentsOf: $0) }
        let nonce = randomBytes(12)
        let sealed = key.bytes.withUnsafeBytes { Cipher.aes256GCM(encrypt: true, key: $0, nonce: nonce, aad: aad, input: plain) }
        // Sealing with a 32-byte key and a 12-byte nonce cannot fail; a failure would give a
        // challenge that never opens (a refused sign-in), never one that opens wrongly.
        return [Self.version] + nonce + (sealed ?? randomBytes(32))
    }

    /// The expiry sealed in `challenge`, when this deployment made it for this rpID; nil otherwise.
    func open(_ challenge: [UInt8]) -> Date? {
        guard Self.isSealed(challenge) else { return nil }
        let nonce = Array(challenge[1..<13])
        guard
            let plain = key.bytes.withUnsafeBytes({
                Cipher.aes256GCM(encrypt: false, key: $0, nonce: nonce, aad: aad, input: Array(challenge[13...]))
            }), plain.count == 16
        else { return nil }
        let milliseconds = plain[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// The `challengeKey` a client may echo back: the nonce's first 11 bytes, so it follows from
    /// the challenge and needs no storage either.
    static func key(of challenge: [UInt8]) -> String { Base64URL.encode(Array(challenge[1..<12])) }

    /// What the sign-in records once the challenge is answered.
    static func used(_ challenge: [UInt8], expiresAt: Date) -> UsedChallenge {
        UsedChallenge(hash: sha256(challenge), expiresAt: expiresAt)
    }
}
