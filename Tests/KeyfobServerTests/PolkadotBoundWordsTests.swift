import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobCrypto
import Polkadot
import Testing

@testable import KeyfobServer

/// #54, "only what the hash binds": the review's attacks in their shape, each with a small runtime
/// built here (`TestRuntime.Variant`). A verified page is worded only by what the RFC-0078 hash
/// covers, the payload reads back whole by the runtime's own types, `CheckMetadataHash` is the last
/// extension that adds signed data, and every call of a batch is shown. Each attack ends refused
/// or shown unverified — never a verified summary of the dapp's words.
@Suite struct PolkadotBoundWordsTests {
    typealias Hashes = PolkadotMetadataHashTests

    /// 1000 DOT `transfer_keep_alive` to 14E5nq… (Bob).
    static let thousand = "0x0503008eaf04151687736326c9fea17e25fc5287613693c912909cb226aa4794f26a480b00a0724e1809"
    static func remark(_ text: String) -> [UInt8] { [0, 0] + SCALE.compact(UInt64(text.utf8.count)) + Array(text.utf8) }
    static func batch(_ index: UInt8, _ calls: [[UInt8]]) -> [UInt8] { [26, index] + SCALE.compact(UInt64(calls.count)) + calls.flatMap { $0 } }
    static let extended = TestRuntime.Variant(extended: true)
    static let assetHubGenesis = "0x68d56f15f85d3136970ec16946040bc1752654e906147f7e43e9d539d7c3de2f"
    static let elsewhere = "0x" + String(repeating: "33", count: 32)

    /// A connected account whose owner also allows unchecked transactions (so "shown unverified" can be seen).
    static func account(_ client: Client, _ name: String, blind: Bool) async throws -> (token: String, address: String) {
        var (token, authenticator) = try await client.newAccount(name)
        let auth = Client.bearer(token)
        let created = try await client.call(.post, "/api/polkadot/accounts", json: ["name": "Main", "network": 0], headers: auth)
        let address = try #require(created["address"] as? String)
        _ = try await client.call(.post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(authorize.tab)", nil), headers: auth)
        if blind { _ = try await client.acceptUnverified(try #require(created["id"] as? String), token: token, by: &authenticator) }
        return (token, address)
    }

    /// The hashed part of a runtime decides what is read: a decoder made from it has exactly the types
    /// the merkle tree is built from, and the pallet list, the extensions' tuple and other unreached
    /// types are not among them.
    @Test func theDecoderReadsOnlyTheHashedTypes() throws {
        let metadata = try RuntimeMetadata(TestRuntime.metadata)
        let registry = try HashedRegistry(metadata)
        // Independently: the types reachable from the extrinsic's roots, compacts not entered.
        var reached = Set<Int>()
        let roots = [11, 8, 15] + (metadata.extrinsic?.signedExtensions.flatMap { [$0.type, $0.additionalSigned] } ?? [])
        var stack = roots
        while let id = stack.popLast() {
            guard reached.insert(id).inserted else { continue }
            switch metadata.types[id]!.definition {
            case .composite(let fields): stack += fields.map(\.type)
            case .variant(let variants): stack += variants.flatMap { $0.fields.map(\.type) }
            case .sequence(let inner), .array(_, let inner): stack.append(inner)
            case .tuple(let members): stack += members
            default: break
            }
        }
        #expect(registry.coveredTypeIDs == reached)
        #expect(!registry.coveredTypeIDs.contains(19) && !registry.coveredTypeIDs.contains(9))  // the tuple; u128 under a compact
        #expect(registry.typeInfo(19) == nil)
        // The pallet list pointed at System's calls and Balances renamed: the hash is the chain's,
        // and the call still reads as the hashed RuntimeCall says.
        for variant in [TestRuntime.Variant(balancesCalls: 6), TestRuntime.Variant(balancesName: "System")] {
            let other = TestRuntime.metadata(extensions: TestRuntime.extensions, variant)
            #expect(TestRuntime.hash(of: other) == TestRuntime.hash)
            let decoder = CallDecoder(hashed: try HashedRegistry(try RuntimeMetadata(other)), ss58Prefix: 0, decimals: 10, token: "DOT")
            let call = try decoder.decode(PolkadotHex.decode(Self.thousand)!)
            #expect(call.pallet == "Balances" && call.call == "transfer_keep_alive" && call.summary?.hasPrefix("Send 1000 DOT to ") == true)
        }
        // An enum that repeats a variant index has no hashed reading at all.
        let duplicate = TestRuntime.metadata(extensions: TestRuntime.extensions, TestRuntime.Variant(duplicateTransferIndex: true))
        #expect(throws: PolkadotError.self) { try HashedRegistry(try RuntimeMetadata(duplicate)) }
        // Metadata with a byte after the runtime does not read.
        #expect(throws: PolkadotError.self) { try RuntimeMetadata(TestRuntime.metadata + [0]) }
    }

    /// F1: three metadata variants the hash does not tell apart from the chain's own. Pointing or
    /// renaming the pallet list changes no word (the page says the 1000 DOT transfer it is); a
    /// repeated variant index is refused, and with blind signing on it is shown unverified.
    @Test func thePalletListAndRepeatedIndicesWordNothing() async throws {
        try await Harness { $0.signRate = 1000 }.run { client in
            let (token, address) = try await Self.account(client, "f1-owner", blind: false)
            for variant in [TestRuntime.Variant(balancesCalls: 6), TestRuntime.Variant(balancesName: "System")] {
                let metadata = TestRuntime.metadata(extensions: TestRuntime.extensions, variant)
                try await client.provideTestRuntime(token: token, definition: TestRuntime.definition(metadata: metadata))
                for hash in [TestRuntime.hash(of: metadata), nil] {  // mode 1, and mode 0 (Keyfob sets mode 1)
                    let shown = try await Hashes.shown(TestRuntime.payload(address: address, method: Self.thousand, hash: hash), client, token: token)
                    #expect(shown["verified"] as? Bool == true, "\(shown)")
                    #expect((shown["summary"] as? String)?.hasPrefix("Send 1000 DOT to ") == true, "\(shown)")
                    #expect((shown["decodedCall"] as? String)?.hasPrefix("Balances.transfer_keep_alive(") == true)
                }
            }
            let duplicate = TestRuntime.metadata(extensions: TestRuntime.extensions, TestRuntime.Variant(duplicateTransferIndex: true))
            try await client.provideTestRuntime(token: token, definition: TestRuntime.definition(metadata: duplicate))
            let refused = try await Hashes.refused(
                TestRuntime.payload(address: address, method: Self.thousand, hash: TestRuntime.hash(of: TestRuntime.metadata)), client, token: token)
            #expect(refused.status == .forbidden && refused.error == "unverified_transaction", "\(refused.json)")
            #expect((refused["message"] as? String)?.contains("two variants the index 3") == true, "\(refused.json)")

            let (blindToken, blindAddress) = try await Self.account(client, "f1-blind", blind: true)
            try await client.provideTestRuntime(token: blindToken, definition: TestRuntime.definition(metadata: duplicate))
            let shown = try await Hashes.shown(
                TestRuntime.payload(address: blindAddress, method: Self.thousand, hash: TestRuntime.hash), client, token: blindToken)
            #expect(shown["verified"] as? Bool == false && shown["summary"] == nil && shown["decodedCall"] == nil, "\(shown)")
        }
    }

    /// P2 again: a fee asset is read by `ChargeAssetTxPayment`'s own type. An `assetId` carrying the
    /// next fields' bytes does not read back and is refused, verified or not; without metadata only
    /// no asset is signed.
    @Test func aFeeAssetIsReadByItsType() async throws {
        try await Harness { $0.signRate = 1000 }.run { client in
            let (token, address) = try await Self.account(client, "asset-owner", blind: true)
            let metadata = TestRuntime.metadata(extensions: KnownChains.assetHub, Self.extended)
            try await client.provideTestRuntime(token: token, definition: TestRuntime.definition(metadata: metadata, genesis: Self.assetHubGenesis))
            func payload(_ assetId: String?) -> [String: Any] {
                var payload = TestRuntime.payload(
                    address: address, hash: TestRuntime.hash(of: metadata), extensions: KnownChains.assetHub, genesis: Self.assetHubGenesis)
                payload["assetId"] = assetId
                return payload
            }
            let paid = try await Hashes.shown(payload("0x01000000"), client, token: token)
            #expect(paid["verified"] as? Bool == true && paid["assetId"] as? String == "1", "\(paid)")
            let none = try await Hashes.shown(payload(nil), client, token: token)
            #expect(none["verified"] as? Bool == true && none["assetId"] == nil, "\(none)")
            // An asset id with the bytes of a tip, an era and a nonce behind it: not what its type reads.
            for smuggled in ["0x0100000000", "0x01000000" + "0b00a0724e1809" + "0703" + "14"] {
                let refused = try await Hashes.refused(payload(smuggled), client, token: token)
                #expect(refused.status == .badRequest && (refused["message"] as? String)?.contains("ChargeAssetTxPayment") == true, "\(refused.json)")
            }
            // Unverified (the site's metadata withdrawn: none for this chain): no asset at all.
            let (other, otherAddress) = try await Self.account(client, "asset-blind", blind: true)
            var unverified = TestRuntime.payload(address: otherAddress, extensions: KnownChains.assetHub, genesis: Self.assetHubGenesis)
            unverified["assetId"] = "0x01000000"
            let refused = try await Hashes.refused(unverified, client, token: other)
            #expect(
                refused.status == .badRequest && (refused["message"] as? String)?.contains("assetId can only be signed") == true, "\(refused.json)")
            unverified["assetId"] = nil
            let blind = try await Hashes.shown(unverified, client, token: other)
            #expect(blind["verified"] as? Bool == false)
        }
    }

    /// Layout pinned: `CheckMetadataHash` anywhere but last (first, in the middle, or followed by an
    /// extension that adds data) is never verified — on a known chain the list must then be Keyfob's
    /// own, elsewhere the page is unverified. The review put it first and ground the spec name so the
    /// hash's tail mimicked what follows; that changes nothing. Followed only by extensions that add
    /// nothing (`StorageWeightReclaim`), it is last in the signed bytes and verified.
    @Test func theMetadataHashMustBeTheLastSignedData() async throws {
        try await Harness { $0.signRate = 1000 }.run { client in
            let (token, address) = try await Self.account(client, "layout-owner", blind: true)
            let relay = TestRuntime.extensions.filter { $0 != "CheckMetadataHash" }
            let first = ["CheckMetadataHash"] + relay
            let middle = Array(relay.prefix(4)) + ["CheckMetadataHash"] + Array(relay.dropFirst(4))
            let beforeNonce = relay.filter { $0 != "CheckNonce" } + ["CheckMetadataHash", "CheckNonce"]
            for list in [first, middle, beforeNonce] {
                let metadata = TestRuntime.metadata(extensions: list)
                // Polkadot's genesis: unverified, so its list must be Polkadot's own — and is not.
                try await client.provideTestRuntime(token: token, definition: TestRuntime.definition(metadata: metadata))
                let known = try await Hashes.refused(
                    TestRuntime.payload(address: address, method: Self.thousand, hash: TestRuntime.hash(of: metadata), extensions: list),
                    client, token: token)
                #expect(known.status == .badRequest && (known["message"] as? String)?.contains("not Polkadot's list") == true, "\(known.json)")
                // A chain Keyfob does not know: shown unverified, no summary.
                try await client.provideTestRuntime(token: token, definition: TestRuntime.definition(metadata: metadata, genesis: Self.elsewhere))
                let shown = try await Hashes.shown(
                    TestRuntime.payload(
                        address: address, method: Self.thousand, hash: TestRuntime.hash(of: metadata), extensions: list, genesis: Self.elsewhere),
                    client, token: token)
                #expect(shown["verified"] as? Bool == false && shown["summary"] == nil && shown["decodedCall"] == nil, "\(list): \(shown)")
                #expect((shown["callNote"] as? String)?.contains("not the last extension") == true, "\(shown)")
            }
            // The review's grind, in small: a spec name whose hash ends like the era that follows it.
            var name = 0
            func grounded(_ n: Int) -> [UInt8] {
                let extra = MerkleizedMetadata.ExtraInfo(
                    specVersion: UInt32(TestRuntime.specVersion), specName: "polkadot\(n)", base58Prefix: 0, decimals: 10, tokenSymbol: "DOT")
                return try! MerkleizedMetadata.hash(try! RuntimeMetadata(TestRuntime.metadata(extensions: first)), extra)
            }
            while grounded(name).last != 0x07 { name += 1 }
            #expect(grounded(name).last == 0x07)  // and still: `first` is refused above, whatever the hash

            // Last but for extensions that add nothing: verified.
            let reclaim = TestRuntime.extensions + ["StorageWeightReclaim"]
            let metadata = TestRuntime.metadata(extensions: reclaim)
            try await client.provideTestRuntime(token: token, definition: TestRuntime.definition(metadata: metadata, genesis: Self.elsewhere))
            let pinned = try await Hashes.shown(
                TestRuntime.payload(
                    address: address, method: Self.thousand, hash: TestRuntime.hash(of: metadata), extensions: reclaim, genesis: Self.elsewhere),
                client, token: token)
            #expect(pinned["verified"] as? Bool == true, "\(pinned)")
        }
    }

    /// Nothing hidden: a 17-call batch names all 17 (the 17th a 1000 DOT transfer), and a batch in a
    /// batch shows the inner one's calls.
    @Test func everyCallOfABatchIsShown() async throws {
        try await Harness { $0.signRate = 1000 }.run { client in
            let (token, address) = try await Self.account(client, "batch-owner", blind: false)
            let metadata = TestRuntime.metadata(extensions: TestRuntime.extensions, Self.extended)
            try await client.provideTestRuntime(token: token, definition: TestRuntime.definition(metadata: metadata))
            let seventeen = Self.batch(2, (0..<16).map { _ in Self.remark("hi") } + [PolkadotHex.decode(Self.thousand)!])
            let shown = try await Hashes.shown(
                TestRuntime.payload(address: address, method: PolkadotHex.encode(seventeen), hash: TestRuntime.hash(of: metadata)), client,
                token: token)
            #expect(shown["verified"] as? Bool == true, "\(shown)")
            #expect(shown["summary"] as? String == "Make 17 calls in one transaction, all of them or none")
            let calls = try #require(shown["calls"] as? [[String: Any]])
            #expect(calls.count == 17)
            #expect((calls[16]["summary"] as? String)?.hasPrefix("Send 1000 DOT to ") == true, "\(calls[16])")
            #expect((shown["decodedCall"] as? String)?.contains("Balances.transfer_keep_alive(") == true)

            // The review's Compact<()>: SCALE writes nothing for Polkadot's `MultiAddress::Index(())`,
            // so the first transfer is 4 bytes and the second names its own account and 1000 DOT.
            // Read as a number, it once showed a dust transfer and a remark instead.
            let void = Self.batch(2, [[5, 3, 1, 0], PolkadotHex.decode(Self.thousand)!])
            let both = try await Hashes.shown(
                TestRuntime.payload(address: address, method: PolkadotHex.encode(void), hash: TestRuntime.hash(of: metadata)), client, token: token)
            let pair = try #require(both["calls"] as? [[String: Any]], "\(both)")
            #expect(pair.count == 2 && (pair[0]["text"] as? String)?.contains("dest: Index(())") == true, "\(pair)")
            #expect((pair[1]["summary"] as? String)?.hasPrefix("Send 1000 DOT to ") == true, "\(pair)")

            let nested = Self.batch(2, [Self.batch(0, [PolkadotHex.decode(Self.thousand)!]), Self.remark("x")])
            let inner = try await Hashes.shown(
                TestRuntime.payload(address: address, method: PolkadotHex.encode(nested), hash: TestRuntime.hash(of: metadata)), client, token: token)
            let outer = try #require(inner["calls"] as? [[String: Any]])
            #expect(outer.count == 2)
            let deeper = try #require(outer[0]["calls"] as? [[String: Any]])
            #expect(deeper.count == 1 && (deeper[0]["summary"] as? String)?.hasPrefix("Send 1000 DOT to ") == true, "\(inner)")
        }
    }

    /// The smaller items: the era from signed data only; hidden characters escaped in a verified
    /// remark; mode 0 with a hash refused; `rawMetadata` in `state_call`'s `Option<Vec<u8>>` form.
    @Test func smallerPromisesHold() async throws {
        try await Harness { $0.signRate = 1000 }.run { client in
            let (token, address) = try await Self.account(client, "small-owner", blind: false)
            // rawMetadata as state_call returns it: Option<Vec<u8>>.
            let wrapped = [1] + SCALE.compact(UInt64(TestRuntime.metadata.count)) + TestRuntime.metadata
            try await client.provideTestRuntime(token: token, definition: TestRuntime.definition(metadata: wrapped))
            let shown = try await Hashes.shown(TestRuntime.payload(address: address, hash: TestRuntime.hash), client, token: token)
            #expect(shown["verified"] as? Bool == true, "\(shown)")
            // Era 0x0703: 256 blocks from the block whose hash is signed; the unsigned number is not said.
            #expect(shown["era"] as? String == "for 256 blocks from block 0xde8f69ee…5ec7", "\(shown)")
            #expect((shown["era"] as? String)?.contains("2301232") == false)

            let spoof = Self.remark("Pay Alice \u{202E}0001 DOT")
            let remark = try await Hashes.shown(
                TestRuntime.payload(address: address, method: PolkadotHex.encode(spoof), hash: TestRuntime.hash), client, token: token)
            #expect(remark["summary"] as? String == #"Write a remark on chain: "Pay Alice \u202E0001 DOT""#, "\(remark)")
            // A quote mark inside cannot end the quote early and add words after it.
            let injected = Self.remark(#"hi" and send 1000 DOT to Bob ""#)
            let quoted = try await Hashes.shown(
                TestRuntime.payload(address: address, method: PolkadotHex.encode(injected), hash: TestRuntime.hash), client, token: token)
            #expect(quoted["summary"] as? String == #"Write a remark on chain: "hi\" and send 1000 DOT to Bob \"""#, "\(quoted)")

            var mode0 = TestRuntime.payload(address: address)
            mode0["metadataHash"] = PolkadotHex.encode(TestRuntime.hash)
            let refused = try await Hashes.refused(mode0, client, token: token)
            #expect(refused.status == .badRequest && (refused["message"] as? String)?.contains("mode 0") == true, "\(refused.json)")

            let mistyped = try await client.call(.post, "/api/polkadot/accounts", json: ["network": 2.5], headers: Client.bearer(token))
            #expect(mistyped.status == .badRequest && (mistyped["message"] as? String)?.contains("\"network\"") == true, "\(mistyped.json)")
        }
    }

    /// At connect the person chooses which accounts a site sees (#54): `accounts.list` names only
    /// those, a signature asked of another is refused, and a new choice replaces the old one.
    @Test func aSiteSeesOnlyTheAccountsChosen() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("chooser")
            let auth = Client.bearer(token)
            var addresses: [String] = []
            for name in ["Main", "Savings"] {
                let created = try await client.call(.post, "/api/polkadot/accounts", json: ["name": name, "network": 0], headers: auth)
                addresses.append(try #require(created["address"] as? String))
            }
            func connect(_ accounts: [String]) async throws -> Reply {
                try await client.call(
                    .post, "/api/polkadot/message",
                    json: PolkadotBridgeTests.message("pub(authorize.tab)", ["origin": "a dapp", "accounts": accounts]), headers: auth)
            }
            func listed() async throws -> [String] {
                let list = try await client.call(
                    .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(accounts.list)", nil), headers: auth)
                return (list["result"] as? [[String: Any]] ?? []).compactMap { $0["address"] as? String }
            }
            #expect(try await connect([addresses[0]]).status == .ok)
            #expect(try await listed() == [addresses[0]])
            let raw = ["address": addresses[1], "data": "0x6869", "type": "bytes"]
            let refused = try await client.call(
                .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(bytes.sign)", raw), headers: auth)
            #expect(refused.status == .badRequest && (refused["message"] as? String)?.contains("you shared with") == true, "\(refused.json)")
            // None, or an address that is not the person's: refused, the choice unchanged.
            #expect(try await connect([]).status == .badRequest)
            let foreign = SS58.encode(accountId: [UInt8](repeating: 7, count: 32), prefix: 0)
            #expect(try await connect([foreign]).error == "invalid_pubkey")
            #expect(try await listed() == [addresses[0]])
            #expect(try await connect([addresses[1]]).status == .ok)
            #expect(try await listed() == [addresses[1]])
            // The choice is the connection's: its shares removed first (as a revocation does, newest
            // first), the site sees nothing, never every account.
            let grants = try await client.call(.get, "/api/signer/grants", headers: auth)["grants"] as? [[String: Any]] ?? []
            for share in grants where (share["method"] as? String)?.hasPrefix("polkadot.account:") == true {
                #expect(try await client.call(.delete, "/api/signer/grants/\(share["id"] as! String)", headers: auth).status == .ok)
            }
            #expect(try await listed() == [])
            #expect(try await connect([addresses[1]]).status == .ok)
            // A mistyped choice is a 400 naming it, never "every account".
            let mistyped = try await client.call(
                .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(authorize.tab)", ["accounts": "all"]), headers: auth)
            #expect(mistyped.status == .badRequest && mistyped.error == "invalid_request", "\(mistyped.json)")

            // An Ethereum signed message is signed as it is: the page is told, to say so.
            let ethereum = "0x" + Hex.encode(Array("\u{19}Ethereum Signed Message:\n2hi".utf8))
            let asked = try await client.call(
                .post, "/api/polkadot/message",
                json: PolkadotBridgeTests.message("pub(bytes.sign)", ["address": addresses[1], "data": ethereum, "type": "bytes"]), headers: auth)
            let id = try #require((asked["pending"] as? [String: Any])?["id"] as? String, "\(asked.json)")
            let details = try await client.call(.get, "/api/polkadot/requests/\(id)/details", headers: auth)
            #expect((details["bytes"] as? [String: Any])?["ethereum"] as? Bool == true, "\(details.json)")
        }
    }

    /// #55: metadata.provide carries megabytes to read and keep: an account sends at most 8 at once
    /// (60 an hour); the next is `429 rate_limited`. V15 with a byte after the runtime is refused.
    @Test func metadataProvideIsRatedPerAccount() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("provider")
            _ = try await client.connectedPolkadotAccount(token: token)
            var trailing = TestRuntime.definition
            trailing["rawMetadata"] = PolkadotHex.encode(TestRuntime.metadata + [0])
            let refused = try await client.call(
                .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(metadata.provide)", trailing),
                headers: Client.bearer(token))
            #expect(refused.status == .badRequest && refused.error == "invalid_content", "\(refused.json)")
            for _ in 0..<7 { try await client.provideTestRuntime(token: token) }
            let over = try await client.call(
                .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(metadata.provide)", TestRuntime.definition),
                headers: Client.bearer(token))
            #expect(over.status == .tooManyRequests && over.error == "rate_limited", "\(over.json)")
        }
    }

    /// #55: a runtime two accounts provide is stored once, outside the rows (which stay small),
    /// and the approval page still reads it from there.
    @Test func aRuntimeTwoAccountsProvideIsStoredOnce() async throws {
        let harness = try Harness()
        try await harness.run { client in
            for name in ["first", "second"] {
                let (token, _) = try await client.newAccount(name)
                _ = try await client.connectedPolkadotAccount(token: token)
                try await client.provideTestRuntime(token: token)
            }
            let usage = try await harness.store.polkadotRuntimeUsage()
            #expect(usage.runtimes == 1 && usage.bytes == TestRuntime.metadata.count)
        }
    }
}
