import Foundation
import KeyfobPostgres

/// The PostgreSQL cluster the tests use: `KEYFOB_TEST_POSTGRES` (set by `scripts/postgres.sh run`,
/// which `make test` and `.ci/run` go through). Each store gets a schema of its own, so tests
/// running in parallel never see each other's rows.
enum TestPostgres {
    struct NotConfigured: Error, CustomStringConvertible {
        let description = """
            KEYFOB_TEST_POSTGRES is not set: run the tests through `make test` (or \
            `scripts/postgres.sh run swift test`), which starts a throwaway PostgreSQL cluster
            """
    }

    static var baseURL: String? { ProcessInfo.processInfo.environment["KEYFOB_TEST_POSTGRES"] }

    /// Whether PostgreSQL cases run. A bare `swift test` (no cluster) skips them, saying so once;
    /// `make test` and CI go through `scripts/postgres.sh run`, which always sets the cluster.
    static let isConfigured: Bool = {
        if baseURL == nil {
            FileHandle.standardError.write(
                Data(
                    ("note: KEYFOB_TEST_POSTGRES is not set, so the PostgreSQL store cases are skipped; "
                        + "`make test` (or `scripts/postgres.sh run swift test`) runs them against a throwaway cluster\n").utf8))
        }
        return baseURL != nil
    }()

    /// Settings for a new, empty schema.
    static func settings(schema: String = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(20).lowercased())
        throws -> PostgresSettings
    {
        guard let base = baseURL else { throw NotConfigured() }
        return try PostgresSettings(url: base + (base.contains("?") ? "&" : "?") + "schema=\(schema)&timeout=30")
    }
}
