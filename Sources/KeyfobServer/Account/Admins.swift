import Foundation
import KeyfobStore
import NIOConcurrencyHelpers

/// Who may open the dashboard. Two ways in, both bound to an account, never to a bare name:
/// - `--admin NAME` names an account that existed before the server was told the name (the first
///   stranger to register a configured name "admin" does not become one). The first start that
///   names someone records when.
/// - An account bound by `keyfob admins add NAME`, or by its owner confirming with the admin token
///   on `/dashboard` (the natural order on a fresh install: start with `--admin`, then sign up).
/// `keyfob admins remove NAME` unbinds an account, and also overrides `--admin` for it.
public struct Admins: Sendable {
    /// Normalized username → when it was first configured. Filled at start-up, which with
    /// PostgreSQL may come after the router exists (the database was not reachable yet).
    private let names: NIOLockedValueBox<[String: Date]>
    let store: any MetaStore & UserStore

    init(namedSince: [String: Date], store: any MetaStore & UserStore) {
        names = NIOLockedValueBox(namedSince)
        self.store = store
    }

    var namedSince: [String: Date] { names.withLockedValue { $0 } }

    static func metaName(_ username: String) -> String { "admin_named_at:\(username)" }

    /// Records, once per name, when it was first configured.
    public static func bind(_ usernames: [String], store: any MetaStore & UserStore, now: Date) async throws -> Admins {
        let admins = Admins(namedSince: [:], store: store)
        try await admins.load(usernames, now: now)
        return admins
    }

    /// Records, once per name, when it was first configured, and takes those dates.
    func load(_ usernames: [String], now: Date) async throws {
        var since: [String: Date] = [:]
        for name in Set(usernames.map { $0.lowercased() }) {
            let stamp = Array(String(now.timeIntervalSince1970).utf8)
            let stored = try await store.setMetaValueIfAbsent(Self.metaName(name), stamp)
            since[name] = Double(String(decoding: stored, as: UTF8.self)).map(Date.init(timeIntervalSince1970:)) ?? now
        }
        names.withLockedValue { $0 = since }
    }

    /// Whether this account is an operator.
    public func isAdmin(_ user: UserRecord) -> Bool {
        guard let since = namedSince[user.username.lowercased()] else { return false }
        return user.createdAt < since
    }

    /// Bindings made by `keyfob admins add|remove` and token confirmations: account id → entry.
    public struct Binding: Codable, Sendable, Equatable {
        public var username: String
        /// False: removed (which also overrides `--admin` for this account).
        public var isOperator: Bool
        public var at: Date
    }

    static let bindingsMetaName = "admin_accounts"

    public static func bindings(in store: any MetaStore) async throws -> [String: Binding] {
        guard let data = try await store.metaValue(bindingsMetaName) else { return [:] }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        return (try? decoder.decode([String: Binding].self, from: Data(data))) ?? [:]
    }

    /// Makes `user` an operator, or (`isOperator: false`) no longer one.
    public static func bind(_ user: UserRecord, isOperator: Bool, in store: any MetaStore, at date: Date) async throws {
        var all = try await bindings(in: store)
        all[user.id] = Binding(username: user.username, isOperator: isOperator, at: date)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        encoder.outputFormatting = .sortedKeys
        try await store.setMetaValue(bindingsMetaName, Array(try encoder.encode(all)))
    }

    /// Whether this account may open the dashboard: a binding decides, else `--admin`.
    public func isOperator(_ user: UserRecord) async throws -> Bool {
        if let binding = try await Self.bindings(in: store)[user.id] { return binding.isOperator }
        return isAdmin(user)
    }

    /// Whether `--admin` names this account's username (whatever its age): its owner may confirm
    /// with the admin token.
    func isNamed(_ user: UserRecord) -> Bool { namedSince[user.username.lowercased()] != nil }

    /// For the start-up log: each configured name and whether an account holds it.
    func describe() async -> [String] {
        var lines: [String] = []
        for (name, since) in namedSince.sorted(by: { $0.key < $1.key }) {
            if let user = try? await store.user(named: name), (try? await isOperator(user)) == true {
                lines.append("\(name): bound to the account created \(user.createdAt)")
            } else {
                lines.append(
                    "\(name): no account of that name existed when it was named admin (\(since)); sign up as \(name), then open /dashboard and confirm with the admin token (or run keyfob admins add \(name))"
                )
            }
        }
        return lines
    }
}
