import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobCrypto
import Polkadot
import Testing

@testable import KeyfobServer

/// "Metadata hash checked" means Keyfob checked it (#42): the payload carries `CheckMetadataHash`
/// mode 1 with the RFC-0078 hash Keyfob computes from the V15 metadata the dapp provided, of the
/// payload's spec version, with exactly the runtime's extensions. Mode 1 alone once said "yes".
@Suite struct PolkadotMetadataHashTests {
    /// Asks for `payload`'s signature and returns what the approval page is told of it.
    static func shown(_ payload: [String: Any], _ client: Client, token: String) async throws -> [String: Any] {
        let auth = Client.bearer(token)
        let asked = try await client.call(
            .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(extrinsic.sign)", payload), headers: auth)
        let id = try #require((asked["pending"] as? [String: Any])?["id"] as? String, "\(asked.json)")
        let details = try await client.call(.get, "/api/polkadot/requests/\(id)/details", headers: auth)
        return try #require(details["extrinsic"] as? [String: Any], "\(details.json)")
    }

    /// Asks for `payload`'s signature and returns the refusal.
    static func refused(_ payload: [String: Any], _ client: Client, token: String) async throws -> Reply {
        let asked = try await client.call(
            .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(extrinsic.sign)", payload), headers: Client.bearer(token))
        #expect(asked["pending"] == nil, "\(asked.json)")
        return asked
    }

    @Test func onlyAHashKeyfobComputedFromTheProvidedMetadataIsChecked() async throws {
        try await Harness { $0.signRate = 1000 }.run { client in
            let (token, _) = try await client.newAccount("vera")
            let address = try await client.connectedPolkadotAccount(token: token)
            try await client.provideTestRuntime(token: token)

            let checked = try await Self.shown(TestRuntime.payload(address: address, hash: TestRuntime.hash), client, token: token)
            #expect(checked["metadataHashChecked"] as? Bool == true && checked["verified"] as? Bool == true, "\(checked)")
            #expect((checked["decodedCall"] as? String)?.hasPrefix("Balances.transfer_keep_alive(dest: Id(") == true, "\(checked)")
            #expect((checked["summary"] as? String)?.hasPrefix("Send 1 DOT to ") == true)
            #expect((checked["callNote"] as? String)?.hasPrefix("Checked") == true)

            // A hash Keyfob did not compute (mode 1 alone once said "checked"): refused, nothing queued.
            let forged = try await Self.refused(TestRuntime.payload(address: address, hash: randomBytes(32)), client, token: token)
            #expect(forged.status == .badRequest && forged.error == "invalid_content", "\(forged.json)")
            #expect((forged["message"] as? String)?.contains("metadataHash is not the hash") == true)
            // Another extension list than the runtime's, even with the right hash: refused.
            let fewer = try await Self.refused(
                TestRuntime.payload(address: address, hash: TestRuntime.hash, extensions: TestRuntime.extensions.filter { $0 != "CheckWeight" }),
                client, token: token)
            #expect(fewer.status == .badRequest && (fewer["message"] as? String)?.contains("not this runtime's own list") == true)
            // Another spec version than the metadata's: the metadata is not used, so nothing can be
            // checked, and the account does not sign blind.
            let newer = try await Self.refused(
                TestRuntime.payload(address: address, hash: TestRuntime.hash, specVersion: TestRuntime.specVersion + 1), client, token: token)
            #expect(newer.status == .forbidden && newer.error == "unverified_transaction", "\(newer.json)")
            #expect((newer["message"] as? String)?.contains("spec version \(TestRuntime.specVersion)") == true)
        }
    }

    /// A field no listed extension encodes is not in the signed bytes: the page must not say it
    /// (a hidden tip once showed as "Tip 0 DOT", a Polkadot transfer as "On Westend"). A runtime
    /// whose own list lacks them (a chain Keyfob does not know) shows them as unsigned.
    @Test func fieldsNoExtensionSignsAreNotShownAsPartOfTheTransaction() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("xena")
            let address = try await client.connectedPolkadotAccount(token: token)
            let bareList = ["CheckSpecVersion", "CheckTxVersion", "CheckWeight", "CheckMetadataHash"]
            let bare = TestRuntime.metadata(extensions: bareList)
            let elsewhere = "0x" + String(repeating: "11", count: 32)
            try await client.provideTestRuntime(token: token, definition: TestRuntime.definition(metadata: bare, genesis: elsewhere))
            let shown = try await Self.shown(
                TestRuntime.payload(address: address, extensions: bareList, genesis: elsewhere), client, token: token)
            let unsigned = "not part of what is signed"
            #expect(shown["tip"] as? String == unsigned && shown["nonce"] as? String == unsigned && shown["era"] as? String == unsigned)
            #expect(shown["genesisSigned"] as? Bool == false && shown["chain"] == nil && shown["summary"] == nil, "\(shown)")
            #expect(shown["notSigned"] as? [String] == ["genesis hash (the chain)", "era", "nonce", "tip"], "\(shown)")
            // Polkadot's own list signs them all.
            try await client.provideTestRuntime(token: token)
            let full = try await Self.shown(TestRuntime.payload(address: address), client, token: token)
            #expect(full["genesisSigned"] as? Bool == true && full["chain"] as? String == "Polkadot" && full["tip"] as? String != unsigned)
            #expect(full["notSigned"] as? [String] == [])
        }
    }

    /// The review's attacks (#42), as written: a dapp's own metadata describing a 1000 DOT transfer
    /// as something else, and payloads whose extension list moves bytes between the call and the
    /// extensions (a hidden tip, another chain, no nonce). None is shown as fact or signed blind.
    @Test func theReviewsAttacksAreRefusedOrShownUnchecked() async throws {
        try await Harness { $0.signRate = 1000 }.run { client in
            var (token, authenticator) = try await client.newAccount("mallory-target")
            let auth = Client.bearer(token)
            let created = try await client.call(.post, "/api/polkadot/accounts", json: ["name": "Main", "network": 0], headers: auth)
            let address = try #require(created["address"] as? String)
            _ = try await client.call(.post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(authorize.tab)", nil), headers: auth)
            // A 1000 DOT transfer_keep_alive to 14E5nq…, and calls-only metadata in which pallet 5
            // call 3 is a remark (the dapp's own words).
            let thousand = "0x0503008eaf04151687736326c9fea17e25fc5287613693c912909cb226aa4794f26a480b00a0724e1809"
            let remarkOnly = TestRuntime.metadata.replacing(Array("transfer_keep_alive".utf8), with: Array("remark_with_event__".utf8))
            #expect(try RuntimeMetadata(remarkOnly).callPallets[5]?.name == "Balances")
            var definition: [String: Any] = TestRuntime.definition
            definition["rawMetadata"] = nil
            definition["metaCalls"] = Data(remarkOnly).base64EncodedString()
            try await client.provideTestRuntime(token: token, definition: definition)
            let payload = TestRuntime.payload(address: address, method: thousand)
            let refused = try await Self.refused(payload, client, token: token)
            #expect(refused.status == .forbidden && refused.error == "unverified_transaction", "\(refused.json)")

            // Allowed by the owner: still no sentence, and the dapp's words are marked as its own.
            let accountID = try #require(created["id"] as? String)
            _ = try await client.acceptUnverified(accountID, token: token, by: &authenticator)
            let shown = try await Self.shown(payload, client, token: token)
            #expect(shown["verified"] as? Bool == false && shown["metadataHashChecked"] as? Bool == false)
            #expect(shown["summary"] == nil && shown["decodedCall"] == nil && shown["recipient"] == nil, "\(shown)")
            #expect((shown["siteDescription"] as? String)?.hasPrefix("Balances.remark_with_event__") == true, "\(shown)")
            #expect(shown["call"] as? String == thousand)

            // Shifted extensions: Polkadot's genesis with a list that is not Polkadot's (no tip,
            // no nonce, no era; or reordered) is refused, the owner's setting notwithstanding.
            for list in [
                ["CheckSpecVersion", "CheckTxVersion", "CheckGenesis"],
                TestRuntime.extensions.filter { $0 != "CheckNonce" },
                TestRuntime.extensions.filter { $0 != "ChargeTransactionPayment" },
                Array(TestRuntime.extensions.reversed()),
            ] {
                let shifted = try await Self.refused(TestRuntime.payload(address: address, method: thousand, extensions: list), client, token: token)
                #expect(shifted.status == .badRequest && (shifted["message"] as? String)?.contains("not Polkadot's list") == true, "\(list)")
            }
            // A chain Keyfob does not know, without metadata: its extensions cannot be known.
            let elsewhere = try await Self.refused(
                TestRuntime.payload(address: address, genesis: "0x" + String(repeating: "22", count: 32)), client, token: token)
            #expect(elsewhere.status == .badRequest && (elsewhere["message"] as? String)?.contains("cannot tell which signed extensions") == true)
        }
    }

    @Test func rawMetadataMustBeV15OfTheStatedSpecVersion() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("walt")
            _ = try await client.connectedPolkadotAccount(token: token)
            for (name, value, code) in [
                ("rawMetadata", "0x6d657461" as Any, "invalid_content"), ("rawMetadata", 7, "invalid_request"),
                ("specVersion", TestRuntime.specVersion + 1, "invalid_content"), ("specVersion", "1003004", "invalid_request"),
                ("tokenDecimals", "10", "invalid_request"),
            ] {
                var definition = TestRuntime.definition
                definition[name] = value
                let refused = try await client.call(
                    .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(metadata.provide)", definition),
                    headers: Client.bearer(token))
                #expect(refused.status == .badRequest && refused.error == code, "\(name): \(refused.json)")
            }
        }
    }
}

extension Client {
    /// A new Polkadot account connected to the test dapp: its address.
    func connectedPolkadotAccount(token: String) async throws -> String {
        let auth = Client.bearer(token)
        let created = try await call(.post, "/api/polkadot/accounts", json: ["name": "Main", "network": 0], headers: auth)
        let address = try #require(created["address"] as? String, "\(created.json)")
        _ = try await call(.post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(authorize.tab)", nil), headers: auth)
        return address
    }
}
