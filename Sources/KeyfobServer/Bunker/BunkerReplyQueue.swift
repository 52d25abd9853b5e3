import Foundation
import KeyfobStore
import Logging
import Nostr
import ServiceLifecycle

/// Hands this instance's relay the NIP-46 replies other instances queued: a request approved on
/// one instance is answered through the instance the client is connected to. The approving
/// instance publishes its own replies at once; this reads the database every `interval` and
/// publishes what it has not seen (the hub drops events it handed on already).
struct BunkerReplyQueue: Service {
    let store: any KeyfobStore
    let hub: RelayHub
    let interval: TimeInterval
    let now: @Sendable () -> Date
    let logger: Logger
    /// How far back each read looks: replies are read by time, not id (ids can commit out of order).
    static let window: TimeInterval = 30

    func run() async throws {
        var seen: [Int64: Date] = [:]
        // Replies queued before this instance started are not its business.
        for reply in (try? await store.bunkerReplies(since: now().addingTimeInterval(-Self.window), limit: 1000)) ?? [] {
            seen[reply.id] = now()
        }
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(interval)) }
            guard !Task.isShuttingDownGracefully && !Task.isCancelled else { return }
            guard hub.connectionCount > 0 || hub.hasOutlets else { continue }
            await pollOnce(&seen)
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
