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
    static func c(_ n: Int) -> [UInt8] { SCALE.compact(UInt64(n)) }
    static func text(_ s: String) -> [UInt8] { c(s.utf8.count) + Array(s.utf8) }

    static let extensions = [
        "CheckSpecVersion", "CheckTxVersion", "CheckGenesis", "CheckMortality", "CheckNonce", "CheckWeight",
        "ChargeTransactionPayment", "CheckMetadataHash",
    ]
    static let specVersion = 1_003_004

    /// A small V15 runtime "polkadot" 1003004: `System.remark(Vec<u8>)` as its one call, the
    /// `System.Version` constant, and `extensions` in the extrinsic.
    static let metadata: [UInt8] = {
        func type(_ id: Int, path: [String] = [], _ definition: [UInt8]) -> [UInt8] {
            c(id) + c(path.count) + path.flatMap(text) + [0] + definition + [0]
        }
        func field(_ name: String?, _ type: Int) -> [UInt8] { (name.map { [1] + text($0) } ?? [0]) + c(type) + [0, 0] }
        let types = [
            type(0, [5, 3]),  // u8
            type(1, [5, 5]),  // u32
            type(2, [6] + c(1)),  // Compact<u32>
            type(3, [4, 0]),  // ()
            type(4, [3] + SCALE.littleEndian(32, width: 4) + c(0)),  // [u8; 32]
            type(5, path: ["sp_core", "crypto", "AccountId32"], [0] + c(1) + field(nil, 4)),
            type(6, path: ["frame_system", "pallet", "Call"], [1] + c(1) + text("remark") + c(1) + field("remark", 7) + [0, 0]),
            type(7, [2] + c(0)),  // Vec<u8>
            type(8, path: ["polkadot_runtime", "RuntimeCall"], [1] + c(1) + text("System") + c(1) + field(nil, 6) + [0, 0]),
        ]
        let version =
            text("polkadot") + text("parity-polkadot") + SCALE.littleEndian(0, width: 4)
            + SCALE.littleEndian(UInt64(specVersion), width: 4) + SCALE.littleEndian(0, width: 4) + c(0)
            + SCALE.littleEndian(26, width: 4) + [1]
        let system =
            text("System") + [0] + [1] + c(6) + [0] + c(1) + text("Version") + c(3) + c(version.count) + version + [0] + [0] + [0] + [0]
        let extrinsic =
            [4] + c(5) + c(8) + c(4) + c(3) + c(extensions.count)
            + extensions.flatMap { text($0) + c(3) + c(3) }
        return Array("meta".utf8) + [15] + c(types.count) + types.flatMap { $0 } + c(1) + system + extrinsic
    }()

    static var definition: [String: Any] {
        [
            "chain": "Polkadot", "genesisHash": "0x91b171bb158e2d3848fa23a9f1c25182fb8e20313b2c1eb49219da7a70ce90c3",
            "specVersion": specVersion, "ss58Format": 0, "tokenDecimals": 10, "tokenSymbol": "DOT",
            "rawMetadata": PolkadotHex.encode(metadata),
        ]
    }

    static var hash: [UInt8] {
        let extra = MerkleizedMetadata.ExtraInfo(
            specVersion: UInt32(specVersion), specName: "polkadot", base58Prefix: 0, decimals: 10, tokenSymbol: "DOT")
        return try! MerkleizedMetadata.hash(try! RuntimeMetadata(metadata), extra)
    }

    /// `System.remark("hi")` on Polkadot, mode 1 with `metadataHash`.
    static func payload(address: String, hash: [UInt8], extensions: [String] = extensions, specVersion: Int = specVersion)
        -> [String: Any]
    {
        var payload = PolkadotBridgeTests.payload(address: address, extensions: extensions)
        payload["method"] = "0x0000086869"
        payload["mode"] = 1
        payload["metadataHash"] = PolkadotHex.encode(hash)
        payload["specVersion"] = PolkadotHex.encode(Array(SCALE.littleEndian(UInt64(specVersion), width: 4).reversed()))
        return payload
    }

    /// Asks for `payload`'s signature and returns what the approval page is told of it.
    static func shown(_ payload: [String: Any], _ client: Client, token: String) async throws -> [String: Any] {
        let auth = Client.bearer(token)
        let asked = try await client.call(
            .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(extrinsic.sign)", payload), headers: auth)
        let id = try #require((asked["pending"] as? [String: Any])?["id"] as? String, "\(asked.json)")
        let details = try await client.call(.get, "/api/polkadot/requests/\(id)/details", headers: auth)
        return try #require(details["extrinsic"] as? [String: Any], "\(details.json)")
    }

    @Test func onlyAHashKeyfobComputedFromTheProvidedMetadataIsChecked() async throws {
        try await Harness { $0.signRate = 1000 }.run { client in
            let (token, _) = try await client.newAccount("vera")
            let address = try await client.connectedPolkadotAccount(token: token)
            let provided = try await client.call(
                .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(metadata.provide)", Self.definition),
                headers: Client.bearer(token))
            #expect(provided.status == .ok, "\(provided.json)")

            let checked = try await Self.shown(Self.payload(address: address, hash: Self.hash), client, token: token)
            #expect(checked["metadataHashChecked"] as? Bool == true, "\(checked)")
            #expect((checked["decodedCall"] as? String)?.contains("remark") == true, "\(checked)")
            #expect((checked["callNote"] as? String)?.hasPrefix("Checked") == true)

            // A hash Keyfob did not compute (mode 1 alone once said "checked"): not checked.
            let forged = try await Self.shown(Self.payload(address: address, hash: randomBytes(32)), client, token: token)
            #expect(forged["metadataHashChecked"] as? Bool == false)
            // Another extension list than the runtime's, even with the right hash: not checked.
            let fewer = try await Self.shown(
                Self.payload(address: address, hash: Self.hash, extensions: Self.extensions.filter { $0 != "CheckWeight" }), client,
                token: token)
            #expect(fewer["metadataHashChecked"] as? Bool == false)
            // Another spec version than the metadata's: not checked.
            let newer = try await Self.shown(
                Self.payload(address: address, hash: Self.hash, specVersion: Self.specVersion + 1), client, token: token)
            #expect(newer["metadataHashChecked"] as? Bool == false)
        }
    }

    /// A field no listed extension encodes is not in the signed bytes: the page must not say it
    /// (a hidden tip once showed as "Tip 0 DOT", a Polkadot transfer as "On Westend").
    @Test func fieldsNoExtensionSignsAreNotShownAsPartOfTheTransaction() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("xena")
            let address = try await client.connectedPolkadotAccount(token: token)
            let bare = PolkadotBridgeTests.payload(address: address, extensions: ["CheckSpecVersion", "CheckTxVersion", "CheckWeight"])
            let shown = try await Self.shown(bare, client, token: token)
            let unsigned = "not part of what is signed"
            #expect(shown["tip"] as? String == unsigned && shown["nonce"] as? String == unsigned && shown["era"] as? String == unsigned)
            #expect(shown["genesisSigned"] as? Bool == false && shown["chain"] == nil && shown["summary"] == nil, "\(shown)")
            #expect(shown["notSigned"] as? [String] == ["genesis hash (the chain)", "era", "nonce", "tip"], "\(shown)")
            // The usual list signs them all.
            let full = try await Self.shown(PolkadotBridgeTests.payload(address: address), client, token: token)
            #expect(full["genesisSigned"] as? Bool == true && full["chain"] as? String == "Polkadot" && full["tip"] as? String != unsigned)
            #expect(full["notSigned"] as? [String] == [])
        }
    }

    @Test func rawMetadataMustBeV15OfTheStatedSpecVersion() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("walt")
            _ = try await client.connectedPolkadotAccount(token: token)
            for (name, value) in [("rawMetadata", "0x6d657461" as Any), ("rawMetadata", 7), ("specVersion", Self.specVersion + 1)] {
                var definition = Self.definition
                definition[name] = value
                let refused = try await client.call(
                    .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(metadata.provide)", definition),
                    headers: Client.bearer(token))
                #expect(refused.status == .badRequest && refused.error == "invalid_content", "\(name): \(refused.json)")
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
