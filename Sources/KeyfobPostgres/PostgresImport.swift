import Foundation
import KeyfobStore
import PostgresNIO

extension PostgresStore {
    /// Writes what `batches` yields into this (empty) database in one transaction: all of it or,
    /// on any error, nothing. Returns the rows written per table. Refuses a database that holds
    /// accounts already (a move, not a merge).
    public func importAll(_ batches: () async throws -> StoreCopy.Batch?) async throws -> [String: Int] {
        do {
            return try await client.withTransaction(logger: logger) { connection in
                let users =
                    try await connection.query("SELECT count(*) FROM users", logger: logger).collect()
                    .first?.makeRandomAccess()[0].decode(Int.self) ?? 0
                guard users == 0 else {
                    throw StoreError.database("the PostgreSQL database holds \(users) accounts already; move into an empty one")
                }
                var types: [String: [String: String]] = [:]
                var written: [String: Int] = [:]
                while let batch = try await batches() {
                    if types[batch.table] == nil {
                        types[batch.table] = try await columnTypes(of: batch.table, on: connection)
                    }
                    try await insert(batch, types: types[batch.table]!, on: connection)
                    written[batch.table, default: 0] += batch.rows.count
                }
                // Ids were copied as they were: new audit entries continue after the last one.
                try await connection.query(
                    """
                    SELECT setval(pg_get_serial_sequence('audit_log', 'id'), coalesce((SELECT max(id) FROM audit_log), 0) + 1, false)
                    """, logger: logger
                ).collect()
                return written
            }
        } catch {
            throw Self.translate(error)
        }
    }

    private func columnTypes(of table: String, on connection: PostgresConnection) async throws -> [String: String] {
        let rows = try await connection.query(
            """
            SELECT column_name, data_type FROM information_schema.columns
            WHERE table_name = \(table) AND table_schema = current_schema()
            """, logger: logger
        ).collect()
        var types: [String: String] = [:]
        for row in rows {
            let r = row.makeRandomAccess()
            types[try r.text(0)] = try r.text(1)
        }
        return types
    }

    /// Multi-row INSERTs, each under PostgreSQL's 65,535-parameter limit.
    private func insert(_ batch: StoreCopy.Batch, types: [String: String], on connection: PostgresConnection) async throws {
        guard !batch.rows.isEmpty else { return }
        guard StoreCopy.tables.contains(batch.table) else { throw StoreError.database("no table \(batch.table) to copy into") }
        let columnTypes = try batch.columns.map { column in
            guard let type = types[column] else {
                throw StoreError.database("column \(column) of \(batch.table) has no place in the PostgreSQL schema")
            }
            return type
        }
        let perStatement = max(1, min(1000, 60_000 / batch.columns.count))
        let columnList = batch.columns.map { "\"\($0)\"" }.joined(separator: ", ")
        var start = 0
        while start < batch.rows.count {
            let rows = batch.rows[start..<min(start + perStatement, batch.rows.count)]
            var bindings = PostgresBindings(capacity: rows.count * batch.columns.count)
            var tuples: [String] = []
            var n = 0
            for row in rows {
                var placeholders: [String] = []
                for (value, type) in zip(row, columnTypes) {
                    n += 1
                    placeholders.append("$\(n)")
                    try Self.bind(value, as: type, into: &bindings)
                }
                tuples.append("(" + placeholders.joined(separator: ", ") + ")")
            }
            // Table and column names come from the schemas themselves, checked above.
            try await connection.query(
                PostgresQuery(
                    unsafeSQL: "INSERT INTO \(batch.table) (\(columnList)) VALUES " + tuples.joined(separator: ", "),
                    binds: bindings), logger: logger
            ).collect()
            start += rows.count
        }
    }

    /// SQLite's loose types to the column's PostgreSQL type.
    private static func bind(_ value: StoreCopy.Value, as type: String, into bindings: inout PostgresBindings) throws {
        switch (value, type) {
        case (.null, _): bindings.appendNull()
        case (.int(let n), "boolean"): bindings.append(n != 0)
        case (.int(let n), "bigint"), (.int(let n), "integer"): bindings.append(Int(n))
        case (.int(let n), "double precision"): bindings.append(Double(n))
        case (.real(let d), "double precision"): bindings.append(d)
        case (.text(let s), "text"): bindings.append(s)
        case (.blob(let b), "bytea"): bindings.append(ByteBuffer(bytes: b))
        case (.text(let s), "bytea"): bindings.append(ByteBuffer(string: s))
        default: throw StoreError.database("a \(value.kind) value cannot go into a \(type) column")
        }
    }
}

extension StoreCopy.Value {
    var kind: String {
        switch self {
        case .null: "null"
        case .int: "integer"
        case .real: "real"
        case .text: "text"
        case .blob: "blob"
        }
    }
}
