import Testing

@testable import KeyfobServer

/// #55: one account held 29 of 30 connections with account streams. Live streams are capped per
/// session and per account (4) and per client address (16, the forwarded one behind a trusted
/// proxy); a slot is given back when its stream's response goes, whether it ran or not.
@Suite struct StreamSlotsTests {
    @Test func streamsAreCappedPerSessionAccountAndAddress() throws {
        let slots = StreamSlots()
        var held: [StreamSlots.Slot] = []
        for _ in 0..<StreamSlots.perOwner { held.append(try slots.take(session: [1], userID: "u1", address: "203.0.113.7")) }
        // The same session, or another session of the same account: refused, 429.
        #expect(throws: KeyfobError.self) { try slots.take(session: [1], userID: "u1", address: "203.0.113.7") }
        let refused = #expect(throws: KeyfobError.self) { try slots.take(session: [2], userID: "u1", address: "198.51.100.1") }
        #expect(refused?.code == .rateLimited && refused?.status == .tooManyRequests)
        // Another account is not held back by the first.
        held.append(try slots.take(session: [3], userID: "u2", address: "198.51.100.1"))
        // A stream that ends gives its slot back.
        held.removeFirst()
        held.append(try slots.take(session: [2], userID: "u1", address: "198.51.100.1"))
        #expect(slots.count("account:u1") == StreamSlots.perOwner)
        held.removeAll()
        #expect(slots.count("account:u1") == 0 && slots.count("address:203.0.113.7") == 0)
    }

    @Test func anAddressHoldsAtMostItsShareWhateverTheAccounts() throws {
        let slots = StreamSlots()
        var held: [StreamSlots.Slot] = []
        for n in 0..<StreamSlots.perAddress { held.append(try slots.take(session: [UInt8(n)], userID: "u\(n)", address: "192.0.2.9")) }
        #expect(throws: KeyfobError.self) { try slots.take(session: [99], userID: "fresh", address: "192.0.2.9") }
        _ = try slots.take(session: [99], userID: "fresh", address: "192.0.2.10")  // another client is served
        #expect(held.count == StreamSlots.perAddress)
    }
}
