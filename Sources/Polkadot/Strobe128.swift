/// STROBE-128 as Merlin uses it (strobe.sourceforge.io, v1.0.2): only meta-AD, AD, KEY and PRF, which
/// is all a transcript needs. The state is secret once a key is absorbed; a value type, so a
/// transcript's copy (a clone) never shares it.
struct Strobe128 {
    private static let rate = 166
    private static let flagI: UInt8 = 1
    private static let flagA: UInt8 = 1 << 1
    private static let flagC: UInt8 = 1 << 2
    private static let flagM: UInt8 = 1 << 4
    private static let flagK: UInt8 = 1 << 5

    private var state: [UInt8]
    private var position = 0
    private var positionBegin: UInt8 = 0
    private var currentFlags: UInt8 = 0

    init(protocolLabel: [UInt8]) {
        var st = [UInt8](repeating: 0, count: 200)
        st.replaceSubrange(0..<6, with: [1, UInt8(Self.rate + 2), 1, 0, 1, 96])
        st.replaceSubrange(6..<18, with: Array("STROBEv1.0.2".utf8))
        Keccak.permute(&st)
        state = st
        metaAD(protocolLabel, more: false)
    }

    mutating func metaAD(_ data: [UInt8], more: Bool) {
        beginOperation(Self.flagM | Self.flagA, more: more)
        absorb(data)
    }

    mutating func ad(_ data: [UInt8], more: Bool) {
        beginOperation(Self.flagA, more: more)
        absorb(data)
    }

    mutating func prf(count: Int, more: Bool) -> [UInt8] {
        beginOperation(Self.flagI | Self.flagA | Self.flagC, more: more)
        var out = [UInt8](repeating: 0, count: count)
        for i in 0..<count {
            out[i] = state[position]
            state[position] = 0
            advance()
        }
        return out
    }

    mutating func key(_ data: [UInt8], more: Bool) {
        beginOperation(Self.flagA | Self.flagC, more: more)
        for byte in data {
            state[position] = byte
            advance()
        }
    }

    /// Zeroes the state (a transcript that absorbed a secret).
    mutating func wipe() {
        for i in state.indices { state[i] = 0 }
    }

    private mutating func absorb(_ data: [UInt8]) {
        for byte in data {
            state[position] ^= byte
            advance()
        }
    }

    @inline(__always)
    private mutating func advance() {
        position += 1
        if position == Self.rate { runF() }
    }

    private mutating func runF() {
        state[position] ^= positionBegin
        state[position + 1] ^= 0x04
        state[Self.rate + 1] ^= 0x80
        Keccak.permute(&state)
        position = 0
        positionBegin = 0
    }

    private mutating func beginOperation(_ flags: UInt8, more: Bool) {
        if more {
            precondition(currentFlags == flags, "a STROBE operation continued with other flags")
            return
        }
        let oldBegin = positionBegin
        positionBegin = UInt8(position + 1)
        currentFlags = flags
        absorb([oldBegin, flags])
        if flags & (Self.flagC | Self.flagK) != 0 && position != 0 { runF() }
    }
}
