import Foundation
import Testing

@testable import Polkadot

/// Calls decoded with real runtime metadata (Polkadot's v14, from polkadot-js's test data), against
/// what scalecodec (independent code) decodes from the same bytes.
@Suite struct CallDecoderTests {
    static let metadata: RuntimeMetadata = {
        let bytes = try! Data(contentsOf: PolkadotVectors.root.appendingPathComponent("polkadot_v14_metadata.scale"))
        return try! RuntimeMetadata([UInt8](bytes))
    }()
    static let decoder = CallDecoder(siteMetadata: metadata, ss58Prefix: SS58.polkadot, decimals: 10, token: "DOT")

    static func reference() throws -> [[String: Any]] {
        try PolkadotVectors.json("polkadot_v14_calls.json")["calls"] as! [[String: Any]]
    }

    @Test func theRegistryAndPalletsAreRead() {
        #expect(Self.metadata.version == 14)
        #expect(Self.metadata.types.count > 500)
        #expect(Self.metadata.callPallets[5]?.name == "Balances" && Self.metadata.callPallets[0]?.name == "System")
    }

    @Test func callsDecodeAsScalecodecDecodesThem() throws {
        let calls = try Self.reference()
        for entry in calls {
            let reference = entry["scalecodec"] as! [String: Any]
            let decoded = try Self.decoder.decode(hex(entry["call"] as! String))
            #expect(decoded.pallet == reference["call_module"] as? String)
            #expect(decoded.call == reference["call_function"] as? String)
            let names = (reference["call_args"] as! [[String: Any]]).map { $0["name"] as! String }
            #expect(decoded.arguments.map(\.name) == names)
        }
        let bob = SS58.encode(accountId: hex("8eaf04151687736326c9fea17e25fc5287613693c912909cb226aa4794f26a48"), prefix: 0)
        #expect(try Self.decoder.decode(hex(calls[0]["call"] as! String)).text == "Balances.transfer_keep_alive(dest: Id(\(bob)), value: 1 DOT)")
        #expect(try Self.decoder.decode(hex(calls[1]["call"] as! String)).text == "System.remark(remark: 0x68656c6c6f)")
        let eleven = SS58.encode(accountId: [UInt8](repeating: 0x11, count: 32), prefix: 0)
        #expect(
            try Self.decoder.decode(hex(calls[2]["call"] as! String)).text
                == "Utility.batch_all(calls: [System.remark(remark: 0x01), Balances.transfer_keep_alive(dest: Id(\(eleven)), value: 0.0000012345 DOT)])"
        )
        #expect(try Self.decoder.decode(hex(calls[3]["call"] as! String)).text == "Staking.bond_extra(max_additional: 2.5 DOT)")
    }

    @Test func commonCallsAreSaidInASentence() throws {
        let calls = try Self.reference()
        let summaries = try calls.map { try Self.decoder.decode(hex($0["call"] as! String)).summary }
        let bob = SS58.encode(accountId: hex("8eaf04151687736326c9fea17e25fc5287613693c912909cb226aa4794f26a48"), prefix: 0)
        #expect(
            summaries == [
                "Send 1 DOT to \(bob), keeping your account open", #"Write a remark on chain: "hello""#,
                "Make 2 calls in one transaction, all of them or none", "Add up to 2.5 DOT to your stake",
            ])
        // A call with no sentence of its own has no summary: the decoded call stands alone.
        let other = DecodedCall(pallet: "Democracy", call: "second", arguments: [.init(name: "proposal", value: "3")])
        #expect(other.summary == nil)
        // A remark that is not text stays hex.
        let binary = DecodedCall(pallet: "System", call: "remark", arguments: [.init(name: "remark", value: "0x00ff")])
        #expect(binary.summary == "Write a remark on chain: 0x00ff")
    }

    @Test func callsThatDoNotMatchTheMetadataAreRefused() throws {
        let transfer = hex(try Self.reference()[0]["call"] as! String)
        #expect(throws: PolkadotError.self) { try Self.decoder.decode(transfer + [0]) }  // a byte more than described
        #expect(throws: PolkadotError.self) { try Self.decoder.decode(Array(transfer.dropLast())) }
        #expect(throws: PolkadotError.self) { try Self.decoder.decode([0xfe, 0]) }  // no such pallet
        #expect(throws: PolkadotError.self) { try Self.decoder.decode([5, 0xee]) }  // no such call
        #expect(throws: PolkadotError.self) { try Self.decoder.decode([]) }
        // A list claiming four billion items in a few bytes: refused, nothing allocated for it.
        #expect(throws: PolkadotError.self) { try Self.decoder.decode([0x1a, 0x02, 0xff, 0xff, 0xff, 0xff, 0x00]) }
    }

    @Test func metadataOfAnyShapeIsRefusedNotTrappedOn() throws {
        let bytes = [UInt8](try Data(contentsOf: PolkadotVectors.root.appendingPathComponent("polkadot_v14_metadata.scale")))
        #expect(throws: PolkadotError.self) { try RuntimeMetadata(Array(bytes.prefix(1000))) }
        #expect(throws: PolkadotError.self) { try RuntimeMetadata(Array("meta".utf8) + [16]) }
        #expect(throws: PolkadotError.self) { try RuntimeMetadata([1, 2, 3]) }
        var corrupted = bytes
        for index in stride(from: 5, to: 4000, by: 37) {
            corrupted[index] ^= 0xa5
            _ = try? RuntimeMetadata(corrupted)
        }
    }
}
