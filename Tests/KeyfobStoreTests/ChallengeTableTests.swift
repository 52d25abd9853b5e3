import Foundation
import Testing

@testable import KeyfobStore

/// What SQLite's in-memory challenge table does beyond the store contract (which it also passes):
/// a cap on everyone together, and the compact form it keeps entries in.
@Suite struct ChallengeTableTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    func signIn(_ n: Int, expires: TimeInterval = 60, ip: String? = nil) -> ChallengeRecord {
        ChallengeRecord(
            challenge: withUnsafeBytes(of: UInt32(n).bigEndian, Array.init) + (4..<32).map { UInt8($0) }, ceremony: .authentication,
            key: "k\(n)", expiresAt: t0 + expires, clientIP: ip ?? "10.0.\(n >> 8).\(n & 255)")
    }

    @Test func theWholeTableIsCappedAndExpiredEntriesMakeRoom() throws {
        let table = ChallengeTable(capacity: 3)
        try table.insert(signIn(0, expires: 10), now: t0, maxPerClient: 100)
        try table.insert(signIn(1), now: t0, maxPerClient: 100)
        try table.insert(signIn(2), now: t0, maxPerClient: 100)
        #expect(throws: StoreError.capacityReached) { try table.insert(signIn(3), now: t0, maxPerClient: 100) }
        // A consumed one frees its place at once; an expired one when it is due.
        #expect(table.consume(signIn(1).challenge) != nil)
        try table.insert(signIn(3), now: t0, maxPerClient: 100)
        #expect(throws: StoreError.capacityReached) { try table.insert(signIn(4), now: t0 + 5, maxPerClient: 100) }
        try table.insert(signIn(4), now: t0 + 10, maxPerClient: 100)
        #expect(table.count == 3)
        #expect(table.consume(signIn(0).challenge) == nil)
    }

    /// A client's count follows inserts, consumption and expiry (nothing is counted twice or lost).
    @Test func perClientCountsFollowEveryWayOut() throws {
        let table = ChallengeTable()
        for n in 0..<3 { try table.insert(signIn(n, expires: 10 * Double(n + 1), ip: "192.0.2.1"), now: t0, maxPerClient: 3) }
        #expect(throws: StoreError.limitReached) { try table.insert(signIn(9, ip: "192.0.2.1"), now: t0, maxPerClient: 3) }
        _ = table.consume(signIn(1).challenge)
        try table.insert(signIn(10, expires: 100, ip: "192.0.2.1"), now: t0, maxPerClient: 3)
        // At t0+10 the first expired, at t0+30 the third: room for two.
        #expect(table.sweep(now: t0 + 30, limit: 10) == 2)
        try table.insert(signIn(11, expires: 100, ip: "192.0.2.1"), now: t0 + 30, maxPerClient: 3)
        try table.insert(signIn(12, expires: 100, ip: "192.0.2.1"), now: t0 + 30, maxPerClient: 3)
        #expect(throws: StoreError.limitReached) { try table.insert(signIn(13, ip: "192.0.2.1"), now: t0 + 30, maxPerClient: 3) }
    }

    /// Entries come back exactly as they went in, whichever of the compact forms they took.
    @Test func recordsRoundTrip() throws {
        let table = ChallengeTable()
        let registration = ChallengeRecord(
            challenge: [1, 2, 3], ceremony: .registration, key: "a-rather-long-username@example.org",
            userID: "u1", username: "a-rather-long-username@example.org", isAnonymous: false,
            existingUser: true, algorithms: [-7, -257], expiresAt: t0 + 60.5,
            clientIP: "2001:db8:1234:5678:9abc:def0:1234:5678")
        let anonymous = ChallengeRecord(
            challenge: [], ceremony: .registration, key: "anon-x", userID: "u2", username: "anon-x",
            isAnonymous: true, algorithms: [-7], expiresAt: t0 + 1)
        for record in [registration, anonymous, signIn(7)] {
            try table.insert(record, now: t0, maxPerClient: 10)
        }
        #expect(table.consume(registration.challenge) == registration)
        #expect(table.consume(anonymous.challenge) == anonymous)
        #expect(table.consume(signIn(7).challenge) == signIn(7))
        // Longer than any challenge Keyfob makes: refused on the way in, simply absent on the way out.
        #expect(throws: StoreError.self) {
            try table.insert(
                ChallengeRecord(challenge: Array(repeating: 1, count: 33), ceremony: .authentication, key: "k", expiresAt: t0 + 60),
                now: t0, maxPerClient: 10)
        }
        #expect(table.consume(Array(repeating: 1, count: 33)) == nil)
        #expect(table.count == 0)
    }

    /// The layout that keeps a minute of a login burst small: the challenge inline in the key,
    /// and an entry of a few words (the sign-in `key` of 15 characters is an inline string).
    @Test func entriesStayCompact() {
        #expect(MemoryLayout<ChallengeTable.ID>.stride <= 40)
        #expect(ChallengeTable.entryStride <= 56)
    }
}

extension ChallengeTableTests {
    /// Consumed entries leave the expiry index in bulk once they are most of it; what is left
    /// still expires and is swept exactly.
    @Test func consumedEntriesDoNotPileUpInTheExpiryIndex() throws {
        let table = ChallengeTable()
        for n in 0..<5_000 { try table.insert(signIn(n, expires: 60 + Double(n % 5)), now: t0, maxPerClient: 10) }
        for n in 0..<4_000 { #expect(table.consume(signIn(n).challenge) != nil) }
        #expect(table.expiryIndexCount <= 2 * 1_000 + 1_024 + 1)
        #expect(table.sweep(now: t0 + 30, limit: 10_000) == 0)
        #expect(table.sweep(now: t0 + 100, limit: 10_000) == 1_000)
        #expect(table.count == 0)
    }
}
