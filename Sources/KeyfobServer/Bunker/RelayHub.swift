import DequeModule
import Foundation
import KeyfobCodecs
import NIOConcurrencyHelpers
import Nostr

/// The built-in NIP-46 relay's routing: connections, their subscriptions, and kind-24133 events
/// handed in memory to every subscription whose filters match. Nothing is stored: an event reaches
/// whoever is subscribed when it arrives (NIP-46 peers subscribe before they send). Bounded per
/// connection (subscriptions, filters, message size) and per client address (connections).
public final class RelayHub: Sendable {
    public struct Limits: Sendable {
        var connectionsPerAddress = 16
        var subscriptionsPerConnection = 16
        var frame = RelayLimits(maxMessageBytes: 64 * 1024, maxFiltersPerRequest: 8, maxValuesPerField: 64)
        /// Events whose `created_at` is further than this from now are refused (replays of old
        /// captures, and events dated ahead to outlive the memory of ids).
        var eventWindow: TimeInterval = 60
        /// Events a connection may send per second, in bursts of `eventBurst`; the same for one sender key.
        var eventsPerSecond = 20
        var eventBurst = 60
        /// Event ids remembered at most (for `2 × eventWindow`); past it new events are refused
        /// until some are old enough to forget, rather than forgetting ids that could be replayed.
        var rememberedIDs = 200_000
        /// Bytes of frames waiting for one slow reader; past it the connection is closed.
        var outboundBytesPerConnection = 256 * 1024
        /// Bytes waiting for all slow readers together; past it the reader that would pass it is closed.
        var outboundBytesTotal = 64 * 1024 * 1024

        public init() {}
    }

    typealias Send = @Sendable (String) -> Void

    private struct Connection {
        let address: String
        let send: Send
        var subscriptions: [String: [RelayFilter]] = [:]
    }

    private struct State {
        var connections: [UInt64: Connection] = [:]
        var perAddress: [String: Int] = [:]
        var nextID: UInt64 = 0
        /// Events handed on within the last `2 × eventWindow`, oldest first: the same event arriving
        /// again (a replay, another relay, a client's retry, the reply queue) is not delivered twice.
        var recent: Set<[UInt8]> = []
        var recentOrder = Deque<(id: [UInt8], at: Date)>()
    }

    let limits: Limits
    private let state = NIOLockedValueBox(State())
    /// In-process readers of every accepted event (the bunker), besides the connections.
    private let listeners = NIOLockedValueBox<[@Sendable (Event) -> Void]>([])

    func listen(_ listener: @escaping @Sendable (Event) -> Void) { listeners.withLockedValue { $0.append(listener) } }

    /// Where the bunker's own events (its replies) also go: the external relays.
    private let outlets = NIOLockedValueBox<[@Sendable (Event) -> Void]>([])

    func addOutlet(_ outlet: @escaping @Sendable (Event) -> Void) { outlets.withLockedValue { $0.append(outlet) } }

    /// An event of the bunker's own: into the hub, and out to the external relays (once).
    func publishOutgoing(_ event: Event) {
        // Dated by this server's own clock: not checked against the window.
        guard deliver(event, at: now(), fromOutside: false) == .delivered else { return }
        for outlet in outlets.withLockedValue({ $0 }) { outlet(event) }
    }

    /// What every connection's queue of frames draws from (`Limits.outboundBytesTotal`).
    let outboundBudget: OutboundBudget

    let now: @Sendable () -> Date
    private let perConnection: RateLimiter
    private let perSender: RateLimiter

    public init(limits: Limits = Limits(), now: @escaping @Sendable () -> Date = { Date() }) {
        self.limits = limits
        self.now = now
        outboundBudget = OutboundBudget(maxBytes: limits.outboundBytesTotal)
        perConnection = RateLimiter(rate: limits.eventsPerSecond, per: 1, burst: limits.eventBurst)
        perSender = RateLimiter(rate: limits.eventsPerSecond, per: 1, burst: limits.eventBurst)
    }

    struct TooManyConnections: Error {}

    /// Registers a connection from `address`; `send` must not block (it queues a frame).
    func open(address: String, send: @escaping Send) throws -> UInt64 {
        try state.withLockedValue { state in
            guard state.perAddress[address, default: 0] < limits.connectionsPerAddress else { throw TooManyConnections() }
            state.nextID += 1
            state.connections[state.nextID] = Connection(address: address, send: send)
            state.perAddress[address, default: 0] += 1
            return state.nextID
        }
    }

    func close(_ id: UInt64) {
        state.withLockedValue { state in
            guard let connection = state.connections.removeValue(forKey: id) else { return }
            let left = state.perAddress[connection.address, default: 1] - 1
            state.perAddress[connection.address] = left > 0 ? left : nil
        }
    }

    var connectionCount: Int { state.withLockedValue { $0.connections.count } }

    /// Handles one text frame from connection `id`; returns the answers for that connection.
    func receive(_ text: String, from id: UInt64) -> [String] {
        let message: ClientMessage
        do { message = try ClientMessage.parse(text, limits: limits.frame) } catch { return [error.answer] }
        switch message {
        case .event(let event):
            let eventID = Hex.encode(event.id)
            guard event.kind == NIP46.kind else {
                return [
                    RelayAnswer.ok(
                        eventID: eventID, accepted: false,
                        message: "blocked: this relay carries NIP-46 messages (kind 24133) only")
                ]
            }
            let at = now()
            guard isCurrent(event, at: at) else {
                return [
                    RelayAnswer.ok(
                        eventID: eventID, accepted: false,
                        message: "invalid: created_at must be within \(Int(limits.eventWindow)) s of now")
                ]
            }
            guard perConnection.take("c\(id)", now: at) == nil, perSender.take(event.pubkey.hex, now: at) == nil else {
                return [RelayAnswer.ok(eventID: eventID, accepted: false, message: "rate-limited: slow down")]
            }
            switch deliver(event, at: at, fromOutside: true) {
            case .delivered: return [RelayAnswer.ok(eventID: eventID, accepted: true, message: "")]
            case .duplicate: return [RelayAnswer.ok(eventID: eventID, accepted: true, message: "duplicate: already have this event")]
            case .busy: return [RelayAnswer.ok(eventID: eventID, accepted: false, message: "rate-limited: the relay is busy")]
            case .stale: return [RelayAnswer.ok(eventID: eventID, accepted: false, message: "invalid: created_at is out of range")]
            }
        case .request(let subscription, let filters):
            let accepted: Bool = state.withLockedValue { state in
                guard var connection = state.connections[id] else { return false }
                guard
                    connection.subscriptions[subscription] != nil
                        || connection.subscriptions.count < limits.subscriptionsPerConnection
                else { return false }
                connection.subscriptions[subscription] = filters
                state.connections[id] = connection
                return true
            }
            guard accepted else {
                return [
                    RelayAnswer.closed(
                        subscription: subscription,
                        message: "blocked: at most \(limits.subscriptionsPerConnection) subscriptions per connection")
                ]
            }
            // Nothing is stored, so the stored events end at once.
            return [RelayAnswer.endOfStoredEvents(subscription: subscription)]
        case .close(let subscription):
            state.withLockedValue { state in _ = state.connections[id]?.subscriptions.removeValue(forKey: subscription) }
            return []
        }
    }

    /// Hands `event` to every subscription whose filters match (each subscription once), unless
    /// it was handed on lately. Returns whether it was new.
    @discardableResult
    func publish(_ event: Event) -> Bool {
        deliver(event, at: now(), fromOutside: true) == .delivered
    }

    enum Delivery { case delivered, duplicate, busy, stale }

    /// Whether `event` is dated within `Limits.eventWindow` of `at`. Checked on every path in
    /// (a connection here, an external relay, the reply queue), so a captured request re-sent
    /// later, through any relay, is refused by its date once its id is forgotten.
    func isCurrent(_ event: Event, at: Date) -> Bool {
        abs(Double(event.createdAt) - at.timeIntervalSince1970) <= limits.eventWindow
    }

    private func deliver(_ event: Event, at: Date, fromOutside: Bool) -> Delivery {
        guard !fromOutside || isCurrent(event, at: at) else { return .stale }
        var outcome = Delivery.delivered
        let deliveries: [(Send, String)]? = state.withLockedValue { state in
            // Forget ids older than any event the window still admits (their replays are refused by date).
            let horizon = at.addingTimeInterval(-2 * limits.eventWindow)
            while let first = state.recentOrder.first, first.at < horizon {
                state.recent.remove(first.id)
                state.recentOrder.removeFirst()
            }
            guard state.recentOrder.count < limits.rememberedIDs else {
                outcome = .busy
                return nil
            }
            guard state.recent.insert(event.id).inserted else {
                outcome = .duplicate
                return nil
            }
            state.recentOrder.append((event.id, at))
            var out: [(Send, String)] = []
            for connection in state.connections.values {
                for (subscription, filters) in connection.subscriptions where filters.contains(where: { $0.matches(event) }) {
                    out.append((connection.send, subscription))
                }
            }
            return out
        }
        guard let deliveries else { return outcome }
        // Outside the lock: sending queues a frame per reader.
        for (send, subscription) in deliveries { send(RelayAnswer.event(subscription: subscription, event: event)) }
        for listener in listeners.withLockedValue({ $0 }) { listener(event) }
        return .delivered
    }
}
