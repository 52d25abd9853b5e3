import Foundation
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto

/// A browser that signed in to an account whose key its passkeys seal: a long-lived cookie
/// naming that account (its id and the server's MAC of it). The next sign-in in that browser
/// offers that account's passkeys with their own wraps' PRF salts, so one prompt both signs in
/// and opens the key, instead of a sign-in and then an Unlock. It opens nothing by itself: it
/// earns only the account's passkey ids and salts, and only the passkeys can answer them.
/// Signing in to an account that is not sealed, or unsealing, removes it.
struct SealedAccountHint: Sendable {
    static let cookieName = "keyfob_sealed_account"
    static let secureCookieName = "__Host-keyfob_sealed_account"
    /// 400 days, the most browsers keep a cookie.
    static let lifetime = 400 * 24 * 3600

    private let macKey: HMACSHA256Key?

    /// The MAC key comes from the master key, so every instance of a deployment reads the cookie.
    init(vault: KeyVault) {
        let key = (try? vault.derive("sealed account hint cookie v1", length: 32)) ?? randomBytes(32)
        macKey = HMACSHA256Key(key: key)
    }

    private func mac(_ userID: String) -> String? {
        macKey.map { Base64URL.encode(Array($0.mac(Array(userID.utf8)).prefix(16))) }
    }

    /// The `Set-Cookie` value naming `userID` (nil if the MAC could not be computed).
    func cookie(userID: String, secure: Bool) -> String? {
        guard let tag = mac(userID) else { return nil }
        let name = secure ? Self.secureCookieName : Self.cookieName
        return "\(name)=\(userID).\(tag); Path=/; Max-Age=\(Self.lifetime); HttpOnly; SameSite=Strict\(secure ? "; Secure" : "")"
    }

    /// The `Set-Cookie` value that removes it.
    static func removal(secure: Bool) -> String {
        "\(secure ? secureCookieName : cookieName)=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict\(secure ? "; Secure" : "")"
    }

    /// Whether the request carries the cookie at all (valid or not): only then is there one to remove.
    static func carried(_ request: Request) -> Bool {
        Sessions.ownCookie(request, secure: secureCookieName, plain: cookieName) != nil
    }

    /// The account the request's cookie names, when this server made it.
    func userID(_ request: Request) -> String? {
        guard let value = Sessions.ownCookie(request, secure: Self.secureCookieName, plain: Self.cookieName),
            value.utf8.count <= 120, let dot = value.lastIndex(of: ".")
        else { return nil }
        let userID = String(value[..<dot])
        guard !userID.isEmpty, let expected = mac(userID) else { return nil }
        // Constant time: the comparison does not tell how much of a forged MAC was right.
        return constantTimeEqual(Array(value.utf8[value.utf8.index(after: dot)...]), Array(expected.utf8)) ? userID : nil
    }
}
