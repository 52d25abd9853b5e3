import Foundation
import NIOConcurrencyHelpers

/// One thing that happened, for the operator: a ceremony, a session event or a signer operation.
/// Never a secret: names, codes, methods, kinds, addresses.
public struct Activity: Sendable, Encodable, Equatable {
    public let time: Date
    /// `ceremony`, `session` or `signer`.
    public let category: String
    /// `registration.verified`, `authentication.failed`, `signer.approved`, …
    public let event: String
    public let user: String?
    public let client: String?
    public let method: String?
    public let kind: Int?
    /// `ok`, `failed`, `approved`, `rejected`.
    public let outcome: String
    public let code: String?
    public let ip: String?
}

/// The recent past (a ring of the last `capacity` activities) and live subscribers (the
/// dashboard's server-sent events). In memory, per instance.
final class ActivityFeed: Sendable {
    private struct State {
        /// A ring: `ring[next]` is the oldest once full. Publishing is O(1) — dropping the oldest
        /// of an array moved every element, on every sign-in.
        var ring: [Activity] = []
        var next = 0
        var subscribers: [UUID: AsyncStream<Activity>.Continuation] = [:]

        /// Oldest first.
        var recent: [Activity] { Array(ring[next...] + ring[..<next]) }
    }
    private let state = NIOLockedValueBox(State())
    let capacity: Int
    let startedAt = Date()

    init(capacity: Int = 5000) { self.capacity = capacity }

    func publish(_ activity: Activity) {
        let subscribers = state.withLockedValue { state -> [AsyncStream<Activity>.Continuation]? in
            if state.ring.count < capacity {
                state.ring.append(activity)
            } else {
                state.ring[state.next] = activity
                state.next = (state.next + 1) % capacity
            }
            return state.subscribers.isEmpty ? nil : Array(state.subscribers.values)
        }
        for subscriber in subscribers ?? [] { subscriber.yield(activity) }
    }

    /// Newest first, filtered.
    func recent(outcome: String? = nil, code: String? = nil, limit: Int = 200) -> [Activity] {
        state.withLockedValue { state in
            Array(
                state.recent.reversed().lazy.filter { a in
                    (outcome == nil || a.outcome == outcome) && (code == nil || a.code == code)
                }.prefix(limit))
        }
    }

    func since(_ date: Date) -> [Activity] {
        state.withLockedValue { $0.recent.filter { $0.time >= date } }
    }

    /// A live stream of what happens from now on; ends when the subscriber goes away.
    func subscribe() -> AsyncStream<Activity> {
        let id = UUID()
        let (stream, continuation) = AsyncStream<Activity>.makeStream(bufferingPolicy: .bufferingNewest(1000))
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLockedValue { $0.subscribers.removeValue(forKey: id) }
        }
        state.withLockedValue { $0.subscribers[id] = continuation }
        return stream
    }
}

/// Connections open right now (ConnectionGuard counts them), for the dashboard's health.
public final class ConnectionCounter: Sendable {
    public init() {}
    private let value = NIOLockedValueBox(0)
    func opened() { value.withLockedValue { $0 += 1 } }
    func closed() { value.withLockedValue { $0 -= 1 } }
    var current: Int { value.withLockedValue { $0 } }
}
