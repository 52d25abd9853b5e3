import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import WebAuthn

/// Sessions of DESIGN.md §3: a random 256-bit token, stored only as its SHA-256,
/// sent as an HttpOnly SameSite=Lax cookie to browsers and as a bearer token to apps.
struct Sessions: Sendable {
    /// Over plain http on localhost (development) only.
    static let cookieName = "keyfob_session"
    /// Everywhere else: `Secure`, and the `__Host-` prefix pins it to this host, path `/`, no Domain.
    static let secureCookieName = "__Host-keyfob_session"

    let store: any UserStore & SessionStore
    let configuration: ServerConfiguration
    let now: @Sendable () -> Date
    /// Built once: every signer call and every ceremony's cookie asks it.
    let client: ClientAddress

    init(store: any UserStore & SessionStore, configuration: ServerConfiguration, now: @escaping @Sendable () -> Date) {
        (self.store, self.configuration, self.now) = (store, configuration, now)
        client = ClientAddress(trustedProxies: Set(configuration.trustedProxies))
    }

    /// A signed-in request: its session, its user, and how it proved it.
    struct Authenticated: Sendable {
        let session: SessionRecord
        let user: UserRecord
        let viaCookie: Bool
        /// The raw token: it opens the session's copy of a passkey-sealed key's data key.
        let token: [UInt8]

        var unlock: SessionUnlock { SessionUnlock(token: token, session: session) }
    }

    /// A session about to be stored: the token is returned once and never stored.
    struct NewSession {
        let token: String
        let rawToken: [UInt8]
        var record: SessionRecord
    }

    /// A new session for `userID`, started by the ceremony of `credentialID`.
    func create(userID: String, unlocked: Bool, credentialID: [UInt8]) -> NewSession {
        let token = randomBytes(32)
        let created = now()
        let record = SessionRecord(
            tokenHash: sha256(token), userID: userID, createdAt: created,
            expiresAt: created.addingTimeInterval(TimeInterval(configuration.sessionTTL)),
            unlockedUntil: unlocked ? created.addingTimeInterval(TimeInterval(configuration.signerUnlockTTL)) : nil,
            credentialID: credentialID)
        return NewSession(token: Base64URL.encode(token), rawToken: token, record: record)
    }

    /// The session a request carries (bearer token first, then cookie), if valid.
    func authenticate(_ request: Request) async throws -> Authenticated? {
        var token: String?
        var viaCookie = false
        if let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") {
            token = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        } else if let cookie = Self.ownCookie(request, secure: Self.secureCookieName, plain: Self.cookieName) {
            token = cookie
            viaCookie = true
        }
        guard let token, let raw = Base64URL.decode(token), raw.count == 32 else { return nil }
        guard let session = try await store.session(tokenHash: sha256(raw), now: now()),
            let user = try await store.user(id: session.userID)
        else { return nil }
        if session.kind == AccountController.extensionKind {
            // The extension's token as a cookie would skip its scope: it is only ever a bearer token.
            guard !viaCookie else { return nil }
        }
        if viaCookie { try checkOrigin(request) }
        if session.kind == AccountController.extensionKind, !Self.extensionMayCall(request) {
            throw KeyfobError(
                .permissionDenied,
                "the browser extension's session answers sites' Polkadot calls only; account changes are made on Keyfob's own pages",
                status: .forbidden)
        }
        return Authenticated(session: session, user: user, viaCookie: viaCookie, token: raw)
    }

    /// What the browser extension's session may call (#55): its own state, the Polkadot bridge and
    /// a request it asked (read or rejected), signing itself out. Nothing that changes the account, reads the signer's history or signs directly.
    static func extensionMayCall(_ request: Request) -> Bool {
        let path = request.uri.path
        switch request.method {
        case .get:
            if path == "/session" { return true }
            let parts = path.split(separator: "/", omittingEmptySubsequences: false)
            return parts.count == 5 && path.hasPrefix("/api/polkadot/requests/")
        case .post:
            // Lock now, from the popup: it takes power away.
            if path == "/api/polkadot/message" || path == "/api/signer/lock" || (path == "/logout" && request.uri.query == nil) { return true }
            let parts = path.split(separator: "/", omittingEmptySubsequences: false)
            return parts.count == 6 && path.hasPrefix("/api/polkadot/requests/") && parts[5] == "reject"
        case .delete:
            // Revoking a site's grant, from the popup (deleteGrant keeps it to web origins' grants).
            let parts = path.split(separator: "/", omittingEmptySubsequences: false)
            return parts.count == 5 && path.hasPrefix("/api/signer/grants/")
        default:
            return false
        }
    }

    /// Like `authenticate`, but a request without a valid session is `unauthorized`.
    func require(_ request: Request) async throws -> Authenticated {
        guard let auth = try await authenticate(request) else { throw KeyfobError.unauthorized }
        return auth
    }

    /// Like `require`, but the session's signer must be unlocked too: for signer operations and
    /// for anything that could hand the account to someone else (DESIGN.md §3).
    func requireUnlocked(_ request: Request) async throws -> Authenticated {
        let auth = try await require(request)
        guard auth.session.isUnlocked(at: now()) else { throw KeyfobError.signerLocked }
        return auth
    }

    /// Cookie-authenticated state changes must come from an allowed Origin (CSRF defence).
    func checkOrigin(_ request: Request) throws {
        guard request.method != .get, request.method != .head, request.method != .options else { return }
        guard let origin = request.headers[.origin], configuration.effectiveOrigins.contains(origin) else {
            throw KeyfobError(.unauthorized, "this request needs an Origin header of an allowed origin", status: .forbidden)
        }
    }

    /// One of this server's cookies: the `__Host-` name, or the plain name only on `isLocalHost`.
    /// The host is looked at only when a plain cookie is there (most API calls carry no cookie).
    static func ownCookie(_ request: Request, secure: String, plain: String) -> String? {
        if let value = request.cookie(secure) { return value }
        guard let value = request.cookie(plain), isLocalHost(request) else { return nil }
        return value
    }

    /// Whether the request is for `localhost` (or a loopback address) over plain http: the only place
    /// the plain cookie names are read. Elsewhere only `__Host-` cookies count, which a sibling
    /// subdomain cannot plant (it could set a plain one: login CSRF into the attacker's account).
    static func isLocalHost(_ request: Request) -> Bool {
        guard request.uri.scheme != .https else { return false }
        return isLocal(authority: request.head.authority ?? "")
    }

    /// Whether an authority (`host[:port]`, `[v6][:port]`) names this machine: `localhost`, a
    /// `.localhost` name, a loopback address, or no host at all.
    /// Without allocating (every finished ceremony asks it, for its cookies): the host is a slice.
    /// An authority of only a port (`:8080`) names the port as its host, so it is not local.
    static func isLocal(authority: String) -> Bool {
        let host =
            authority.hasPrefix("[")
            ? authority.dropFirst().prefix { $0 != "]" }
            : authority.drop { $0 == ":" }.prefix { $0 != ":" }
        return host.isEmpty || host == "localhost" || host.hasSuffix(".localhost") || host == "127.0.0.1" || host == "::1"
    }

    /// Whether this request's cookie must be `Secure`: always, except for a browser on
    /// `http://localhost` (a cookie marked Secure is never sent back over plain http).
    func secureCookie(for request: Request, context: KeyfobRequestContext) -> Bool {
        if client.isHTTPS(request, peer: context.remoteAddress) { return true }
        // No Host at all is no browser on a named site (router tests, HTTP/1.0 probes).
        guard let authority = request.head.authority, !authority.isEmpty else { return false }
        return !Self.isLocal(authority: authority)
    }

    func cookie(token: String, expires: Date, secure: Bool) -> String {
        let maxAge = max(0, Int(expires.timeIntervalSince(now())))
        return secure
            ? "\(Self.secureCookieName)=\(token); Path=/; Max-Age=\(maxAge); HttpOnly; SameSite=Lax; Secure"
            : "\(Self.cookieName)=\(token); Path=/; Max-Age=\(maxAge); HttpOnly; SameSite=Lax"
    }

    func clearingCookie(secure: Bool) -> String {
        secure
            ? "\(Self.secureCookieName)=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax; Secure"
            : "\(Self.cookieName)=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"
    }
}
