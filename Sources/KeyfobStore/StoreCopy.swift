import Foundation

/// Moving a database from one store to another (`keyfob migrate-store`): tables read in
/// batches as plain values and written, in one transaction, into the same columns on the other side.
public enum StoreCopy {
    /// What moves, parents before children. Pending ceremonies (challenges) do not: they last a
    /// minute and the server is stopped for the move.
    public static let tables = [
        "users", "credentials", "nostr_keys", "key_wraps", "sessions", "meta", "audit_log",
        "grants", "signer_requests", "bunker_signers", "bunker_clients", "substrate_accounts", "polkadot_requests",
        "polkadot_runtimes", "polkadot_metadata",
    ]

    /// Rows a batch carries of `table`: a stored runtime is up to 2 MiB, any other row a few KiB.
    public static func batchSize(of table: String, default rows: Int) -> Int {
        table == "polkadot_runtimes" ? 8 : rows
    }

    /// One stored value, as SQLite types it.
    public enum Value: Sendable, Equatable {
        case null, int(Int64), real(Double), text(String), blob([UInt8])
    }

    /// A batch of one table's rows, `columns` in the order each row lists its values.
    public struct Batch: Sendable {
        public let table: String
        public let columns: [String]
        public let rows: [[Value]]
    }
}

extension SQLiteStore {
    /// Up to `limit` rows of `table` after `rowID`, in rowid order (so a table is read in pages
    /// without loading it whole); the batch and the last rowid read (nil when there were none).
    public func exportRows(of table: String, after rowID: Int64, limit: Int) async throws -> (StoreCopy.Batch, Int64?) {
        guard StoreCopy.tables.contains(table) else { throw StoreError.database("no table \(table) to copy") }
        return try readOnWriter { connection in
            let columns = try connection.query("SELECT name FROM pragma_table_info(?) ORDER BY cid", [.text(table)]).compactMap { $0[0].text }
            // Names from the schema itself, quoted: nothing from outside reaches this SQL.
            let list = columns.map { "\"\($0)\"" }.joined(separator: ", ")
            let rows = try connection.query(
                "SELECT rowid, \(list) FROM \(table) WHERE rowid > ? ORDER BY rowid LIMIT ?",
                [.int(rowID), .int(Int64(limit))])
            let values = rows.map { row in
                row.dropFirst().map { value -> StoreCopy.Value in
                    switch value {
                    case .null: .null
                    case .int(let n): .int(n)
                    case .real(let d): .real(d)
                    case .text(let s): .text(s)
                    case .blob(let b): .blob(b)
                    }
                }
            }
            return (StoreCopy.Batch(table: table, columns: columns, rows: values), rows.last?.first?.int)
        }
    }
}
