import Foundation
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto
import WebAuthn

/// A browser that has signed in here before: a long-lived cookie holding a random value and the
/// server's MAC of it, set by every successful passkey ceremony. It names no account and opens
/// nothing; it only lets the browser start a ceremony from the reserve of the server-wide cap on
/// unfinished ceremonies (`ChallengeRecord.mayUseReserve`), so a flood from strangers that fills
/// the cap does not lock out the people who use this server.
struct ReturningDevice: Sendable {
    static let cookieName = "keyfob_device"
    static let secureCookieName = "__Host-keyfob_device"
    /// 400 days, the most browsers keep a cookie.
    static let lifetime = 400 * 24 * 3600

    /// HKDF-Extract of the MAC key (empty salt), done once and keyed once: a cookie's MAC is then
    /// one HMAC from a copy of the keyed state.
    private let macKey: HMACSHA256Key?

    /// The MAC key comes from the master key, so every instance of a deployment knows its cookies.
    /// (Were OpenSSL's HKDF to fail, a random key: cookies then are recognised by this process only.)
    init(vault: KeyVault) {
        let key = (try? vault.derive("returning-device cookie v1", length: 32)) ?? randomBytes(32)
        macKey = HMACSHA256Key(key: HKDF.extract(salt: [], ikm: key))
    }

    /// A new cookie's `Set-Cookie` value (nil if the MAC could not be computed: no cookie then).
    func cookie(secure: Bool) -> String? {
        let nonce = randomBytes(16)
        guard let tag = mac(nonce) else { return nil }
        let value = Base64URL.encode(nonce + tag)
        return secure
            ? "\(Self.secureCookieName)=\(value); Path=/; Max-Age=\(Self.lifetime); HttpOnly; SameSite=Lax; Secure"
            : "\(Self.cookieName)=\(value); Path=/; Max-Age=\(Self.lifetime); HttpOnly; SameSite=Lax"
    }

    /// Whether the request carries a cookie this server made.
    func recognises(_ request: Request) -> Bool {
        guard let value = Sessions.ownCookie(request, secure: Self.secureCookieName, plain: Self.cookieName),
            value.count == 43, let bytes = Base64URL.decode(value), bytes.count == 32
        else { return false }
        guard let expected = mac(Array(bytes.prefix(16))) else { return false }
        // Constant time: the comparison does not tell how much of a forged MAC was right.
        return constantTimeEqual(expected, Array(bytes.suffix(16)))
    }

    /// HKDF-Expand keyed by the server's derived key is a PRF of the nonce: a MAC.
    /// HKDF-SHA256(key, salt: empty, info: nonce), 16 bytes — the first block of HKDF-Expand,
    /// computed as that one HMAC (the cookies of earlier versions stay valid; a test compares).
    func mac(_ nonce: [UInt8]) -> [UInt8]? {
        macKey.map { Array($0.mac(nonce, [1]).prefix(16)) }
    }
}
