import Foundation
import NIOConcurrencyHelpers
import Nostr

/// NIP-46 signer keys of passkey-sealed accounts, opened while their owner has proven presence.
///
/// A sealed signer key is encrypted under the account's data key, which the server can open only
/// inside a request that brings an unlocked session's token. NIP-46 requests come with no session,
/// so the opened key is kept here — in memory, never stored — until the unlock window that opened
/// it ends, its owner signs out, or the kill switch. While it is shut, a request for it cannot even
/// be read: it waits here (a few per user, a few minutes) and is answered when the owner unlocks.
///
/// Per instance: with several instances, the one that saw the unlock answers (see docs/security.md).
final class UnlockedSigners: Sendable {
    private struct Entry {
        let key: SecretKey
        let until: Date
    }

    private let entries = NIOLockedValueBox<[String: Entry]>([:])
    private let waiting = NIOLockedValueBox<[String: [(event: Event, at: Date)]]>([:])
    /// Told the user id each time a signer opens (the bunker answers what waited for it).
    private let openHandler = NIOLockedValueBox<(@Sendable (String) -> Void)?>(nil)

    static let maxWaitingPerUser = 16
    static let waitingLifetime: TimeInterval = 300
    /// Users with requests waiting, at most (a flood for many sealed signers stays bounded).
    static let maxWaitingUsers = 1024

    func onOpen(_ handler: @escaping @Sendable (String) -> Void) {
        openHandler.withLockedValue { $0 = handler }
    }

    /// Keeps `key` (the user's signer key, public key `key.publicKey`) until `until`.
    func open(_ key: SecretKey, userID: String, until: Date) {
        entries.withLockedValue { $0[userID] = Entry(key: key, until: until) }
        openHandler.withLockedValue { $0 }?(userID)
    }

    /// Forgets every key whose unlock window has ended (the bunker calls this every few seconds),
    /// so a key leaves memory when its window ends, not when someone next asks for it. The
    /// `SecretKey` wipes itself when released.
    func closeExpired(now: Date) {
        entries.withLockedValue { entries in entries = entries.filter { $0.value.until > now } }
    }

    /// How many signer keys are open (tests, metrics).
    var openCount: Int { entries.withLockedValue { $0.count } }

    /// The user's opened signer key when it is still open and is the one named `pubkey`.
    func key(userID: String, pubkey: String, now: Date) -> SecretKey? {
        entries.withLockedValue { entries in
            guard let entry = entries[userID] else { return nil }
            guard entry.until > now, entry.key.publicKey.hex == pubkey else {
                entries[userID] = nil
                return nil
            }
            return entry.key
        }
    }

    func close(userID: String) {
        _ = entries.withLockedValue { $0.removeValue(forKey: userID) }
    }

    /// The kill switch: every opened signer key is forgotten.
    func closeAll() {
        entries.withLockedValue { $0.removeAll() }
    }

    /// Keeps a request for a shut signer until its owner unlocks; false when the user's queue
    /// (or the whole table) is full.
    func wait(_ event: Event, userID: String, now: Date) -> Bool {
        waiting.withLockedValue { waiting in
            if waiting.count >= Self.maxWaitingUsers {
                // Full: users whose requests have all expired make room.
                waiting = waiting.filter { _, queue in queue.contains { now.timeIntervalSince($0.at) < Self.waitingLifetime } }
            }
            var queue = (waiting[userID] ?? []).filter { now.timeIntervalSince($0.at) < Self.waitingLifetime }
            guard queue.count < Self.maxWaitingPerUser, waiting[userID] != nil || waiting.count < Self.maxWaitingUsers else {
                return false
            }
            queue.append((event, now))
            waiting[userID] = queue
            return true
        }
    }

    /// The requests that waited for the user's signer (and are not too old), oldest first; they are
    /// no longer kept.
    func takeWaiting(userID: String, now: Date) -> [Event] {
        waiting.withLockedValue { waiting in
            let queue = waiting.removeValue(forKey: userID) ?? []
            return queue.filter { now.timeIntervalSince($0.at) < Self.waitingLifetime }.map(\.event)
        }
    }

    /// Forgets what waits for the user's signer (sign out everywhere: nothing queued before it is
    /// answered after the owner unlocks again).
    /// Drops what waits for the user's signer; returns how many were still live.
    @discardableResult
    func dropWaiting(userID: String, now: Date) -> Int {
        let dropped = waiting.withLockedValue { $0.removeValue(forKey: userID) } ?? []
        return dropped.filter { now.timeIntervalSince($0.at) < Self.waitingLifetime }.count
    }

    /// How many requests wait for the user's signer.
    func waitingCount(userID: String, now: Date) -> Int {
        waiting.withLockedValue { ($0[userID] ?? []).filter { now.timeIntervalSince($0.at) < Self.waitingLifetime }.count }
    }
}
