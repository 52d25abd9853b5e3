import KeyfobCodecs
import NIOConcurrencyHelpers

/// How many server-sent event streams one session, one account and one client address hold open
/// on this instance. A stream holds a connection for as long as it lives: without a cap one free
/// account could hold every connection of the HTTP share (behind a proxy, where the per-address
/// connection cap sees only the proxy). A stream takes a slot under each of its keys, or none.
final class StreamSlots: Sendable {
    /// Streams per session and per account (a wallet, a dashboard, a tab or two).
    static let perOwner = 4
    /// Streams per client address (several accounts behind one NAT).
    static let perAddress = 16

    private let held = NIOLockedValueBox<[String: Int]>([:])

    /// A slot under each key (`(key, cap)`), released when the returned value goes (the stream's
    /// response is dropped, whether it ran or not); nil when any key is at its cap.
    func take(_ keys: [(String, Int)]) -> Slot? {
        let taken = held.withLockedValue { held -> Bool in
            guard keys.allSatisfy({ held[$0.0, default: 0] < $0.1 }) else { return false }
            for (key, _) in keys { held[key, default: 0] += 1 }
            return true
        }
        return taken ? Slot(keys: keys.map(\.0), slots: self) : nil
    }

    fileprivate func release(_ keys: [String]) {
        held.withLockedValue { held in
            for key in keys {
                let left = held[key, default: 1] - 1
                held[key] = left > 0 ? left : nil
            }
        }
    }

    /// Open streams under `key` (tests).
    func count(_ key: String) -> Int { held.withLockedValue { $0[key, default: 0] } }

    final class Slot: Sendable {
        let keys: [String]
        let slots: StreamSlots
        fileprivate init(keys: [String], slots: StreamSlots) { (self.keys, self.slots) = (keys, slots) }
        deinit { slots.release(keys) }
    }

    /// The slots a stream of `session` of `userID` from `address` takes, or a 429 saying which cap.
    /// `address` is the client's limit key (`ClientAddress.limitKey`: an IPv6 client by its prefix).
    func take(session: [UInt8], userID: String, address: String) throws -> Slot {
        let keys = [
            ("session:" + Hex.encode(session), Self.perOwner), ("account:" + userID, Self.perOwner), ("address:" + address, Self.perAddress),
        ]
        guard let slot = take(keys) else {
            throw KeyfobError(
                .rateLimited,
                "at most \(Self.perOwner) live streams a session and an account (\(Self.perAddress) an address) stay open: close one first",
                status: .tooManyRequests)
        }
        return slot
    }
}
