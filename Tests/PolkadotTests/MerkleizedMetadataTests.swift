import Foundation
import KeyfobCrypto
import Testing

@testable import Polkadot

/// RFC-0078's metadata hash. These tests build a small V15 metadata and derive what the RFC says
/// its leaves, tree and digest are, byte by byte, independently of `MerkleizedMetadata`'s own
/// encoder. (The published digests of the `merkleized-metadata` crate's six chain fixtures were
/// matched locally, fixtures outside the repository: see the #42 note; they belong in
/// `Tests/Vectors/polkadot/` once the steering folder carries them.)
@Suite struct MerkleizedMetadataTests {
    static func h(_ bytes: [UInt8]) -> [UInt8] { BLAKE3.hash(bytes) }
    static func text(_ s: String) -> [UInt8] { c(s.utf8.count) + Array(s.utf8) }
    /// SCALE's compact integer: every length and the leaves' ids.
    static func c(_ n: Int) -> [UInt8] { SCALE.compact(UInt64(n)) }

    /// The tree: the last two of the queue become a node put at the front, until one is left.
    @Test func theTreeJoinsTheLastTwoAndPutsTheNodeInFront() {
        let leaves = (0..<5).map { Self.h([UInt8($0)]) }
        let (a, b, c, d, e) = (leaves[0], leaves[1], leaves[2], leaves[3], leaves[4])
        #expect(MerkleizedMetadata.merkleRoot([]) == [UInt8](repeating: 0, count: 32))
        #expect(MerkleizedMetadata.merkleRoot([a]) == a)
        #expect(MerkleizedMetadata.merkleRoot([a, b]) == Self.h(a + b))
        #expect(MerkleizedMetadata.merkleRoot([a, b, c]) == Self.h(Self.h(b + c) + a))
        let n1 = Self.h(d + e)
        let n2 = Self.h(b + c)
        let n3 = Self.h(n1 + a)
        #expect(MerkleizedMetadata.merkleRoot([a, b, c, d, e]) == Self.h(n3 + n2))
    }

    /// A V15 metadata: type 0 u8; 1 `Compact<u32>`; 2 u32; 3 `T { a: u8 }`; 4 the call enum
    /// `Call { x(T) = 1, y = 0 }`; 5 `()`; 6 `[u8; 32]` (unreachable); extrinsic v4, address and
    /// signature `T`, one extension `CheckNonce` with extra `Compact<u32>` and implicit `()`.
    static let registryAndPallets: [UInt8] = {
        func type(_ id: Int, path: [String], _ definition: [UInt8]) -> [UInt8] {
            SCALE.compact(UInt64(id)) + SCALE.compact(UInt64(path.count)) + path.flatMap(text) + [0] + definition + [0]
        }
        func field(_ name: String?, _ type: Int, _ typeName: String?) -> [UInt8] {
            (name.map { [1] + text($0) } ?? [0]) + SCALE.compact(UInt64(type)) + (typeName.map { [1] + text($0) } ?? [0]) + [0]
        }
        let types: [[UInt8]] = [
            type(0, path: [], [5, 3]),
            type(1, path: [], [6] + SCALE.compact(2)),
            type(2, path: [], [5, 5]),
            type(3, path: ["m", "T"], [0] + c(1) + field("a", 0, "u8")),
            type(4, path: ["m", "Call"], [1] + c(2) + text("x") + c(1) + field(nil, 3, "T") + [1, 0] + text("y") + [0, 0, 0]),
            type(5, path: [], [4, 0]),
            type(6, path: [], [3] + SCALE.littleEndian(32, width: 4) + SCALE.compact(0)),
        ]
        return Array("meta".utf8) + [15] + c(types.count) + types.flatMap { $0 } + [0]  // no pallets
    }()

    /// Version 4, address 3, call 4, signature 3, extra 5; [CheckNonce: extra 1, implicit 5].
    static let extrinsic: [UInt8] = [4] + c(3) + c(4) + c(3) + c(5) + c(1) + text("CheckNonce") + c(1) + c(5)

    /// What V15 holds after the extrinsic: the runtime type, no runtime APIs, the outer enums, no custom values.
    static let tail: [UInt8] = c(4) + c(0) + c(4) + c(4) + c(4) + c(0)

    static let metadata = registryAndPallets + extrinsic + tail

    @Test func aSmallMetadatasDigestIsWhatTheRFCSays() throws {
        let metadata = try RuntimeMetadata(Self.metadata)
        #expect(metadata.extrinsic?.signedExtensions.map(\.identifier) == ["CheckNonce"])
        let extra = MerkleizedMetadata.ExtraInfo(specVersion: 7, specName: "test", base58Prefix: 42, decimals: 12, tokenSymbol: "UNIT")
        // Reachable leaves, renumbered by registry id: T (3) → 0, Call (4) → 1 (one leaf a variant,
        // by variant index). u8, Compact<u32>, u32 and () are folded into references; [u8; 32] is
        // not reachable.
        let fieldA: [UInt8] = [1] + Self.text("a") + [3] + [1] + Self.text("u8")  // name, TypeRef::U8, type name
        let path = { (last: String) in Self.c(2) + Self.text("m") + Self.text(last) }
        let leafT = path("T") + [0] + Self.c(1) + fieldA + Self.c(0)  // Composite, one field; type id 0
        let fieldT: [UInt8] = [0] + [22] + Self.c(0) + [1] + Self.text("T")  // TypeRef::ById(0)
        let leafY = path("Call") + [1] + Self.text("y") + Self.c(0) + Self.c(0) + Self.c(1)  // Enumeration; index 0; type id 1
        let leafX = path("Call") + [1] + Self.text("x") + Self.c(1) + fieldT + Self.c(1) + Self.c(1)
        let root = MerkleizedMetadata.merkleRoot([leafT, leafY, leafX].map(Self.h))
        // Extrinsic: version, address ById(0), call ById(1), signature ById(0), [CheckNonce: CompactU32, Void].
        let described: [UInt8] = [4, 22] + Self.c(0) + [22] + Self.c(1) + [22] + Self.c(0) + Self.c(1) + Self.text("CheckNonce") + [17, 21]
        let digest =
            [1] + root + Self.h(described) + SCALE.littleEndian(7, width: 4) + Self.text("test")
            + SCALE.littleEndian(42, width: 2) + [12] + Self.text("UNIT")
        #expect(try MerkleizedMetadata.hash(metadata, extra) == Self.h(digest))
        // Every field of the extra information is part of it.
        var other = extra
        other.specVersion = 8
        #expect(try MerkleizedMetadata.hash(metadata, other) != Self.h(digest))
    }

    /// Many compacts over one long chain of structs: every reference walks the chain, which would
    /// be quadratic; the walks share a bound, so such metadata is refused at once.
    @Test func deepTypesUnderManyCompactsAreRefusedNotWalkedQuadratically() throws {
        let (chain, compacts) = (1000, 200)
        func type(_ id: Int, _ definition: [UInt8]) -> [UInt8] { Self.c(id) + [0, 0] + definition + [0] }
        func field(_ type: Int) -> [UInt8] { [0] + Self.c(type) + [0, 0] }
        var types: [[UInt8]] = [type(0, [5, 3])]  // u8
        for id in 1...chain { types.append(type(id, [0] + Self.c(1) + field(id == chain ? 0 : id + 1))) }
        for id in (chain + 1)...(chain + compacts) { types.append(type(id, [6] + Self.c(1))) }
        let call = chain + compacts + 1
        // The call: a struct with one field per compact.
        let fields: [UInt8] = (0..<compacts).flatMap { field(chain + 1 + $0) }
        types.append(type(call, [0] + Self.c(compacts) + fields))
        let bytes =
            Array("meta".utf8) + [15] + Self.c(types.count) + types.flatMap { $0 } + [0]
            + [4] + Self.c(0) + Self.c(call) + Self.c(0) + Self.c(0) + Self.c(0) + Self.tail
        let metadata = try RuntimeMetadata(bytes)
        let extra = MerkleizedMetadata.ExtraInfo(specVersion: 1, specName: "x", base58Prefix: 0, decimals: 10, tokenSymbol: "DOT")
        let started = Date()
        #expect(throws: PolkadotError.self) { try MerkleizedMetadata.hash(metadata, extra) }
        #expect(Date().timeIntervalSince(started) < 10)
    }

    /// The review's exponential walk: a zero-sized extension after `CheckMetadataHash` made of 40
    /// levels of `T{a: T', b: T'}` (2^40 paths) is known zero-sized at once, each type looked at once.
    @Test func zeroSizedTypesAreFoundWithoutWalkingEveryPath() throws {
        func type(_ id: Int, _ definition: [UInt8]) -> [UInt8] { Self.c(id) + [0, 0] + definition + [0] }
        func field(_ type: Int) -> [UInt8] { [0] + Self.c(type) + [0, 0] }
        var types: [[UInt8]] = [type(0, [4, 0])]  // ()
        for id in 1...40 { types.append(type(id, [0] + Self.c(2) + field(id - 1) + field(id - 1))) }
        types.append(type(41, [5, 3]))  // u8
        let extensions =
            Self.c(2) + Self.text("CheckMetadataHash") + Self.c(41) + Self.c(41) + Self.text("StorageWeightReclaim") + Self.c(40) + Self.c(0)
        let bytes =
            Array("meta".utf8) + [15] + Self.c(types.count) + types.flatMap { $0 } + [0]
            + [4] + Self.c(41) + Self.c(41) + Self.c(41) + Self.c(0) + extensions + Self.tail
        let started = Date()
        let registry = try HashedRegistry(try RuntimeMetadata(bytes))
        #expect(registry.pinsMetadataHashLast)
        #expect(Date().timeIntervalSince(started) < 5)
    }

    /// Names are short in real metadata; one of megabytes (repeated on every mention) is refused.
    @Test func longNamesAreRefused() throws {
        var bytes = Self.metadata
        let at = try #require(bytes.firstRange(of: Self.text("Call")))
        bytes.replaceSubrange(at, with: Self.text(String(repeating: "x", count: 513)))
        #expect(throws: PolkadotError.self) { try RuntimeMetadata(bytes) }
    }

    /// Compact integers have one form: a small value in a longer mode is refused, as parity-scale-codec refuses it.
    @Test func compactIntegersMustBeCanonical() throws {
        var zero = ScaleReader([0b01, 0])  // 0 in the two-byte mode
        #expect(throws: PolkadotError.self) { try zero.compactBytes() }
        var ok = ScaleReader([0x01, 0x01])  // 64 in the two-byte mode
        #expect(try ok.compactBytes() == [64, 0])
        var big = ScaleReader([0b11, 0xff, 0xff, 0xff, 0x00])  // 2^24 - 1 in the big-integer mode
        #expect(throws: PolkadotError.self) { try big.compactBytes() }
    }

    @Test func v14AndCallsOnlyMetadataHaveNoDigest() throws {
        var v14 = Self.metadata
        v14[4] = 14
        let extra = MerkleizedMetadata.ExtraInfo(specVersion: 1, specName: "x", base58Prefix: 0, decimals: 10, tokenSymbol: "DOT")
        #expect(throws: PolkadotError.self) { try MerkleizedMetadata.hash(try RuntimeMetadata(v14), extra) }
        // Cut after the pallets: V14 (calls only) reads with no extrinsic description and has nothing
        // to hash; V15 must be whole, and so must not end early or carry bytes after the runtime.
        var callsOnly = Self.registryAndPallets
        callsOnly[4] = 14
        #expect(try RuntimeMetadata(callsOnly).extrinsic == nil)
        #expect(throws: PolkadotError.self) { try MerkleizedMetadata.hash(try RuntimeMetadata(callsOnly), extra) }
        #expect(throws: PolkadotError.self) { try RuntimeMetadata(Self.registryAndPallets) }
        #expect(throws: PolkadotError.self) { try RuntimeMetadata(Self.metadata + [0]) }
    }
}

/// The six published digests of the `merkleized-metadata` crate (RFC-0078's reference
/// implementation), from its chain fixtures. The fixtures may not be copied into this repository:
/// they are read from the steering folder beside it (`shared/vectors/polkadot/`), or from
/// `KEYFOB_RFC0078_FIXTURES`; without them the test says so in one line and is skipped.
@Suite struct PublishedDigestTests {
    static let folder: URL? = {
        if let path = ProcessInfo.processInfo.environment["KEYFOB_RFC0078_FIXTURES"] { return URL(fileURLWithPath: path) }
        let project = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let beside = project.deletingLastPathComponent().appendingPathComponent("shared").appendingPathComponent("vectors")
            .appendingPathComponent("polkadot")
        return FileManager.default.fileExists(atPath: beside.appendingPathComponent("digests.json").path) ? beside : nil
    }()

    @Test(.enabled(if: folder != nil, "RFC-0078 fixtures absent (shared/vectors/polkadot beside the repository): skipped"))
    func theSixPublishedDigestsMatch() throws {
        let folder = try #require(Self.folder)
        let published = try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent("digests.json"))) as! [String: Any]
        let info = published["extra_info"] as! [String: Any]
        let extra = MerkleizedMetadata.ExtraInfo(
            specVersion: UInt32(info["spec_version"] as! Int), specName: info["spec_name"] as! String,
            base58Prefix: UInt16(info["base58_prefix"] as! Int), decimals: UInt8(info["decimals"] as! Int),
            tokenSymbol: info["token_symbol"] as! String)
        let fixtures = published["fixtures"] as! [String: String]
        #expect(fixtures.count == 6)
        for (name, digest) in fixtures.sorted(by: { $0.key < $1.key }) {
            let text = try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            // The fixture is the node's `Option<Vec<u8>>` form: read as a dapp would send it.
            let metadata = try RuntimeMetadata(hex(text))
            #expect(try hexString(MerkleizedMetadata.hash(metadata, extra)) == String(digest.dropFirst(2)), "\(name)")
        }
    }
}
