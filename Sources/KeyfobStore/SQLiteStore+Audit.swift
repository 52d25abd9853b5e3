import Foundation

// MARK: Audit log

extension SQLiteStore {
    @discardableResult
    public func appendAudit(_ e: AuditRecord) async throws -> Int64 {
        // Committed with the sign-ins and other entries that arrive meanwhile (`GroupCommit`); the
        // caller hears of it only after the commit, as before.
        if let groupCommit {
            let id = AuditID()
            try await groupCommit.perform { connection in id.value = try Self.insert(e, with: connection) }
            return id.value
        }
        return try write { try Self.insert(e, with: connection) }
    }

    /// Set on the commit thread before the caller resumes (which orders the two).
    private final class AuditID: @unchecked Sendable { var value: Int64 = 0 }

    static func insert(_ e: AuditRecord, with connection: SQLiteConnection) throws -> Int64 {
        try connection.query(
            """
            INSERT INTO audit_log (user_id, at, client, transport, method, kind, event_id, outcome, code, receipt)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
            """,
            [
                .text(e.userID), .date(e.at), .text(e.client), .text(e.transport), .text(e.method),
                e.kind.map { .int(Int64($0)) } ?? .null, e.eventID.map(SQLValue.text) ?? .null, .text(e.outcome.rawValue),
                e.code.map(SQLValue.text) ?? .null, e.receipt.map(SQLValue.text) ?? .null,
            ]
        ).first?.first?.int ?? 0
    }

    public func auditEntries(ofUser userID: String, before: Int64?, limit: Int) async throws -> [AuditRecord] {
        try read { connection in
            try connection.query(
                "SELECT \(Columns.audit) FROM audit_log WHERE user_id = ? AND id < ? ORDER BY id DESC LIMIT ?",
                [.text(userID), .int(before ?? Int64.max), .int(Int64(max(0, limit)))]
            ).map { try AuditRecord(row: $0) }
        }
    }

    public func auditEntry(id: Int64, ofUser userID: String) async throws -> AuditRecord? {
        try read { connection in
            try connection.query(
                "SELECT \(Columns.audit) FROM audit_log WHERE id = ? AND user_id = ?",
                [.int(id), .text(userID)]
            ).first.map { try AuditRecord(row: $0) }
        }
    }
}
