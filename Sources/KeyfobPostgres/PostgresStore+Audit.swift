import Foundation
import KeyfobStore
import Logging
import PostgresNIO

// MARK: Audit log

extension PostgresStore {
    @discardableResult
    public func appendAudit(_ e: AuditRecord) async throws -> Int64 {
        try await call { [self] in
            Int64(
                try await run(Statements.AppendAudit.self) {
                    $0.append(e.userID); $0.append(e.at.timeIntervalSince1970); $0.append(e.client); $0.append(e.transport)
                    $0.append(e.method); $0.append(e.kind); $0.append(e.eventID); $0.append(e.outcome.rawValue); $0.append(e.code)
                    $0.append(e.receipt)
                }.first?.int(0) ?? 0)
        }
    }

    /// An entry inside a transaction of the caller's.
    func insertAudit(_ e: AuditRecord, on connection: PostgresConnection) async throws {
        var bindings = PostgresBindings(capacity: 10)
        bindings.append(e.userID); bindings.append(e.at.timeIntervalSince1970); bindings.append(e.client)
        bindings.append(e.transport); bindings.append(e.method); bindings.append(e.kind); bindings.append(e.eventID)
        bindings.append(e.outcome.rawValue); bindings.append(e.code); bindings.append(e.receipt)
        _ = try await connection.query(PostgresQuery(unsafeSQL: Statements.AppendAudit.sql, binds: bindings), logger: logger).collect()
    }

    public func auditEntries(ofUser userID: String, before: Int64?, limit: Int) async throws -> [AuditRecord] {
        try await call { [self] in
            try await rows(
                """
                SELECT \(unescaped: Columns.audit) FROM audit_log WHERE user_id = \(userID) AND id < \(Int(before ?? Int64.max))
                ORDER BY id DESC LIMIT \(max(0, limit))
                """
            ).map { try AuditRecord(row: $0) }
        }
    }

    public func auditEntry(id: Int64, ofUser userID: String) async throws -> AuditRecord? {
        try await call { [self] in
            try await rows("SELECT \(unescaped: Columns.audit) FROM audit_log WHERE id = \(Int(id)) AND user_id = \(userID)")
                .first.map { try AuditRecord(row: $0) }
        }
    }
}
