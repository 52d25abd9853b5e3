/// BLAKE3 (the BLAKE3 team's specification, 2020): hash, keyed hash and key derivation, with
/// extended output. Written here because Debian 12 packages no C BLAKE3; what needs it is RFC-0078's
/// merkleized metadata digest, which hashes runtime metadata of a few hundred kilobytes, so this is
/// the portable one-chunk-at-a-time form, not a SIMD one. Checked against the team's published
/// vectors as PyPI's `blake3` computes them (`Tests/Vectors/blake3/`).
public enum BLAKE3 {
    /// 32 bytes of `input`'s hash (`count` for more: the output is extendable).
    public static func hash(_ input: [UInt8], count: Int = 32) -> [UInt8] {
        var hasher = Hasher()
        hasher.update(input)
        return hasher.finalize(count: count)
    }

    /// The keyed hash (a MAC) of `input` under a 32-byte key.
    public static func keyedHash(key: [UInt8], _ input: [UInt8], count: Int = 32) -> [UInt8] {
        var hasher = Hasher(key: key)
        hasher.update(input)
        return hasher.finalize(count: count)
    }

    /// A key derived from `material` for the purpose `context` names (a fixed, hard-coded string).
    public static func deriveKey(context: String, material: [UInt8], count: Int = 32) -> [UInt8] {
        var hasher = Hasher(deriveKeyContext: context)
        hasher.update(material)
        return hasher.finalize(count: count)
    }

    /// Incremental hashing: `update` as often as needed, then `finalize`.
    public struct Hasher: Sendable {
        private var chunk: ChunkState
        private let key: [UInt32]
        private let flags: UInt32
        /// Chaining values of completed subtrees, one per set bit of the chunk count.
        private var stack: [[UInt32]] = []

        public init() { self.init(keyWords: iv, flags: 0) }

        public init(key: [UInt8]) {
            precondition(key.count == 32, "a BLAKE3 key is 32 bytes")
            self.init(keyWords: words(key, count: 8), flags: Flag.keyedHash)
        }

        public init(deriveKeyContext context: String) {
            var contextHasher = Hasher(keyWords: iv, flags: Flag.deriveKeyContext)
            contextHasher.update(Array(context.utf8))
            self.init(keyWords: words(contextHasher.finalize(count: 32), count: 8), flags: Flag.deriveKeyMaterial)
        }

        private init(keyWords: [UInt32], flags: UInt32) {
            key = keyWords
            self.flags = flags
            chunk = ChunkState(key: keyWords, counter: 0, flags: flags)
        }

        public mutating func update(_ input: [UInt8]) {
            var offset = 0
            while offset < input.count {
                if chunk.length == chunkLength {
                    // A full chunk, and more input: the chunk is done (only the last one can be the root).
                    let total = chunk.counter + 1
                    push(chunk.output().chainingValue, totalChunks: total)
                    chunk = ChunkState(key: key, counter: total, flags: flags)
                }
                let take = min(chunkLength - chunk.length, input.count - offset)
                chunk.update(input[offset..<(offset + take)])
                offset += take
            }
        }

        /// `count` bytes of output (32 is the hash; more extend it).
        public func finalize(count: Int = 32) -> [UInt8] {
            var output = chunk.output()
            for cv in stack.reversed() {
                output = Output.parent(left: cv, right: output.chainingValue, key: key, flags: flags)
            }
            return output.rootBytes(count: count)
        }

        /// Merges completed subtrees while the chunk count is even at that level (its trailing zeros).
        private mutating func push(_ chainingValue: [UInt32], totalChunks: UInt64) {
            var cv = chainingValue
            var total = totalChunks
            while total & 1 == 0 {
                cv = Output.parent(left: stack.removeLast(), right: cv, key: key, flags: flags).chainingValue
                total >>= 1
            }
            stack.append(cv)
        }
    }

    // MARK: - The compression function and the tree

    enum Flag {
        static let chunkStart: UInt32 = 1
        static let chunkEnd: UInt32 = 2
        static let parent: UInt32 = 4
        static let root: UInt32 = 8
        static let keyedHash: UInt32 = 16
        static let deriveKeyContext: UInt32 = 32
        static let deriveKeyMaterial: UInt32 = 64
    }

    static let iv: [UInt32] = [0x6A09_E667, 0xBB67_AE85, 0x3C6E_F372, 0xA54F_F53A, 0x510E_527F, 0x9B05_688C, 0x1F83_D9AB, 0x5BE0_CD19]
    static let permutation = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8]
    static let blockLength = 64
    static let chunkLength = 1024

    @inline(__always)
    static func g(_ s: inout [UInt32], _ a: Int, _ b: Int, _ c: Int, _ d: Int, _ x: UInt32, _ y: UInt32) {
        s[a] = s[a] &+ s[b] &+ x
        s[d] = rotate(s[d] ^ s[a], 16)
        s[c] = s[c] &+ s[d]
        s[b] = rotate(s[b] ^ s[c], 12)
        s[a] = s[a] &+ s[b] &+ y
        s[d] = rotate(s[d] ^ s[a], 8)
        s[c] = s[c] &+ s[d]
        s[b] = rotate(s[b] ^ s[c], 7)
    }

    @inline(__always)
    static func rotate(_ value: UInt32, _ bits: UInt32) -> UInt32 { (value >> bits) | (value << (32 - bits)) }

    /// The 16-word state after seven rounds, fed forward (the first 8 words are a chaining value;
    /// all 16 are a root output block).
    static func compress(_ cv: [UInt32], _ block: [UInt32], counter: UInt64, length: UInt32, flags: UInt32) -> [UInt32] {
        var s = cv + [iv[0], iv[1], iv[2], iv[3], UInt32(truncatingIfNeeded: counter), UInt32(truncatingIfNeeded: counter >> 32), length, flags]
        var m = block
        for round in 0..<7 {
            g(&s, 0, 4, 8, 12, m[0], m[1])
            g(&s, 1, 5, 9, 13, m[2], m[3])
            g(&s, 2, 6, 10, 14, m[4], m[5])
            g(&s, 3, 7, 11, 15, m[6], m[7])
            g(&s, 0, 5, 10, 15, m[8], m[9])
            g(&s, 1, 6, 11, 12, m[10], m[11])
            g(&s, 2, 7, 8, 13, m[12], m[13])
            g(&s, 3, 4, 9, 14, m[14], m[15])
            if round < 6 { m = permutation.map { m[$0] } }
        }
        for i in 0..<8 {
            s[i] ^= s[i + 8]
            s[i + 8] ^= cv[i]
        }
        return s
    }

    /// What a node hashes to before its role is known: a chaining value, or (at the root) output.
    struct Output {
        let cv: [UInt32]
        let block: [UInt32]
        let counter: UInt64
        let length: UInt32
        let flags: UInt32

        var chainingValue: [UInt32] { Array(compress(cv, block, counter: counter, length: length, flags: flags).prefix(8)) }

        static func parent(left: [UInt32], right: [UInt32], key: [UInt32], flags: UInt32) -> Output {
            Output(cv: key, block: left + right, counter: 0, length: UInt32(blockLength), flags: Flag.parent | flags)
        }

        /// The root's output: each 64-byte block compressed with its own counter.
        func rootBytes(count: Int) -> [UInt8] {
            var out: [UInt8] = []
            out.reserveCapacity(count)
            var blockCounter: UInt64 = 0
            while out.count < count {
                for word in compress(cv, block, counter: blockCounter, length: length, flags: flags | Flag.root) {
                    for shift in stride(from: 0, to: 32, by: 8) where out.count < count {
                        out.append(UInt8(truncatingIfNeeded: word >> UInt32(shift)))
                    }
                }
                blockCounter += 1
            }
            return out
        }
    }

    /// One 1 KiB chunk being hashed, 64-byte block by block.
    struct ChunkState: Sendable {
        var cv: [UInt32]
        let counter: UInt64
        let flags: UInt32
        var block = [UInt8](repeating: 0, count: blockLength)
        var blockUsed = 0
        var blocksCompressed = 0

        init(key: [UInt32], counter: UInt64, flags: UInt32) {
            cv = key
            self.counter = counter
            self.flags = flags
        }

        var length: Int { blocksCompressed * blockLength + blockUsed }
        private var startFlag: UInt32 { blocksCompressed == 0 ? Flag.chunkStart : 0 }

        mutating func update(_ input: ArraySlice<UInt8>) {
            var rest = input
            while !rest.isEmpty {
                if blockUsed == blockLength {
                    // Full, and more follows: this block is not the chunk's last.
                    cv = Array(
                        compress(cv, words(block, count: 16), counter: counter, length: UInt32(blockLength), flags: flags | startFlag).prefix(8))
                    blocksCompressed += 1
                    block = [UInt8](repeating: 0, count: blockLength)
                    blockUsed = 0
                }
                let take = min(blockLength - blockUsed, rest.count)
                block.replaceSubrange(blockUsed..<(blockUsed + take), with: rest.prefix(take))
                blockUsed += take
                rest = rest.dropFirst(take)
            }
        }

        func output() -> Output {
            Output(
                cv: cv, block: words(block, count: 16), counter: counter, length: UInt32(blockUsed),
                flags: flags | startFlag | Flag.chunkEnd)
        }
    }
}

/// Little-endian words of `bytes` (zero-padded to `count` words).
private func words(_ bytes: [UInt8], count: Int) -> [UInt32] {
    (0..<count).map { i in
        var word: UInt32 = 0
        for j in 0..<4 where 4 * i + j < bytes.count { word |= UInt32(bytes[4 * i + j]) << UInt32(8 * j) }
        return word
    }
}
