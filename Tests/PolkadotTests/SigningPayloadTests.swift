import Foundation
import KeyfobCrypto
import Testing

@testable import Polkadot

/// Signing payloads byte for byte as polkadot-js builds them.
@Suite struct SigningPayloadTests {
    static var base: [String: Any] {
        [
            "address": "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY",
            "blockHash": "0xde8f69eeb5e065e18c6950ff708d7e551f68dc9bf59a07c52367c0280f805ec7",
            "blockNumber": "0x00231d30", "era": "0x0703",
            "genesisHash": "0x91b171bb158e2d3848fa23a9f1c25182fb8e20313b2c1eb49219da7a70ce90c3",
            "method": "0x0503008eaf04151687736326c9fea17e25fc5287613693c912909cb226aa4794f26a480700e40b5402",
            "nonce": "0x00000005",
            "signedExtensions": [
                "CheckNonZeroSender", "CheckSpecVersion", "CheckTxVersion", "CheckGenesis",
                "CheckMortality", "CheckNonce", "CheckWeight", "ChargeTransactionPayment", "PrevalidateAttests", "CheckMetadataHash",
            ],
            "specVersion": "0x000f4dfc", "tip": "0x00000000000000000000000000000000", "transactionVersion": "0x0000001a",
            "version": 4, "mode": 0,
        ]
    }

    @Test func polkadotJsEd25519ExtrinsicVectorVerifiesOverOurPayload() throws {
        let v = try PolkadotVectors.json("polkadot_js_extrinsic_v4_ed25519.json")
        let payload = try SignerPayload(json: v["signerPayload"] as! [String: Any])
        let signature = hex(v["signature"] as! String)
        let publicKey = hex(v["publicKey"] as! String)
        // Ed25519 is deterministic: the published signature verifies only over exactly these bytes,
        // and our key made from the published seed produces it again.
        #expect(SubstrateKey.verify(type: .ed25519, signature: signature, message: payload.signingBytes, publicKey: publicKey))
        let key = try SubstrateKey(type: .ed25519, seed: Array((v["seedUtf8"] as! String).utf8))
        #expect(key.publicKey == publicKey)
        #expect(key.sign(payload.signingBytes) == signature)
        #expect((v["signedExtrinsicHex"] as! String).contains(hexString([key.type.multiSignatureTag] + signature)))
    }

    @Test func fieldsLandInPolkadotJsOrder() throws {
        let payload = try SignerPayload(json: Self.base)
        let expected =
            "0503008eaf04151687736326c9fea17e25fc5287613693c912909cb226aa4794f26a480700e40b5402"  // method, no length
            + "0703" + "14" + "00" + "00"  // era (period 256, phase 48), compact nonce 5, compact tip 0, mode 0
            + "fc4d0f00" + "1a000000"  // spec and transaction versions, u32 LE
            + "91b171bb158e2d3848fa23a9f1c25182fb8e20313b2c1eb49219da7a70ce90c3"  // genesis
            + "de8f69eeb5e065e18c6950ff708d7e551f68dc9bf59a07c52367c0280f805ec7"  // block hash (mortal era)
            + "00"  // metadata hash: None
        #expect(hexString(payload.encoded) == expected)
        #expect(payload.signingBytes == payload.encoded)
        #expect(payload.era.period == 256 && payload.era.phase == 48)
    }

    @Test func largePayloadsAreSignedByTheirBlake2bHash() throws {
        var json = Self.base
        json["method"] = "0x" + String(repeating: "ab", count: 300)
        let payload = try SignerPayload(json: json)
        #expect(payload.encoded.count > 256)
        #expect(payload.signingBytes == blake2b256(payload.encoded))
    }

    @Test func assetTipsAndMetadataHashesAreOptions() throws {
        var json = Self.base
        json["signedExtensions"] = ["ChargeAssetTxPayment", "CheckMetadataHash"]
        json["assetId"] = "0x0100"
        json["mode"] = 1
        json["metadataHash"] = "0x" + String(repeating: "11", count: 32)
        json["tip"] = "0x00000000000000000000000000010000"
        let payload = try SignerPayload(json: json)
        let method = hex(json["method"] as! String)
        #expect(hexString(Array(payload.encoded.dropFirst(method.count))) == "02000400" + "010100" + "01" + "01" + String(repeating: "11", count: 32))
    }

    @Test func refusalsNameTheProblemAndSignNothing() {
        func refused(_ change: (inout [String: Any]) -> Void) -> PolkadotError.Kind? {
            var json = Self.base
            change(&json)
            do {
                _ = try SignerPayload(json: json)
                return nil
            } catch { return (error as? PolkadotError)?.kind }
        }
        #expect(refused { $0["signedExtensions"] = ["CheckNonce", "SomethingNew"] } == .unknownExtension)
        #expect(refused { $0["method"] = "0x05zz" } == .invalidPayload)
        #expect(refused { $0["method"] = "0503" } == .invalidPayload)
        #expect(refused { $0["genesisHash"] = "0x1234" } == .invalidPayload)
        #expect(refused { $0["era"] = "0x0000" } == .invalidPayload)
        #expect(refused { $0["nonce"] = "0x" + String(repeating: "ff", count: 9) } == .invalidPayload)
        #expect(refused { $0["address"] = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQZ" } == .invalidAddress)
        #expect(refused { $0["version"] = 5 } == .unsupported)
        #expect(refused { $0.removeValue(forKey: "blockHash") } == .invalidPayload)
        #expect(refused { $0["mode"] = 1 } == .invalidPayload)
        // A field of the wrong JSON type is refused as such, never read as a default.
        #expect(refused { $0["mode"] = "1" } == .mistyped)
        #expect(refused { $0["nonce"] = 5 } == .mistyped)
        #expect(refused { $0["assetId"] = 1984 } == .mistyped)
        #expect(refused { $0["metadataHash"] = [1, 2] } == .mistyped)
        #expect(refused { $0["signedExtensions"] = "CheckNonce" } == .mistyped)
        #expect(refused { $0["withSignedTransaction"] = "yes" } == .mistyped)
        #expect(refused { $0["signedExtensions"] = ["CheckNonce", "CheckNonce"] } == .invalidPayload)
    }

    /// What Keyfob stores is the payload it read: written back as polkadot-js writes it, it reads
    /// as the same payload (the same bytes are signed after the round trip).
    @Test func aPayloadRoundTripsThroughItsJSON() throws {
        let payload = try SignerPayload(json: Self.base)
        let again = try SignerPayload(payload.json)
        #expect(again == payload && again.signingBytes == payload.signingBytes)
        let checked = payload.checkingMetadataHash([UInt8](repeating: 7, count: 32))
        #expect(try SignerPayload(checked.json) == checked && checked.mode == 1)
    }

    @Test func rawBytesAreWrappedAsPolkadotJsWrapsThem() throws {
        let cases = try PolkadotVectors.json("wrap_bytes.json")["cases"] as! [[String: String]]
        for c in cases {
            #expect(RawPayload.wrap(Array(c["input"]!.utf8)) == Array(c["wrapped"]!.utf8), "\(c["name"]!)")
        }
    }

    @Test func compactIntegersMatchTheSCALESpec() {
        #expect(SCALE.compact(0) == [0x00])
        #expect(SCALE.compact(1) == [0x04])
        #expect(SCALE.compact(63) == [0xfc])
        #expect(SCALE.compact(64) == [0x01, 0x01])
        #expect(SCALE.compact(16383) == [0xfd, 0xff])
        #expect(SCALE.compact(16384) == [0x02, 0x00, 0x01, 0x00])
        #expect(SCALE.compact(1_073_741_823) == [0xfe, 0xff, 0xff, 0xff])
        #expect(SCALE.compact(1_073_741_824) == [0x03, 0x00, 0x00, 0x00, 0x40])
        #expect(SCALE.compact(littleEndian: [0, 0, 0, 0, 1]) == [0x07, 0, 0, 0, 0, 1])
        #expect(SCALE.compact(littleEndian: [UInt8](repeating: 0xff, count: 16)) == [0x33] + [UInt8](repeating: 0xff, count: 16))
    }
}
