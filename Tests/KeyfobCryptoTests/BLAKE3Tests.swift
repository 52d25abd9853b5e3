import Foundation
import KeyfobCrypto
import Testing

/// BLAKE3 against the BLAKE3 team's test-vector cases as PyPI's `blake3` (their Rust code) computes
/// them (`scripts/vectors/blake3_vectors.py`): every input length from empty through several
/// chunks and tree levels, all three modes, 131 bytes of extended output and its 32-byte prefix.
@Suite struct BLAKE3Tests {
    struct Vectors: Decodable {
        struct Case: Decodable {
            let input_len: Int
            let hash, keyed_hash, derive_key: String
        }
        let key, context_string: String
        let cases: [Case]
    }

    static let vectors: Vectors = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Vectors/blake3/blake3-vectors.json")
        return try! JSONDecoder().decode(Vectors.self, from: Data(contentsOf: url))
    }()

    static func input(_ length: Int) -> [UInt8] { (0..<length).map { UInt8($0 % 251) } }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test(arguments: vectors.cases.map(\.input_len))
    func everyModeMatchesAtEveryLength(_ length: Int) throws {
        let v = try #require(Self.vectors.cases.first { $0.input_len == length })
        let input = Self.input(length)
        let key = Array(Self.vectors.key.utf8)
        for (mode, expected, compute) in [
            ("hash", v.hash, { (n: Int) in BLAKE3.hash(input, count: n) }),
            ("keyed_hash", v.keyed_hash, { (n: Int) in BLAKE3.keyedHash(key: key, input, count: n) }),
            ("derive_key", v.derive_key, { (n: Int) in BLAKE3.deriveKey(context: Self.vectors.context_string, material: input, count: n) }),
        ] {
            #expect(Self.hex(compute(expected.count / 2)) == expected, "\(mode), \(length) bytes")
            #expect(Self.hex(compute(32)) == String(expected.prefix(64)), "\(mode), \(length) bytes, default length")
        }
    }

    /// Fed in pieces of every awkward size, the hasher gives what one call gives.
    @Test func incrementalInputGivesTheSameHash() {
        let input = Self.input(102_400)
        let whole = BLAKE3.hash(input)
        for piece in [1, 63, 64, 65, 1023, 1024, 1025, 4097] {
            var hasher = BLAKE3.Hasher()
            var offset = 0
            while offset < input.count {
                let end = min(offset + piece, input.count)
                hasher.update(Array(input[offset..<end]))
                offset = end
            }
            #expect(hasher.finalize() == whole, "pieces of \(piece)")
        }
    }
}
