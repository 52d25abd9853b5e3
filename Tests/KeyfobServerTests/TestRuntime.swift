import Foundation
import Polkadot
import Testing
import WebAuthnTestSupport

@testable import KeyfobServer

/// A small V15 runtime named "polkadot" (spec 1003004) on Polkadot's genesis: `System.remark` and
/// `Balances.transfer_keep_alive`, `MultiAddress` and `MultiSignature` as Polkadot has them, the
/// `System.Version` constant, and Polkadot's signed extensions with their real types (an era, a
/// compact nonce and tip, `CheckMetadataHash`'s mode and optional hash). Real runtimes are a
/// megabyte; this one is built byte by byte from frame-metadata's V15 layout, so each test can say
/// what it holds. `Tests/Vectors/polkadot/keyfob_test_runtime_v15.scale` is these bytes, for the
/// browser tests (scalecodec reads it); `theVectorFileIsThisRuntime` keeps the two equal.
enum TestRuntime {
    static func c(_ n: Int) -> [UInt8] { SCALE.compact(UInt64(n)) }
    static func text(_ s: String) -> [UInt8] { c(s.utf8.count) + Array(s.utf8) }

    static let genesis = "0x91b171bb158e2d3848fa23a9f1c25182fb8e20313b2c1eb49219da7a70ce90c3"
    static let specVersion = 1_003_004
    static let extensions = KnownChains.polkadotRelay

    static let metadata = metadata(extensions: extensions)

    /// What an attacker's variant of the runtime changes (#54); the defaults are the runtime itself.
    struct Variant {
        /// The pallet list's call type for Balances (the RFC-0078 hash does not cover the pallet list).
        var balancesCalls = 10
        /// Balances' name in the pallet list.
        var balancesName = "Balances"
        /// Balances' call enum starts with a `remark` of index 3, the transfer's own index.
        var duplicateTransferIndex = false
        /// Adds `Utility.batch` (0) and `batch_all` (2) over `Vec<RuntimeCall>`,
        /// `ChargeAssetTxPayment`'s `{ tip, asset_id: Option<u32> }` and Polkadot's
        /// `MultiAddress::Index(Compact<()>)` (types 20–24).
        var extended = false
    }

    /// The runtime with another extension list (a chain Keyfob does not know, say), or an attacker's variant.
    static func metadata(extensions: [String], _ change: Variant = Variant()) -> [UInt8] {
        func type(_ id: Int, path: [String] = [], _ definition: [UInt8]) -> [UInt8] {
            c(id) + c(path.count) + path.flatMap(text) + [0] + definition + [0]
        }
        func field(_ name: String?, _ type: Int, _ typeName: String? = nil) -> [UInt8] {
            (name.map { [1] + text($0) } ?? [0]) + c(type) + (typeName.map { [1] + text($0) } ?? [0]) + [0]
        }
        func variant(_ name: String, _ index: UInt8, _ fields: [UInt8]...) -> [UInt8] {
            text(name) + c(fields.count) + fields.flatMap { $0 } + [index] + [0]
        }
        func variants(_ list: [UInt8]...) -> [UInt8] { [1] + c(list.count) + list.flatMap { $0 } }
        let types =
            [
                type(0, [5, 3]),  // u8
                type(1, [5, 5]),  // u32
                type(2, [6] + c(1)),  // Compact<u32>
                type(3, [4, 0]),  // ()
                type(4, [3] + SCALE.littleEndian(32, width: 4) + c(0)),  // [u8; 32]
                type(5, path: ["sp_core", "crypto", "AccountId32"], [0] + c(1) + field(nil, 4)),
                type(6, path: ["frame_system", "pallet", "Call"], variants(variant("remark", 0, field("remark", 7)))),
                type(7, [2] + c(0)),  // Vec<u8>
                type(
                    8, path: ["polkadot_runtime", "RuntimeCall"],
                    change.extended
                        ? variants(
                            variant("System", 0, field(nil, 6)), variant("Balances", 5, field(nil, 10)), variant("Utility", 26, field(nil, 21)))
                        : variants(variant("System", 0, field(nil, 6)), variant("Balances", 5, field(nil, 10)))),
                type(9, [5, 7]),  // u128
                type(
                    10, path: ["pallet_balances", "pallet", "Call"],
                    change.duplicateTransferIndex
                        ? variants(
                            variant("remark", 3, field("remark", 7)),
                            variant("transfer_keep_alive", 3, field("dest", 11, "AccountIdLookupOf<T>"), field("value", 12, "T::Balance")))
                        : variants(variant("transfer_keep_alive", 3, field("dest", 11, "AccountIdLookupOf<T>"), field("value", 12, "T::Balance")))),
                type(
                    11, path: ["sp_runtime", "multiaddress", "MultiAddress"],
                    change.extended
                        ? variants(variant("Id", 0, field(nil, 5)), variant("Index", 1, field(nil, 24)), variant("Raw", 2, field(nil, 7)))
                        : variants(variant("Id", 0, field(nil, 5)), variant("Raw", 2, field(nil, 7)))),
                type(12, [6] + c(9)),  // Compact<u128>
                type(13, [3] + SCALE.littleEndian(64, width: 4) + c(0)),  // [u8; 64]
                type(14, [3] + SCALE.littleEndian(65, width: 4) + c(0)),  // [u8; 65]
                type(
                    15, path: ["sp_runtime", "MultiSignature"],
                    variants(variant("Ed25519", 0, field(nil, 13)), variant("Sr25519", 1, field(nil, 13)), variant("Ecdsa", 2, field(nil, 14)))),
                // An era: immortal, or mortal as two bytes (frame's `Era` has 255 mortal variants; two say the same here).
                type(
                    16, path: ["sp_runtime", "generic", "era", "Era"],
                    variants(variant("Immortal", 0), variant("Mortal7", 7, field(nil, 0)))),
                type(17, path: ["frame_metadata_hash_extension", "Mode"], variants(variant("Disabled", 0), variant("Enabled", 1))),
                type(
                    18, path: ["Option"],
                    variants(variant("None", 0), variant("Some", 1, field(nil, 4)))),
                type(19, [4] + c(0)),  // () again, the extensions' tuple
            ]
            + (change.extended
                ? [
                    type(20, [2] + c(8)),  // Vec<RuntimeCall>
                    type(
                        21, path: ["pallet_utility", "pallet", "Call"],
                        variants(variant("batch", 0, field("calls", 20)), variant("batch_all", 2, field("calls", 20)))),
                    type(22, path: ["Option"], variants(variant("None", 0), variant("Some", 1, field(nil, 1)))),  // Option<u32>
                    type(
                        23, path: ["pallet_asset_tx_payment", "ChargeAssetTxPayment"],
                        [0] + c(2) + field("tip", 12, "BalanceOf<T>") + field("asset_id", 22, "Option<T::AssetId>")),
                    type(24, [6] + c(3)),  // Compact<()>: zero bytes, as Polkadot's MultiAddress::Index holds it
                ] : [])
        let version =
            text("polkadot") + text("parity-polkadot") + SCALE.littleEndian(0, width: 4)
            + SCALE.littleEndian(UInt64(specVersion), width: 4) + SCALE.littleEndian(0, width: 4) + c(0)
            + SCALE.littleEndian(26, width: 4) + [1]
        let system =
            text("System") + [0] + [1] + c(6) + [0] + c(1) + text("Version") + c(3) + c(version.count) + version + [0] + [0] + [0] + [0]
        let balances = text(change.balancesName) + [0] + [1] + c(change.balancesCalls) + [0] + c(0) + [0] + [5] + [0]
        // Each extension: what it adds to the transaction, and to the signed data only.
        let extensionTypes: [String: (Int, Int)] = [
            "CheckSpecVersion": (3, 1), "CheckTxVersion": (3, 1), "CheckGenesis": (3, 4), "CheckMortality": (16, 4),
            "CheckNonce": (2, 3), "ChargeTransactionPayment": (12, 3), "CheckMetadataHash": (17, 18), "ChargeAssetTxPayment": (23, 3),
        ]
        let extrinsic =
            [4] + c(11) + c(8) + c(15) + c(19) + c(extensions.count)
            + extensions.flatMap { name in
                let (extra, additional) = extensionTypes[name] ?? (3, 3)
                return text(name) + c(extra) + c(additional)
            }
        // Then the runtime type, no runtime APIs, the outer enums and no custom values.
        let tail = c(8) + c(0) + c(8) + c(3) + c(3) + c(0)
        return Array("meta".utf8) + [15] + c(types.count) + types.flatMap { $0 } + c(2) + system + balances + extrinsic + tail
    }

    /// The `MetadataDef` a dapp sends for this runtime (`pub(metadata.provide)`).
    static func definition(metadata: [UInt8] = metadata, genesis: String = genesis) -> [String: Any] {
        [
            "chain": "Polkadot", "genesisHash": genesis, "specVersion": specVersion, "ss58Format": 0, "tokenDecimals": 10,
            "tokenSymbol": "DOT", "rawMetadata": PolkadotHex.encode(metadata),
        ]
    }

    static var definition: [String: Any] { definition() }

    /// The RFC-0078 hash of `metadata` with the definition's prefix, decimals and token.
    static func hash(of metadata: [UInt8] = metadata) -> [UInt8] {
        let extra = MerkleizedMetadata.ExtraInfo(
            specVersion: UInt32(specVersion), specName: "polkadot", base58Prefix: 0, decimals: 10, tokenSymbol: "DOT")
        return try! MerkleizedMetadata.hash(try! RuntimeMetadata(metadata), extra)
    }

    static var hash: [UInt8] { hash() }

    /// Polkadot's 1 DOT `transfer_keep_alive` to 14E5nqKA… (the browser tests' call).
    static let transfer = "0x0503008eaf04151687736326c9fea17e25fc5287613693c912909cb226aa4794f26a480700e40b5402"

    /// A payload for this runtime: `method` with Polkadot's extensions, mode 0 unless a hash is given.
    static func payload(
        address: String, method: String = transfer, hash: [UInt8]? = nil, extensions: [String] = extensions,
        specVersion: Int = specVersion, genesis: String = genesis
    ) -> [String: Any] {
        var payload = PolkadotBridgeTests.payload(address: address, extensions: extensions)
        payload["genesisHash"] = genesis
        payload["method"] = method
        payload["specVersion"] = PolkadotHex.encode(Array(SCALE.littleEndian(UInt64(specVersion), width: 4).reversed()))
        if let hash {
            payload["mode"] = 1
            payload["metadataHash"] = PolkadotHex.encode(hash)
        } else {
            payload["mode"] = 0
        }
        return payload
    }
}

extension Client {
    /// The test dapp provides `TestRuntime` (V15 metadata with Polkadot's extensions) for Polkadot.
    func provideTestRuntime(token: String, definition: [String: Any] = TestRuntime.definition) async throws {
        let provided = try await call(
            .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(metadata.provide)", definition),
            headers: Client.bearer(token))
        #expect(provided["result"] as? Bool == true, "\(provided.json)")
    }

    /// Lets the account sign transactions Keyfob cannot check (confirmed with the passkey).
    func acceptUnverified(_ accountID: String, _ accepts: Bool = true, token: String, by authenticator: inout SoftwareAuthenticator)
        async throws -> Reply
    {
        let body = try await confirmed(
            ["acceptUnverified": accepts], "polkadot.accept_unverified", target: accountID, by: &authenticator, token: token)
        return try await call(.post, "/api/polkadot/accounts/\(accountID)/settings", json: body, headers: Client.bearer(token))
    }
}

@Suite struct TestRuntimeTests {
    @Test func theVectorFileIsThisRuntime() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Vectors/polkadot/keyfob_test_runtime_v15.scale")
        if ProcessInfo.processInfo.environment["KEYFOB_UPDATE_VECTORS"] == "1" {
            try Data(TestRuntime.metadata).write(to: url)
        }
        #expect([UInt8](try Data(contentsOf: url)) == TestRuntime.metadata, "KEYFOB_UPDATE_VECTORS=1 swift test --filter TestRuntimeTests")
        let metadata = try RuntimeMetadata(TestRuntime.metadata)
        #expect(metadata.runtimeVersion?.specName == "polkadot" && metadata.extrinsic?.signedExtensions.count == 10)
    }
}
