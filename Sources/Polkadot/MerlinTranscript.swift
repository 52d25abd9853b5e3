import KeyfobCrypto

/// A Merlin transcript (merlin.cool): STROBE-128 framed with labels, the Fiat–Shamir hash sr25519
/// signs and derives with. `witnessBytes` is Merlin's TranscriptRng: the transcript, the signer's
/// secret nonce seeds and fresh randomness, so a nonce never repeats even if one of them does.
public struct MerlinTranscript {
    private var strobe: Strobe128

    public init(label: String) {
        strobe = Strobe128(protocolLabel: Array("Merlin v1.0".utf8))
        append(label: "dom-sep", Array(label.utf8))
    }

    public mutating func append(label: String, _ message: [UInt8]) {
        strobe.metaAD(Array(label.utf8), more: false)
        strobe.metaAD(Self.littleEndian32(message.count), more: true)
        strobe.ad(message, more: false)
    }

    public mutating func challengeBytes(label: String, count: Int) -> [UInt8] {
        strobe.metaAD(Array(label.utf8), more: false)
        strobe.metaAD(Self.littleEndian32(count), more: true)
        return strobe.prf(count: count, more: false)
    }

    /// Zeroes the transcript's state: one that absorbed a secret (hard derivation) is wiped before
    /// it goes.
    public mutating func wipe() { strobe.wipe() }

    /// Secret bytes bound to this transcript, the given witnesses and 32 random bytes.
    public func witnessBytes(label: String, count: Int, witnesses: [[UInt8]], random: [UInt8] = randomBytes(32)) -> [UInt8] {
        var rng = strobe
        defer { rng.wipe() }
        for witness in witnesses {
            rng.metaAD(Array(label.utf8), more: false)
            rng.metaAD(Self.littleEndian32(witness.count), more: true)
            rng.key(witness, more: false)
        }
        rng.metaAD(Array("rng".utf8), more: false)
        rng.key(random, more: false)
        rng.metaAD(Self.littleEndian32(count), more: false)
        return rng.prf(count: count, more: false)
    }

    private static func littleEndian32(_ value: Int) -> [UInt8] {
        let v = UInt32(value)
        return [UInt8(v & 0xff), UInt8((v >> 8) & 0xff), UInt8((v >> 16) & 0xff), UInt8(v >> 24)]
    }
}
