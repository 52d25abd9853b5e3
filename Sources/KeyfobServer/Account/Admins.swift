import Foundation
import KeyfobStore
import NIOConcurrencyHelpers

/// Operators named by `--admin`, bound to accounts that existed before the server was told the
/// name: the first stranger to register a configured name "admin" does not become one.
/// The first start that names someone records when; only an account of that name created
/// earlier is the admin. (A later account needs the admin-token holder to confirm it.)
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

    /// For the start-up log: each configured name and whether an account holds it.
    func describe() async -> [String] {
        var lines: [String] = []
        for (name, since) in namedSince.sorted(by: { $0.key < $1.key }) {
            if let user = try? await store.user(named: name), isAdmin(user) {
                lines.append("\(name): bound to the account created \(user.createdAt)")
            } else {
                lines.append(
                    "\(name): no account of that name existed when it was named admin (\(since)); register it, then confirm with the admin token")
            }
        }
        return lines
    }
}
