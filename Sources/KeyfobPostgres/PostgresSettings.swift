import Foundation
import PostgresNIO

/// What a `postgres://user:password@host:port/database?sslmode=…` URL says, checked once at start.
///
/// `sslmode` follows libpq: `disable` (the default here: TLS only when the URL asks for it),
/// `require` (encrypted, certificate not checked), `verify-ca` (chain checked, not the name),
/// `verify-full` (chain and host name). `host=/run/postgresql` in the query selects a Unix socket.
public struct PostgresSettings: Sendable, Equatable {
    public enum TLSMode: String, Sendable { case disable, require, verifyCA = "verify-ca", verifyFull = "verify-full" }

    public var host: String
    public var port: Int
    public var socketPath: String?
    public var username: String
    public var password: String?
    public var database: String
    public var tls: TLSMode
    /// Connections this instance may hold (`pool_max` in the URL's query; default 4 a core, at
    /// least 4 and at most 20: more backends than cores only take turns on them).
    public var maxConnections: Int
    /// Connections kept open when idle (`pool_min`; default 2, always below `pool_max`: postgres-nio's
    /// pool traps when asked to lease while fewer than its minimum are up and the minimum is its
    /// maximum, as after a database crash). A connection above it is closed after a minute idle.
    public var minConnections: Int
    /// How often an idle connection is checked with `SELECT 1` (`keepalive`, seconds; default 0:
    /// never). Each check is a timer armed whenever a connection is handed back, that is on every
    /// call; worth it only where something between drops idle connections silently.
    public var keepAlive: Duration?

    /// `pool_max`'s default for this machine.
    public static var defaultMaxConnections: Int { min(20, max(4, 4 * ProcessInfo.processInfo.activeProcessorCount)) }
    /// How long one store call may take, lease included, before it fails as unavailable.
    public var timeout: Duration
    /// The schema Keyfob's tables live in (`schema=` in the URL's query; default: the user's
    /// search path, normally `public`). Created when missing.
    public var schema: String?
    /// The isolation each connection asks for as it starts: READ COMMITTED, but in a test that
    /// plays a pooler which drops it in front of a server whose default is stricter (each
    /// transaction that needs READ COMMITTED says so too).
    var startupIsolation = "read committed"

    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
    }

    public static func isPostgresURL(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    public init(url text: String) throws {
        guard Self.isPostgresURL(text), let components = URLComponents(string: text) else {
            throw Invalid(description: "a PostgreSQL database is given as postgres://user:password@host:port/database")
        }
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { _, last in last })
        socketPath = query["host"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        host = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? query["host"] ?? "localhost"
        port = components.port ?? 5432
        guard let user = components.user, !user.isEmpty else {
            throw Invalid(description: "the PostgreSQL URL names no user (postgres://USER:password@host/database)")
        }
        username = user.removingPercentEncoding ?? user
        password = components.password.map { $0.removingPercentEncoding ?? $0 }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        guard !path.isEmpty, !path.contains("/") else {
            throw Invalid(description: "the PostgreSQL URL names no database (postgres://user:password@host/DATABASE)")
        }
        database = path.removingPercentEncoding ?? path
        let mode = query["sslmode"] ?? "disable"
        switch mode {
        case "disable", "allow", "prefer": tls = .disable
        case let other:
            guard let known = TLSMode(rawValue: other) else {
                throw Invalid(description: "sslmode=\(other) is not one of disable, require, verify-ca, verify-full")
            }
            tls = known
        }
        maxConnections = Self.defaultMaxConnections
        if let text = query["pool_max"] {
            guard let value = Int(text), (1...1000).contains(value) else {
                throw Invalid(description: "pool_max=\(text) must be a whole number from 1 to 1000")
            }
            maxConnections = value
        }
        minConnections = min(2, maxConnections - 1)
        if let text = query["pool_min"] {
            guard let value = Int(text), (0..<maxConnections).contains(value) else {
                throw Invalid(description: "pool_min=\(text) must be a whole number from 0 to pool_max - 1 (\(maxConnections - 1))")
            }
            minConnections = value
        }
        keepAlive = nil
        if let text = query["keepalive"] {
            guard let value = Int(text), (0...86400).contains(value) else {
                throw Invalid(description: "keepalive=\(text) must be whole seconds from 0 (never) to 86400")
            }
            keepAlive = value == 0 ? nil : .seconds(value)
        }
        if let name = query["schema"] {
            let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789_")
            guard (1...63).contains(name.count), name.allSatisfy(allowed.contains), !name.first!.isNumber else {
                throw Invalid(description: "schema=\(name) must be 1 to 63 lowercase letters, digits and _, not starting with a digit")
            }
            schema = name
        }
        timeout = .seconds(5)
        if let text = query["timeout"] {
            guard let value = Double(text), value > 0, value <= 600 else {
                throw Invalid(description: "timeout=\(text) must be seconds, above 0 and at most 600")
            }
            timeout = .milliseconds(Int(value * 1000))
        }
    }

    /// For logs: everything but the password.
    public var redacted: String {
        let place = socketPath.map { "socket \($0)" } ?? "\(host):\(port)"
        return "postgres://\(username)@\(place)/\(database)\(schema.map { " schema \($0)" } ?? "") (tls: \(tls.rawValue))"
    }

    var clientConfiguration: PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let socketPath {
            configuration = .init(unixSocketPath: socketPath, username: username, password: password, database: database)
        } else {
            var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
            let tls: PostgresClient.Configuration.TLS
            switch self.tls {
            case .disable: tls = .disable
            case .require:
                tlsConfiguration.certificateVerification = .none
                tls = .require(tlsConfiguration)
            case .verifyCA:
                tlsConfiguration.certificateVerification = .noHostnameVerification
                tls = .require(tlsConfiguration)
            case .verifyFull: tls = .require(tlsConfiguration)
            }
            configuration = .init(host: host, port: port, username: username, password: password, database: database, tls: tls)
        }
        configuration.options.maximumConnections = maxConnections
        configuration.options.minimumConnections = minConnections
        configuration.options.keepAliveBehavior = keepAlive.map { .init(frequency: $0) }
        configuration.options.connectTimeout = .seconds(2)
        // Each wait for a lock is bounded too (a batch sets its own, from the time it has left): a
        // call stuck behind another transaction's row lock also ends on PostgreSQL's side, as a
        // database error, and frees its connection. Migrations lift it while they run. A startup
        // parameter, so it costs no round trip (a pooler in between must pass it on).
        // READ COMMITTED whatever the server's or database's default is: the checks that a
        // session or client still exists as something is stored for it (`requireSession`, the
        // waiting requests' inserts) wait for a sign-out in progress, then read what it committed;
        // under REPEATABLE READ they would fail with a serialization error instead.
        configuration.options.additionalStartupParameters = [
            ("lock_timeout", Self.lockTimeout(halfOf: timeout)), ("default_transaction_isolation", startupIsolation),
        ]
        if let schema { configuration.options.additionalStartupParameters.append(("search_path", schema)) }
        return configuration
    }

    /// Half of `limit`, as PostgreSQL's `lock_timeout` reads it (whole milliseconds, at least 1).
    static func lockTimeout(halfOf limit: Duration) -> String {
        "\(max(1, limit.components.seconds * 500 + limit.components.attoseconds / 2_000_000_000_000_000))ms"
    }
}
