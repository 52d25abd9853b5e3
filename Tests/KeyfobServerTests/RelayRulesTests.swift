import Foundation
import Hummingbird
import HummingbirdTesting
import KeyfobStore
import Logging
import Nostr
import Testing

@testable import KeyfobServer

/// Relays a user names in a `nostrconnect://` URL (#23): Keyfob dials them from inside the
/// operator's network, so only public `wss://` relays, printable, within caps.
@Suite struct RelayAddressPolicyTests {
    let deployed = RelayAddressPolicy(allowsLocal: false)
    let local = RelayAddressPolicy(allowsLocal: true)

    func refusal(_ policy: RelayAddressPolicy, _ url: String) async -> String? {
        do { try await policy.check(url); return nil } catch { return error.reason }
    }

    @Test func addressesInsideANetworkAreNamedForWhatTheyAre() {
        let kinds: [(String, IPAddress.Kind)] = [
            ("127.0.0.1", .loopback), ("127.9.9.9", .loopback), ("::1", .loopback), ("::ffff:127.0.0.1", .loopback),
            ("10.0.0.1", .private), ("172.16.0.1", .private), ("172.31.255.255", .private), ("192.168.1.1", .private),
            ("fd00:ec2::254", .private), ("fc00::1", .private), ("::ffff:10.1.2.3", .private), ("64:ff9b::a00:1", .private),
            ("2002:a00:1::", .private), ("::10.0.0.1", .private),
            ("169.254.169.254", .linkLocal), ("fe80::1", .linkLocal),
            ("100.64.0.1", .sharedAddressSpace), ("100.100.100.200", .sharedAddressSpace),
            ("224.0.0.1", .multicast), ("ff02::1", .multicast),
            ("0.0.0.0", .reserved), ("::", .reserved), ("255.255.255.255", .reserved), ("240.0.0.1", .reserved),
            ("198.18.0.1", .reserved), ("192.0.2.1", .reserved), ("2001:db8::1", .reserved),
            ("1.1.1.1", .public), ("172.32.0.1", .public), ("100.128.0.1", .public), ("2606:4700::1111", .public),
            ("2002:0101:0101::", .public),
        ]
        for (text, kind) in kinds {
            #expect(IPAddress(text)?.kind == kind, "\(text)")
        }
        #expect(IPAddress("relay.example") == nil && IPAddress("10.0.0.1")?.description == "10.0.0.1")
    }

    @Test func aDeployedServerDialsOnlyPublicWssRelays() async {
        for url in [
            "wss://127.0.0.1", "wss://[::1]:7777", "wss://10.0.0.1", "wss://169.254.169.254/latest/meta-data",
            "wss://localhost:7000", "wss://relay.localhost", "ws://relay.damus.io", "https://relay.damus.io",
            "wss://user:pass@relay.damus.io", "wss://relay.damus.io/\nforged", "wss://relay.damus.io/\u{85}x",
            "wss://relay damus.io", "wss://" + String(repeating: "a", count: 300),
        ] {
            #expect(await refusal(deployed, url) != nil, "\(url)")
        }
        #expect(await refusal(deployed, "wss://1.1.1.1") == nil)
        #expect(await refusal(deployed, "wss://no-such-relay.invalid") == nil)  // checked again before each connection
        // On localhost (development) a relay on the same machine is fine; the private network is not.
        #expect(await refusal(local, "ws://127.0.0.1:7000") == nil)
        #expect(await refusal(local, "ws://[::1]:7000") == nil)
        #expect(await refusal(local, "ws://10.0.0.1") != nil)
        #expect(await refusal(local, "wss://169.254.169.254") != nil)
    }

    @Test func aNameIsJudgedByEveryAddressItResolvesTo() async {
        var policy = deployed
        policy.resolve = { host in
            switch host {
            case "relay.example": [IPAddress("93.184.216.34")!]
            case "rebound.example": [IPAddress("93.184.216.34")!, IPAddress("10.0.0.5")!]
            case "metadata.example": [IPAddress("169.254.169.254")!]
            default: nil
            }
        }
        #expect(await refusal(policy, "wss://relay.example") == nil)
        #expect(await refusal(policy, "wss://rebound.example")?.contains("private") == true)
        #expect(await refusal(policy, "wss://metadata.example")?.contains("link-local") == true)
        #expect(await refusal(policy, "wss://gone.example") == nil)
        // Before a connection the name must resolve, and to public addresses only.
        do {
            try await policy.check("wss://gone.example", mustResolve: true)
            Issue.record("an unresolvable name was dialled")
        } catch {}
    }

    @Test func theEndpointRefusesInnerRelaysAndCapsClientsAndRelaysPerAccount() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let userID = try #require(try await client.harness.store.user(named: "alice")).id
            let keys = (0..<18).map { _ in SecretKey.generate().publicKey.hex }
            func paste(_ n: Int, _ relays: [String]) async throws -> Reply {
                let query = relays.map { "relay=\($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)" }.joined(separator: "&")
                return try await client.call(
                    .post, "/api/signer/nostrconnect",
                    json: ["url": "nostrconnect://\(keys[n])?\(query)&secret=s"],
                    headers: Client.bearer(token))
            }
            for relay in ["ws://10.0.0.1", "wss://169.254.169.254", "wss://[fe80::1]", "wss://100.64.1.1"] {
                let reply = try await paste(16, [relay])
                #expect(reply["error"] as? String == "invalid_request", "\(relay): \(reply)")
            }
            // 16 clients through their own relays (made directly: the paste limit would stop a loop).
            let store = client.harness.store
            for n in 0..<16 {
                try await store.putBunkerClient(
                    BunkerClientRecord(
                        userID: userID, clientPubkey: keys[n], name: nil,
                        url: nil, perms: "", createdAt: Date(), relays: ["wss://r\(n % 4).example"]), session: nil)
            }
            #expect((try await paste(16, ["wss://r0.example"]))["error"] as? String == "invalid_request")
            // Replacing one already connected is fine.
            let replaced = try await paste(0, ["wss://r0.example"])
            #expect(replaced["pubkey"] != nil, "\(replaced)")
            // At most 8 relays of one's own across all clients.
            _ = try await store.deleteBunkerClient(userID: userID, clientPubkey: keys[15], client: "nip46:" + keys[15])
            let six = (0..<6).map { "wss://n\($0).example" }
            #expect((try await paste(17, six))["error"] as? String == "invalid_request")
            #expect((try await paste(17, Array(six.prefix(4))))["pubkey"] != nil)
        }
    }
}

/// Log values come from relays, clients and errors: a newline in one must not start a forged line.
@Suite struct LogLineTests {
    @Test func controlCharactersInAnyValueOrMessageAreEscaped() throws {
        #expect(LogText.escaped("plain value") == "plain value")
        #expect(LogText.escaped("a\nb\r\tc\u{1b}[31m\u{7f}\u{85}\u{2028}é✓") == #"a\nb\r\tc\u{1b}[31m\u{7f}\u{85}\u{2028}é✓"#)
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let output = LogOutput(descriptor: fds[1])
        let logger = Logger(label: "keyfob") { LineLogHandler(label: $0, output: output) }
        logger.notice("nip46.relay_notice\nforged message", metadata: ["relay": "wss://x\n2026-01-01 critical forged", "n": ["a\nb"]])
        output.flush()
        close(fds[1])
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = read(fds[0], &bytes, bytes.count)
        let text = String(decoding: bytes.prefix(max(count, 0)), as: UTF8.self)
        #expect(text.filter { $0 == "\n" }.count == 1 && text.hasSuffix("\n"), "\(text)")
        #expect(text.contains(#"relay=wss://x\n2026-01-01 critical forged"#) && text.contains(#"nip46.relay_notice\nforged message"#))
    }
}
