import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore

/// Sign-in challenges that need no storage, so sign-in options cost no database round trip and
/// any instance of a deployment can finish a sign-in another began. The challenge carries its own
/// expiry, sealed by a MAC under a key every instance derives from the master key:
///
///     version (1) ‖ random (16) ‖ expiry, ms since 1970, big-endian (8) ‖ HMAC-SHA-256 (16)
///
/// the MAC over the purpose, the rpID and the first 25 bytes. Only this deployment can make one
/// that verifies (so a client chooses neither its challenge nor its expiry), it verifies only as a
/// sign-in challenge for this rpID, and 16 of its bytes are fresh randomness (WebAuthn's minimum).
/// A MAC rather than an AEAD: the expiry need not be secret, and nothing depends on a nonce never
/// repeating. Single use is the store's: a sign-in records the challenge's SHA-256 in its own
/// transaction (`UsedChallenge`).
struct SealedChallenges: Sendable {
    static let version: UInt8 = 1
    /// 41 bytes: 55 base64url characters.
    static let length = 1 + 16 + 8 + 16
    /// How long a used challenge's record outlives the challenge: longer than a sign-in can take
    /// (its store calls are bounded by their timeout) plus any drift between instances' clocks, so
    /// no instance still takes the challenge once its record has been swept.
    static let recordGrace: TimeInterval = 600

    private let mac: HMACSHA256Key?
    private let context: [UInt8]

    /// The key comes from the master key: every instance that shares it opens every challenge.
    /// (Should the derivation fail, no key: every challenge is then refused, never accepted.)
    init(vault: KeyVault, rpID: String) {
        mac = (try? vault.derive("sign-in challenge mac v1", length: 32)).flatMap { HMACSHA256Key(key: $0) }
        context = Array("keyfob sign-in challenge v1\u{0}\(rpID)\u{0}".utf8)
    }

    /// Whether `challenge` has this kind's shape (a stored challenge is 32 random bytes). Whether it
    /// is one is `open`'s to say.
    static func isSealed(_ challenge: [UInt8]) -> Bool { challenge.count == length && challenge[0] == version }

    private func tag(_ body: ArraySlice<UInt8>) -> [UInt8]? {
        mac.map { Array($0.mac(context + body).prefix(16)) }
    }

    /// A new challenge that expires at `expiresAt`.
    func issue(expiresAt: Date) -> [UInt8] {
        var challenge = [Self.version] + randomBytes(16)
        let milliseconds = UInt64(max(0, expiresAt.timeIntervalSince1970 * 1000))
        withUnsafeBytes(of: milliseconds.bigEndian) { challenge.append(contentsOf: $0) }
        // Without a key, a tag that never verifies: the sign-in is refused, never let through.
        challenge += tag(challenge[...]) ?? randomBytes(16)
        return challenge
    }

    /// The expiry in `challenge`, when this deployment made it for this rpID; nil otherwise.
    func open(_ challenge: [UInt8]) -> Date? {
        guard Self.isSealed(challenge), let expected = tag(challenge[..<25]),
            constantTimeEqual(Array(challenge[25...]), expected)
        else { return nil }
        let milliseconds = challenge[17..<25].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }

    /// The `challengeKey` a client may echo back: the random part's first 11 bytes, so it follows
    /// from the challenge and needs no storage either.
    static func key(of challenge: [UInt8]) -> String { Base64URL.encode(Array(challenge[1..<12])) }

    /// What the sign-in records, kept `recordGrace` past the challenge's expiry.
    static func used(_ challenge: [UInt8], expiresAt: Date) -> UsedChallenge {
        UsedChallenge(hash: sha256(challenge), expiresAt: expiresAt.addingTimeInterval(recordGrace))
    }
}
