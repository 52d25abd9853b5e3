import Foundation

/// A row as either backend reads it: each accessor throws on NULL or a value of another type, so a
/// bad row is an error (`StoreError.database`) in both stores, never an empty string.
public protocol StoreRow {
    func text(_ i: Int) throws -> String
    func optionalText(_ i: Int) throws -> String?
    func int(_ i: Int) throws -> Int
    func optionalInt(_ i: Int) throws -> Int?
    func bool(_ i: Int) throws -> Bool
    func bytes(_ i: Int) throws -> [UInt8]
    func optionalBytes(_ i: Int) throws -> [UInt8]?
    func date(_ i: Int) throws -> Date
    func optionalDate(_ i: Int) throws -> Date?
    func optionalBool(_ i: Int) throws -> Bool?
}

/// The columns each record is read from, in the order its `init(row:from:)` reads them: one list
/// per record for both backends (their schemas name and order them the same).
public enum Columns {
    public static let user = "id, username, is_anonymous, created_at"
    public static let credential = """
        id, user_id, public_key, algorithm, sign_count, transports, aaguid, attestation_format,
        backup_eligible, backup_state, created_at, last_used_at, attestation_trusted, name, created_on, prf_capable
        """
    /// How many columns `credential` and `user` name: where the next record's columns start in a join.
    public static let credentialCount = count(credential)
    public static let userCount = count(user)
    public static let session = "token_hash, user_id, created_at, expires_at, unlocked_until, credential_id, data_key, kind"
    public static let nostrKey = "user_id, pubkey, version, nonce, sealed, updated_at, passkey_sealed"
    public static let keyWrap = "user_id, credential_id, wrapped, created_at, salt"
    public static let audit = "id, user_id, at, client, transport, method, kind, event_id, outcome, code, receipt"
    public static let request = """
        id, user_id, requester, client, transport, method, kind, nonce, payload, confirmation_nonce, created_at, expires_at, state
        """
    public static let grant = "id, user_id, client, method, kind, allow, created_at, expires_at"
    public static let signer = "user_id, pubkey, nonce, sealed, secret_hash, secret_expires_at, created_at, passkey_sealed"
    public static let client = "user_id, client_pubkey, name, url, perms, created_at, last_used_at, relays"

    /// How many columns a list names.
    public static func count(_ columns: String) -> Int { columns.split(separator: ",").count }

    /// `t.x, t.y, …` for the columns `x, y, …`: one record's columns in a join.
    public static func prefixed(_ table: String, _ columns: String) -> String {
        columns.split(separator: ",").map { "\(table).\($0.trimmingCharacters(in: .whitespacesAndNewlines))" }
            .joined(separator: ", ")
    }

    /// `?, ?, …`, one placeholder for each column of a list (SQLite's INSERT … VALUES).
    public static func placeholders(_ columns: String) -> String {
        Array(repeating: "?", count: count(columns)).joined(separator: ", ")
    }

    /// A LIKE/ILIKE pattern (with `ESCAPE '!'`) for names containing `query`: `%` and `_` in a
    /// search are literal; no query matches everything.
    public static func likePattern(containing query: String?) -> String {
        guard let query else { return "%" }
        return "%"
            + query.replacingOccurrences(of: "!", with: "!!").replacingOccurrences(of: "%", with: "!%")
            .replacingOccurrences(of: "_", with: "!_") + "%"
    }
}

extension UserRecord {
    /// The user whose columns (`Columns.user`) start at `b`.
    public init(row r: some StoreRow, from b: Int = 0) throws {
        self.init(id: try r.text(b), username: try r.text(b + 1), isAnonymous: try r.bool(b + 2), createdAt: try r.date(b + 3))
    }
}

extension CredentialRecord {
    public init(row r: some StoreRow, from b: Int = 0) throws {
        self.init(
            id: try r.bytes(b), userID: try r.text(b + 1), publicKey: try r.bytes(b + 2), algorithm: try r.int(b + 3),
            signCount: UInt32(clamping: try r.int(b + 4)),
            transports: try r.text(b + 5).split(separator: ",").map(String.init), aaguid: try r.bytes(b + 6),
            attestationFormat: try r.text(b + 7), backupEligible: try r.bool(b + 8), backupState: try r.bool(b + 9),
            createdAt: try r.date(b + 10), lastUsedAt: try r.optionalDate(b + 11), attestationTrusted: try r.bool(b + 12),
            name: try r.optionalText(b + 13), createdOn: try r.optionalText(b + 14), prfCapable: try r.optionalBool(b + 15))
    }
}

extension CredentialOwner {
    /// A passkey, its user and the user's key (NULL columns: none yet), in `Columns.credential`,
    /// `Columns.user`, `Columns.nostrKey` order, starting at `b`: a sign-in's join on both backends.
    public init(row r: some StoreRow, from b: Int = 0) throws {
        let key = b + Columns.credentialCount + Columns.userCount
        self.init(
            credential: try CredentialRecord(row: r, from: b), user: try UserRecord(row: r, from: b + Columns.credentialCount),
            nostrKey: try r.optionalText(key) == nil ? nil : try NostrKeyRecord(row: r, from: key))
    }
}

extension SessionRecord {
    public init(row r: some StoreRow) throws {
        self.init(
            tokenHash: try r.bytes(0), userID: try r.text(1), createdAt: try r.date(2), expiresAt: try r.date(3),
            unlockedUntil: try r.optionalDate(4), credentialID: try r.optionalBytes(5), dataKey: try r.optionalBytes(6),
            kind: try r.optionalText(7))
    }
}

extension NostrKeyRecord {
    /// The key whose columns (`Columns.nostrKey`) start at `b`; with `hasWrapsAt`, whether the user
    /// has data-key wraps is read from that column too.
    public init(row r: some StoreRow, from b: Int = 0, hasWrapsAt wraps: Int? = nil) throws {
        self.init(
            userID: try r.text(b), pubkey: try r.text(b + 1), version: try r.int(b + 2), nonce: try r.bytes(b + 3),
            sealed: try r.bytes(b + 4), updatedAt: try r.date(b + 5), passkeySealed: try r.bool(b + 6))
        if let wraps { hasWraps = try r.bool(wraps) }
    }
}

extension KeyWrapRecord {
    public init(row r: some StoreRow) throws {
        self.init(
            userID: try r.text(0), credentialID: try r.bytes(1), wrapped: try r.bytes(2), createdAt: try r.date(3),
            salt: try r.optionalBytes(4) ?? [])
    }
}

extension AuditRecord {
    public init(row r: some StoreRow) throws {
        self.init(
            id: Int64(try r.int(0)), userID: try r.text(1), at: try r.date(2), client: try r.text(3),
            transport: try r.text(4), method: try r.text(5), kind: try r.optionalInt(6), eventID: try r.optionalText(7),
            outcome: try Self.outcome(r.text(8)), code: try r.optionalText(9), receipt: try r.optionalText(10))
    }

    static func outcome(_ text: String) throws -> AuditOutcome {
        guard let outcome = AuditOutcome(rawValue: text) else {
            throw StoreError.database("an audit entry's outcome is not one of approved, rejected, failed")
        }
        return outcome
    }
}

extension PendingRequestRecord {
    public init(row r: some StoreRow) throws {
        self.init(
            id: try r.text(0), userID: try r.optionalText(1), requester: try r.text(2), client: try r.text(3),
            transport: try r.text(4), method: try r.text(5), kind: try r.optionalInt(6),
            nonce: try r.bytes(7), payload: try r.bytes(8), confirmationNonce: try r.optionalBytes(9),
            createdAt: try r.date(10), expiresAt: try r.date(11), state: try r.text(12))
    }
}

extension GrantRecord {
    public init(row r: some StoreRow) throws {
        self.init(
            id: try r.text(0), userID: try r.text(1), client: try r.text(2), method: try r.text(3),
            kind: try r.optionalInt(4), allow: try r.bool(5), createdAt: try r.date(6), expiresAt: try r.optionalDate(7))
    }
}

extension BunkerSignerRecord {
    public init(row r: some StoreRow) throws {
        self.init(
            userID: try r.text(0), pubkey: try r.text(1), nonce: try r.bytes(2), sealed: try r.bytes(3),
            secretHash: try r.optionalBytes(4), secretExpiresAt: try r.optionalDate(5), createdAt: try r.date(6),
            passkeySealed: try r.bool(7))
    }
}

extension BunkerClientRecord {
    public init(row r: some StoreRow) throws {
        self.init(
            userID: try r.text(0), clientPubkey: try r.text(1), name: try r.optionalText(2), url: try r.optionalText(3),
            perms: try r.text(4), createdAt: try r.date(5), lastUsedAt: try r.optionalDate(6),
            relays: try r.text(7).split(separator: "\n").map(String.init))
    }
}

extension BunkerReplyRecord {
    public init(row r: some StoreRow) throws {
        self.init(id: Int64(try r.int(0)), event: try r.text(1))
    }
}
