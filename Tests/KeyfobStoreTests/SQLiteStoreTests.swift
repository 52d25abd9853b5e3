import Foundation
import Testing

@testable import KeyfobStore

/// What the SQLite store does beyond the contract: many threads at once, and a WAL that stays
/// small under steady writes.
@Suite struct SQLiteStoreTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func temporaryPath() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keyfob-sqlite-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.appendingPathComponent("keyfob.sqlite").path
    }

    func walSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? NSNumber)?.intValue ?? 0
    }

    /// Sign-ins (a counter compare-and-swap and a session each) from many tasks while others read:
    /// every sign-in lands once, readers see committed rows, and the checkpointer keeps the WAL
    /// near its threshold instead of letting it grow with the traffic.
    @Test func concurrentSignInsLandOnceAndTheWALStaysSmall() async throws {
        let path = try temporaryPath()
        let store = try SQLiteStore(path: path, maxSessionsPerUser: 5)
        let users = (0..<50).map { UserRecord(id: "u\($0)", username: "user\($0)", isAnonymous: false, createdAt: t0) }
        for (n, user) in users.enumerated() {
            let credential = CredentialRecord(
                id: [UInt8(n)], userID: user.id, publicKey: [UInt8](repeating: 1, count: 77),
                algorithm: -7, signCount: 0, transports: [], aaguid: [UInt8](repeating: 0, count: 16),
                attestationFormat: "none", backupEligible: true, backupState: false, createdAt: t0)
            try await store.completeRegistration(
                user: user, createUser: true, nostrKey: nil, credential: credential,
                session: SessionRecord(
                    tokenHash: [UInt8](repeating: UInt8(n), count: 32),
                    userID: user.id, createdAt: t0, expiresAt: t0 + 3600, unlockedUntil: nil))
        }
        let rounds = 400
        var peakWAL = 0
        try await withThrowingTaskGroup(of: Int.self) { group in
            for (n, user) in users.enumerated() {
                group.addTask {
                    for round in 0..<rounds {
                        var token = [UInt8](repeating: UInt8(n), count: 32)
                        token[0] = UInt8((round + 1) & 0xff)
                        token[1] = UInt8((round + 1) >> 8)
                        try await store.completeAuthentication(
                            credentialID: [UInt8(n)], expectedSignCount: UInt32(round), newSignCount: UInt32(round + 1),
                            backupState: false, usedAt: t0,
                            session: SessionRecord(
                                tokenHash: token, userID: user.id,
                                createdAt: t0 + Double(round), expiresAt: t0 + 3600, unlockedUntil: nil))
                        #expect(try await store.credential(id: [UInt8(n)])?.signCount == UInt32(round + 1))
                    }
                    return 0
                }
            }
            for _ in 0..<users.count * rounds / 100 {
                try await Task.sleep(for: .milliseconds(1))
                peakWAL = max(peakWAL, walSize(path))
            }
            try await group.waitForAll()
        }
        // Without restarts this WAL reached 500 MB; with them it stays a few megabytes alone. While
        // the whole suite runs beside it on two cores (PostgreSQL clusters included) the checkpoint
        // thread gets little CPU and peaks of 30–75 MB were seen: the bound tells the bug (unbounded
        // growth) from that, not a busy machine from an idle one.
        #expect(peakWAL < 160 * 1024 * 1024, "WAL peaked at \(peakWAL) bytes")
        for (n, _) in users.enumerated() {
            #expect(try await store.credential(id: [UInt8(n)])?.signCount == UInt32(rounds))
        }
    }

    /// Challenges live in memory: a flood of abandoned ceremonies costs the sweep a heap pop each
    /// (consumed ones are skipped, not counted), and every client keeps its own cap.
    @Test func abandonedCeremoniesAreSweptInBatchesFromMemory() async throws {
        let store = try SQLiteStore(path: ":memory:")
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        for i in 0..<20_000 {
            let value = [UInt8(i & 0xff), UInt8(i >> 8), 7]
            try await store.insertChallenge(
                ChallengeRecord(
                    challenge: value, ceremony: .authentication, key: "k",
                    expiresAt: t0 + 60 + Double(i % 7), clientIP: "10.0.\(i % 250).\(i / 250 % 250)"),
                now: t0, maxPerClient: 100)
        }
        for i in stride(from: 0, to: 20_000, by: 2) { _ = try await store.consumeChallenge([UInt8(i & 0xff), UInt8(i >> 8), 7]) }
        #expect(try await store.sweepExpired(now: t0 + 30, limit: 500) == 0)  // none expired yet
        var swept = 0
        for _ in 0..<100 {
            let n = try await store.sweepExpired(now: t0 + 120, limit: 500)
            #expect(n <= 500)
            swept += n
            if n == 0 { break }
        }
        #expect(swept == 10_000)
        #expect(try await store.consumeChallenge([1, 0, 7]) == nil)
        // Their places are free again: a client that had 80 live challenges may start 100 new ones.
        for i in 0..<100 {
            try await store.insertChallenge(
                ChallengeRecord(
                    challenge: [UInt8(i), 9, 9], ceremony: .authentication, key: "k",
                    expiresAt: t0 + 300, clientIP: "10.0.0.0"), now: t0 + 120, maxPerClient: 100)
        }
    }
}
