import Foundation
import KeyfobStore
import Logging
import PostgresNIO

// MARK: Multi-row writes

extension PostgresStore {
    public func completeRegistration(
        user: UserRecord, createUser: Bool, nostrKey: NostrKeyRecord?,
        credential c: CredentialRecord, session: SessionRecord, wrap: KeyWrapRecord?
    ) async throws {
        try await transaction { [self] connection in
            if createUser {
                do {
                    try await connection.query(
                        """
                        INSERT INTO users (id, username, is_anonymous, created_at)
                        VALUES (\(user.id), \(user.username), \(user.isAnonymous), \(user.createdAt.timeIntervalSince1970))
                        """, logger: logger
                    ).collect()
                } catch {
                    if case StoreError.conflict = Self.translate(error) { throw StoreError.usernameTaken }
                    throw error
                }
            }
            if let nostrKey { try await insertNostrKey(nostrKey, onConflict: "", on: connection) }
            do {
                try await connection.query(
                    """
                    INSERT INTO credentials (\(unescaped: Columns.credential)) VALUES (
                        \(ByteBuffer(bytes: c.id)), \(c.userID), \(ByteBuffer(bytes: c.publicKey)), \(c.algorithm), \(Int(c.signCount)),
                        \(c.transports.joined(separator: ",")), \(ByteBuffer(bytes: c.aaguid)), \(c.attestationFormat),
                        \(c.backupEligible), \(c.backupState), \(c.createdAt.timeIntervalSince1970), \(c.lastUsedAt?.timeIntervalSince1970),
                        \(c.attestationTrusted), \(c.name), \(c.createdOn), \(c.prfCapable))
                    """, logger: logger
                ).collect()
            } catch {
                if case StoreError.conflict = Self.translate(error) { throw StoreError.credentialExists }
                throw error
            }
            if let wrap { try await insertKeyWrap(wrap, on: connection) }
            try await insertSession(session, on: connection)
        }
    }

    public func completeAuthentication(
        credentialID: [UInt8], expectedSignCount: UInt32, newSignCount: UInt32,
        backupState: Bool, usedAt: Date, session: SessionRecord
    ) async throws {
        let s = session
        let won = try await call { [self] in
            try await run(Statements.CompleteAuthentication.self) {
                $0.append(Int(newSignCount)); $0.append(backupState); $0.append(usedAt.timeIntervalSince1970)
                $0.append(ByteBuffer(bytes: credentialID)); $0.append(Int(expectedSignCount)); $0.append(s.userID)
                bindNewSession(s, into: &$0)
            }.first?.int(0) ?? 0
        }
        guard won == 1 else { throw StoreError.conflict }
    }

    /// $7…$13 of both sign-in writes: how many of the account's sessions stay (the cap, less the
    /// new one), then the new session's columns.
    func bindNewSession(_ s: SessionRecord, into b: inout PostgresBindings) {
        b.append(max(0, maxSessionsPerUser - 1)); b.append(ByteBuffer(bytes: s.tokenHash))
        b.append(s.createdAt.timeIntervalSince1970); b.append(s.expiresAt.timeIntervalSince1970)
        b.append(s.unlockedUntil?.timeIntervalSince1970); b.append(s.credentialID.map { ByteBuffer(bytes: $0) })
        b.append(s.dataKey.map { ByteBuffer(bytes: $0) })
    }

    public func updateSignCount(
        credentialID: [UInt8], expectedSignCount: UInt32, newSignCount: UInt32, backupState: Bool,
        usedAt: Date
    ) async throws {
        let updated = try await call { [self] in
            try await touched(
                """
                UPDATE credentials SET sign_count = \(Int(newSignCount)), backup_state = \(backupState),
                                       last_used_at = \(usedAt.timeIntervalSince1970)
                WHERE id = \(ByteBuffer(bytes: credentialID)) AND sign_count = \(Int(expectedSignCount)) RETURNING 1
                """)
        }
        guard updated == 1 else { throw StoreError.conflict }
    }

    /// Writes a probe row, as SQLite's check does: a database that answers but cannot write
    /// (read-only, disk full) is not healthy.
    public func healthCheck() async throws {
        let stamp = withUnsafeBytes(of: Date().timeIntervalSince1970.bitPattern.littleEndian) { ByteBuffer(bytes: $0) }
        _ = try await call { [self] in
            try await touched(
                """
                INSERT INTO meta (name, value) VALUES ('health_probe', \(stamp))
                ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value RETURNING 1
                """)
        }
    }
}

extension SignInOutcome {
    /// `Statements.CompleteSignIn`'s answer: (won, used, stored counter, backup state before,
    /// username, is_anonymous, created_at, key sealed); the passkey's columns NULL when it is gone.
    init(row r: some StoreRow, of w: SignInWrite) throws {
        try self.init(stored: r.optionalInt(2), used: r.int(1) != 0, won: r.int(0) != 0, of: w) {
            let user = UserRecord(id: w.userID, username: try r.text(4), isAnonymous: try r.bool(5), createdAt: try r.date(6))
            return (user, try r.optionalBool(7), try r.bool(3))
        }
    }

    /// What one sign-in's answer means, from the single procedure or a batch's: the stored counter
    /// (nil: the passkey is gone), whether the challenge was recorded and the counter moved;
    /// `account` (the account, its key state, the backup state before) is read only for a passkey
    /// whose counter was behind the assertion's.
    init(
        stored: Int?, used: Bool, won: Bool, of w: SignInWrite,
        account: () throws -> (user: UserRecord, keySealed: Bool?, backupStateBefore: Bool)
    ) rethrows {
        guard let stored else {
            self = .passkeyGone
            return
        }
        let count = UInt32(clamping: stored)
        guard w.counterMoves(from: count) else {
            self = .counterBehind(stored: count)
            return
        }
        let (user, keySealed, backupStateBefore) = try account()
        if !used {
            self = .challengeUsed(user)
        } else if !won {
            self = .lostRace(user)
        } else {
            self = .signedIn(user, keySealed: keySealed, backupStateBefore: backupStateBefore)
        }
    }
}
