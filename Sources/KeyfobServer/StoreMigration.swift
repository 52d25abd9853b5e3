import Foundation
import KeyfobPostgres
import KeyfobStore

/// `keyfob migrate-store`: everything in a SQLite database copied into an empty PostgreSQL one,
/// in one transaction, then counted on both sides. The nostr keys move still sealed: the
/// instances on PostgreSQL need the same master key.
public enum StoreMigration {
    public static let batchSize = 2000

    /// Copies `source` (SQLite) into `target` (PostgreSQL). Returns the rows per table.
    public static func run(from source: ServerConfiguration, to target: ServerConfiguration) async throws -> [(String, Int)] {
        guard !source.isPostgres, source.sqlitePath != ":memory:" else {
            throw ServerConfiguration.Invalid(description: "--from must be a SQLite database (sqlite:/path/to/keyfob.sqlite)")
        }
        guard target.isPostgres else {
            throw ServerConfiguration.Invalid(description: "--to must be a PostgreSQL database (postgres://user:password@host:5432/db)")
        }
        guard FileManager.default.fileExists(atPath: source.sqlitePath) else {
            throw ServerConfiguration.Invalid(description: "no SQLite database at \(source.sqlitePath)")
        }
        let sqlite = try SQLiteStore(path: source.sqlitePath)
        guard let postgres = try await openStoreForCommand(target) as? PostgresStore else {
            throw ServerConfiguration.Invalid(description: "--to must be a PostgreSQL database")
        }
        defer { postgres.shutdown() }
        var tables = StoreCopy.tables[...]
        var after: Int64 = 0
        let written = try await postgres.importAll {
            while let table = tables.first {
                let (batch, last) = try await sqlite.exportRows(
                    of: table, after: after, limit: StoreCopy.batchSize(of: table, default: batchSize))
                if let last {
                    after = last
                    return batch
                }
                tables = tables.dropFirst()
                after = 0
            }
            return nil
        }
        // Counted again on the PostgreSQL side (committed): what a reader there sees.
        let counts = try await sqlite.countUsersAndCredentials()
        let copied = try await postgres.countUsersAndCredentials()
        guard counts == copied else {
            throw StoreError.database(
                "copied \(copied.users) accounts and \(copied.credentials) passkeys of \(counts.users) and \(counts.credentials)")
        }
        return StoreCopy.tables.map { ($0, written[$0] ?? 0) }
    }
}
