/// The Keccak-f[1600] permutation, the one primitive STROBE (and so Merlin and sr25519) needs that no
/// installed library exposes: OpenSSL and libsodium offer only finished SHA-3/SHAKE hashes over it.
/// Checked against OpenSSL's SHA3-256 in the tests.
enum Keccak {
    private static let roundConstants: [UInt64] = [
        0x0000_0000_0000_0001, 0x0000_0000_0000_8082, 0x8000_0000_0000_808A, 0x8000_0000_8000_8000,
        0x0000_0000_0000_808B, 0x0000_0000_8000_0001, 0x8000_0000_8000_8081, 0x8000_0000_0000_8009,
        0x0000_0000_0000_008A, 0x0000_0000_0000_0088, 0x0000_0000_8000_8009, 0x0000_0000_8000_000A,
        0x0000_0000_8000_808B, 0x8000_0000_0000_008B, 0x8000_0000_0000_8089, 0x8000_0000_0000_8003,
        0x8000_0000_0000_8002, 0x8000_0000_0000_0080, 0x0000_0000_0000_800A, 0x8000_0000_8000_000A,
        0x8000_0000_8000_8081, 0x8000_0000_0000_8080, 0x0000_0000_8000_0001, 0x8000_0000_8000_8008,
    ]
    /// ρ rotation offsets, in the order π visits the lanes.
    private static let rotations: [UInt64] = [
        1, 3, 6, 10, 15, 21, 28, 36, 45, 55, 2, 14, 27, 41, 56, 8, 25, 43, 62, 18, 39, 61, 20, 44,
    ]
    private static let piLanes: [Int] = [10, 7, 11, 17, 18, 3, 5, 16, 8, 21, 24, 4, 15, 23, 19, 13, 12, 2, 20, 14, 22, 9, 6, 1]

    /// Permutes a 200-byte state in place (lanes little-endian, as STROBE and SHA-3 lay them out).
    static func permute(_ state: inout [UInt8]) {
        precondition(state.count == 200)
        var lanes = [UInt64](repeating: 0, count: 25)
        for i in 0..<25 {
            var lane: UInt64 = 0
            for b in 0..<8 { lane |= UInt64(state[i * 8 + b]) << (8 * UInt64(b)) }
            lanes[i] = lane
        }
        permute(lanes: &lanes)
        for i in 0..<25 {
            for b in 0..<8 { state[i * 8 + b] = UInt8(truncatingIfNeeded: lanes[i] >> (8 * UInt64(b))) }
        }
    }

    private static func permute(lanes st: inout [UInt64]) {
        var bc = [UInt64](repeating: 0, count: 5)
        for round in 0..<24 {
            // θ
            for i in 0..<5 { bc[i] = st[i] ^ st[i + 5] ^ st[i + 10] ^ st[i + 15] ^ st[i + 20] }
            for i in 0..<5 {
                let t = bc[(i + 4) % 5] ^ rotateLeft(bc[(i + 1) % 5], 1)
                for j in stride(from: 0, to: 25, by: 5) { st[j + i] ^= t }
            }
            // ρ and π
            var carried = st[1]
            for i in 0..<24 {
                let j = piLanes[i]
                let next = st[j]
                st[j] = rotateLeft(carried, rotations[i])
                carried = next
            }
            // χ
            for j in stride(from: 0, to: 25, by: 5) {
                for i in 0..<5 { bc[i] = st[j + i] }
                for i in 0..<5 { st[j + i] ^= ~bc[(i + 1) % 5] & bc[(i + 2) % 5] }
            }
            // ι
            st[0] ^= roundConstants[round]
        }
    }

    @inline(__always)
    private static func rotateLeft(_ x: UInt64, _ n: UInt64) -> UInt64 { (x << n) | (x >> (64 - n)) }
}
