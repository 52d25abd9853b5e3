import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Logging
import Nostr
import WebAuthn

/// The operator's dashboard API (DESIGN.md §5). Who may look: a session of an account bound by
/// `--admin` (see `Admins`), or `Authorization: Bearer <admin token>`. Anyone else: 401/403, never data.
struct AdminController: Sendable {
    let store: any ApprovalStore & CredentialStore & MetaStore & NostrKeyStore & SessionStore & UserStore & CeremonyStore
    let configuration: ServerConfiguration
    let sessions: Sessions
    let admins: Admins
    let feed: ActivityFeed
    let connections: ConnectionCounter
    let names: PasskeyNames
    let confirmations: ActionConfirmations
    let streamSlots: StreamSlots
    let logger: Logger
    let now: @Sendable () -> Date

    static let version = "0.4.0"
    static let tokenMetaName = "admin_token_sha256"

    func addRoutes(to router: Router<KeyfobRequestContext>) {
        // Not an operator: a page that says what this is and how to get in (OperatorGate.swift).
        router.get("/dashboard", use: dashboardPage)
        router.post("/dashboard/confirm", use: confirmOperator)
        router.get("/api/admin/users", use: users)
        router.get("/api/admin/events", use: events)
        router.get("/api/admin/stream", use: stream)
        router.get("/api/admin/stats", use: stats)
        router.post("/api/admin/lock-all", use: lockAll)
        router.post("/api/admin/users/:name/revoke-sessions", use: revokeSessions)
        router.delete("/api/admin/users/:name", use: removeUser)
    }

    func page(_ name: String) throws -> Response { try htmlPage(name, in: configuration.publicDirectory) }

    /// The operator's name (or "token"), else 401 (nobody signed in) / 403 (signed in, not an operator).
    @discardableResult
    func authorize(_ request: Request) async throws -> String {
        try await operatorOf(request).name
    }

    /// Who the operator is, and their session (nil for the admin token).
    func operatorOf(_ request: Request) async throws -> (name: String, session: Sessions.Authenticated?) {
        if let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer kfa_") {
            let token = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
            guard let stored = try await store.metaValue(Self.tokenMetaName), constantTimeEqual(stored, sha256(Array(token.utf8))) else {
                throw KeyfobError(.unauthorized, "this admin token is not valid (rotated?)", status: .unauthorized)
            }
            return ("token", nil)
        }
        guard let auth = try await sessions.authenticate(request) else { throw KeyfobError.unauthorized }
        guard try await admins.isOperator(auth.user) else {
            throw KeyfobError(.permissionDenied, "the dashboard is for operators (--admin, or keyfob admins add NAME)")
        }
        return (auth.user.username, auth)
    }

    // MARK: Users

    @Sendable func users(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        try await authorize(request)
        let query = request.queryValue("query").flatMap { $0.isEmpty ? nil : String($0.prefix(64)) }
        let cursor = request.queryValue("cursor").flatMap { $0.isEmpty ? nil : String($0.prefix(64)) }
        let page = try await store.users(matching: query, after: cursor, limit: 50)
        let formatter = ISO8601DateFormatter()
        var list: [UsersReply.User] = []
        for user in page {
            let credentials = try await store.credentials(ofUser: user.id)
            // Last seen: the latest sign-in with any of the account's passkeys.
            let lastSeen = credentials.compactMap(\.lastUsedAt).max()
            let passkeys = credentials.map { c in
                UsersReply.Passkey(
                    id: Base64URL.encode(c.id), format: c.attestationFormat, aaguid: Hex.encode(c.aaguid),
                    authenticator: names.provider(aaguid: c.aaguid).name, createdAt: formatter.string(from: c.createdAt),
                    backedUp: c.backupState, attestationTrusted: c.attestationTrusted,
                    lastUsedAt: c.lastUsedAt.map(formatter.string(from:)), name: c.name)
            }
            let clients = Set(try await store.grants(ofUser: user.id, now: now()).map(\.client)).sorted()
            list.append(
                UsersReply.User(
                    username: user.username, isAnonymous: user.isAnonymous, createdAt: formatter.string(from: user.createdAt),
                    lastSeenAt: lastSeen.map(formatter.string(from:)), passkeys: passkeys,
                    hasNostrKey: try await store.nostrKey(ofUser: user.id) != nil, clients: clients))
        }
        return jsonResponse(UsersReply(users: list, next: page.count == 50 ? page.last?.username : nil))
    }

    // MARK: Events

    @Sendable func events(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        try await authorize(request)
        let outcome = request.queryValue("outcome")
        let code = request.queryValue("code")
        return jsonResponse(["events": feed.recent(outcome: outcome, code: code, limit: 500)])
    }

    /// Server-sent events: one JSON object per activity, as it happens — for as long as whoever
    /// opened it is still an operator. Their standing is checked again before an event is sent (at
    /// most once a second) and on a tick: the stream ends once their session ends (signed out,
    /// everywhere included), `keyfob admins remove` unbinds them, or the admin token it was opened
    /// with is rotated.
    @Sendable func stream(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let opener = try await operatorOf(request)
        let address = ClientAddress.limitKey(sessions.client.resolve(request, context: context), ipv6Prefix: configuration.ipv6Prefix)
        let slot =
            try opener.session.map { try streamSlots.take(session: $0.session.tokenHash, userID: $0.user.id, address: address) }
            ?? streamSlots.take(session: [], userID: "admin-token", address: address)
        let stillOperator = standing(of: opener, request: request)
        let activities = feed.subscribe()
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return EventStream.response { send in
            _ = slot  // held while the stream lives
            send.yield(ByteBuffer(string: ": keyfob activity stream\n\n"))
            await withTaskGroup(of: Void.self) { group in
                // nil: a tick (no event); the check runs and a keep-alive comment goes out.
                let (merged, sink) = AsyncStream<Activity?>.makeStream(bufferingPolicy: .bufferingNewest(64))
                group.addTask {
                    for await activity in activities { sink.yield(activity) }
                    sink.finish()
                }
                group.addTask {
                    while (try? await Task.sleep(for: .seconds(Self.standingRecheck))) != nil { sink.yield(nil) }
                }
                var checkedAt = ContinuousClock.now
                for await activity in merged {
                    if activity == nil || ContinuousClock.now - checkedAt >= .seconds(1) {
                        guard await stillOperator() else { break }
                        checkedAt = ContinuousClock.now
                    }
                    guard let activity else {
                        send.yield(ByteBuffer(string: ": keep-alive\n\n"))
                        continue
                    }
                    let json = (try? encoder.encode(activity)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
                    send.yield(ByteBuffer(string: "data: \(json)\n\n"))
                }
                group.cancelAll()
            }
        }
    }

    /// How often an operator stream with no events checks that its opener is still an operator.
    static let standingRecheck: Double = 5

    /// Whether the operator who opened a stream still is one: the same admin token (not rotated), or
    /// the same session, still alive, of an account still an operator. A store error counts as no.
    func standing(of opener: (name: String, session: Sessions.Authenticated?), request: Request) -> @Sendable () async -> Bool {
        let tokenHash: [UInt8]? =
            opener.session == nil
            ? request.headers[.authorization].map { header in
                sha256(Array(String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces).utf8))
            } : nil
        let session = opener.session.map { ($0.session.tokenHash, $0.user) }
        return { [store, sessions, admins, now] in
            if let tokenHash {
                guard let stored = try? await store.metaValue(Self.tokenMetaName) else { return false }
                return constantTimeEqual(stored, tokenHash)
            }
            guard let (hash, user) = session, (try? await sessions.store.session(tokenHash: hash, now: now())) != nil else { return false }
            return (try? await admins.isOperator(user)) == true
        }
    }

    // MARK: Stats and health

    @Sendable func stats(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        try await authorize(request)
        let end = now()
        let hour = feed.since(end.addingTimeInterval(-3600))
        var failures: [String: Int] = [:]
        var stepUps = 0
        var signer: [String: Int] = [:]
        var perMinute = [[String: Int]](repeating: ["signUps": 0, "signIns": 0, "failures": 0, "signer": 0], count: 60)
        for a in hour {
            let minute = min(59, max(0, 59 - Int(end.timeIntervalSince(a.time) / 60)))
            // A locked signer asking for the passkey is the normal step-up (locked → passkey →
            // signed), not a failure: counted on its own.
            if a.code == ErrorCode.signerLocked.rawValue {
                stepUps += 1
            } else if let code = a.code, a.outcome == "failed" {
                failures[code, default: 0] += 1
                perMinute[minute]["failures", default: 0] += 1
            }
            if a.category == "signer" {
                signer[a.method ?? "?", default: 0] += 1
                perMinute[minute]["signer", default: 0] += 1
            }
            if a.event == "registration.verified" { perMinute[minute]["signUps", default: 0] += 1 }
            if a.event == "authentication.verified" { perMinute[minute]["signIns", default: 0] += 1 }
        }
        var database = "ok"
        do { try await store.healthCheck() } catch { database = "unavailable" }
        let (users, credentials) = (try? await store.countUsersAndCredentials()) ?? (0, 0)
        return jsonResponse(
            StatsReply(
                lastHour: .init(
                    signUps: hour.filter { $0.event == "registration.verified" }.count,
                    signIns: hour.filter { $0.event == "authentication.verified" }.count,
                    failures: failures, stepUps: stepUps, signer: signer, perMinute: perMinute),
                health: .init(
                    uptimeSeconds: Int(Date().timeIntervalSince(feed.startedAt)), version: Self.version, database: database,
                    openConnections: connections.current, users: users, passkeys: credentials,
                    // With PostgreSQL, several instances share the database; the activity figures and
                    // the live stream are this instance's own (its memory), the counts everyone's.
                    store: configuration.isPostgres ? "postgres" : "sqlite")))
    }

    // MARK: Operator actions

    @Sendable func lockAll(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let who = try await authorize(request)
        let locked = try await store.lockAllSessions()
        confirmations.custody.unlockedSigners.closeAll()
        feed.publish(
            Activity(
                time: now(), category: "session", event: "signers.locked", user: who, client: nil, method: nil,
                kind: nil, outcome: "ok", code: nil, ip: nil))
        return jsonResponse(["locked": locked])
    }

    @Sendable func revokeSessions(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let (who, user) = try await authorizeDestructive(request, context, .adminRevokeSessions)
        try await store.deleteSessions(ofUser: user.id)
        confirmations.custody.unlockedSigners.close(userID: user.id)
        record("admin.sessions_revoked", by: who, target: user.username)
        return jsonResponse(["revoked": true])
    }

    @Sendable func removeUser(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let (who, user) = try await authorizeDestructive(request, context, .adminRemoveUser)
        _ = try await store.deleteUser(id: user.id)
        confirmations.custody.unlockedSigners.close(userID: user.id)
        record("admin.user_removed", by: who, target: user.username)
        return jsonResponse(["removed": true])
    }

    /// An operator action that destroys: the admin token (automation) as it is, an operator's
    /// session only with an assertion made for this action on this user (a stolen admin session
    /// deletes no one). The operator is checked before the user is looked up, so nobody else
    /// learns which names exist.
    func authorizeDestructive(
        _ request: Request, _ context: KeyfobRequestContext, _ action: ActionConfirmations.Action
    ) async throws -> (who: String, user: UserRecord) {
        let (who, session) = try await operatorOf(request)
        let user = try await named(context)
        guard let auth = session else { return (who, user) }  // the admin token
        _ = try await confirmations.verify(try await ActionConfirmations.assertion(in: request), action, target: user.username, for: auth)
        return (who, user)
    }

    /// An operator action in the log and the live stream, with who did it (an operator's name or "token").
    func record(_ event: String, by who: String, target: String) {
        logger.notice("\(event)", metadata: ["event": "\(event)", "by": "\(who)", "user": "\(target)"])
        feed.publish(
            Activity(
                time: now(), category: "admin", event: event, user: target, client: who, method: nil,
                kind: nil, outcome: "ok", code: nil, ip: nil))
    }

    func named(_ context: KeyfobRequestContext) async throws -> UserRecord {
        guard let name = context.parameters.get("name"), let user = try await store.user(named: name) else {
            throw KeyfobError(.requestNotFound, "no such user", status: .notFound)
        }
        return user
    }
}

/// The meta entry holding the admin token's SHA-256 (for the `keyfob admin-token` command).
public let adminTokenMetaName = AdminController.tokenMetaName

/// The admin token: created on first start (written to a 0600 file, not to the log), rotated by
/// `keyfob admin-token --rotate`; only its SHA-256 is stored.
public enum AdminToken {
    /// A new token and its stored form.
    public static func generate() -> (token: String, hash: [UInt8]) {
        let token = "kfa_" + Base64URL.encode(randomBytes(32))
        return (token, sha256(Array(token.utf8)))
    }

    /// On first start: a token, written to `<data-dir>/admin-token` (0600) for the operator to read once.
    static func ensure(store: any MetaStore, configuration: ServerConfiguration) async throws -> String? {
        guard try await store.metaValue(AdminController.tokenMetaName) == nil else { return nil }
        let (token, hash) = generate()
        guard try await store.setMetaValueIfAbsent(AdminController.tokenMetaName, hash) == hash else { return nil }
        let path = (configuration.dataDirectory as NSString).appendingPathComponent("admin-token")
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        fchmod(fd, 0o600)
        let line = Array((token + "\n").utf8)
        _ = write(fd, line, line.count)
        return path
    }
}

/// A page of accounts for the dashboard; `next` is the cursor of the page after.
struct UsersReply: Encodable {
    struct Passkey: Encodable {
        let id, format, aaguid, authenticator, createdAt: String
        let backedUp, attestationTrusted: Bool
        let lastUsedAt, name: String?
    }
    struct User: Encodable {
        let username: String
        let isAnonymous: Bool
        let createdAt: String
        let lastSeenAt: String?
        let passkeys: [Passkey]
        let hasNostrKey: Bool
        let clients: [String]
    }
    let users: [User]
    let next: String?
}

/// The dashboard's figures: this instance's last hour, and the server's health.
struct StatsReply: Encodable {
    struct LastHour: Encodable {
        let signUps, signIns: Int
        let failures: [String: Int]
        /// Requests a locked signer sent to the passkey first (not failures).
        let stepUps: Int
        let signer: [String: Int]
        let perMinute: [[String: Int]]
    }
    struct Health: Encodable {
        let uptimeSeconds: Int
        let version, database: String
        let openConnections, users, passkeys: Int
        let store: String
    }
    let lastHour: LastHour
    let health: Health
}
