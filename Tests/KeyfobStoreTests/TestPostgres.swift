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

    /// Settings for a new, empty schema.
    static func settings(schema: String = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(20).lowercased())
        throws -> PostgresSettings
    {
        guard let base = baseURL else { throw NotConfigured() }
        return try PostgresSettings(url: base + (base.contains("?") ? "&" : "?") + "schema=\(schema)&timeout=30")
    }
}
