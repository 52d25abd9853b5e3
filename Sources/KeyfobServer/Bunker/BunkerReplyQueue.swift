import Foundation
import KeyfobStore
import Logging
import Nostr
import ServiceLifecycle

/// Hands this instance's relay the NIP-46 replies other instances queued: a request approved on
/// one instance is answered through the instance the client is connected to. The approving
/// instance publishes its own replies at once; this reads the database when PostgreSQL notifies
/// (and every few `interval`s in case a notification was lost), or every `interval` on SQLite, and
/// publishes what it has not seen (the hub drops events it handed on already).
struct BunkerReplyQueue: Service {
    let store: any BunkerStore
    let hub: RelayHub
    let interval: TimeInterval
    let now: @Sendable () -> Date
    let logger: Logger
    /// How far back each read looks: replies are read by time, not id (ids can commit out of order).
    static let window: TimeInterval = 30

    func run() async throws {
        // Replies queued before this instance started are not its business.
        let startedAt = now()
        let earlier = (try? await store.bunkerReplies(since: startedAt.addingTimeInterval(-Self.window), limit: 1000)) ?? []
        let started = Dictionary(earlier.map { ($0.id, startedAt) }, uniquingKeysWith: { first, _ in first })
        // With PostgreSQL a NOTIFY wakes the reader at once; the timer stays as a safety net.
        let signals = store.bunkerReplySignals()
        let (wakes, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let sleep = signals == nil ? interval : interval * 4
        try? await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                if let signals { group.addTask { for await _ in signals { wake.yield() } } }
                group.addTask {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(sleep))
                        wake.yield()
                    }
                }
                var seen = started
                // Always read: the external relays' outlet is installed on every instance (whether it
                // holds them or not), so "is anyone listening here" cannot be told from the hub.
                for await _ in wakes { await pollOnce(&seen) }
                group.cancelAll()
            }
        }
    }

    func pollOnce(_ seen: inout [Int64: Date]) async {
        let at = now()
        guard let replies = try? await store.bunkerReplies(since: at.addingTimeInterval(-Self.window), limit: 1000) else { return }
        for reply in replies where seen[reply.id] == nil {
            seen[reply.id] = at
            if let event = try? Event.parse(json: Array(reply.event.utf8)) { hub.publishOutgoing(event) }
        }
        seen = seen.filter { at.timeIntervalSince($0.value) < Self.window * 2 }
    }
}
