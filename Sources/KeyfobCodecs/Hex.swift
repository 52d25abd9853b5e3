/// Lowercase hex, and its strict inverse.
public enum Hex {
    /// Inlinable, as it was when each core had its own: a generic call across the module
    /// boundary would walk the bytes through protocol witnesses on every event and signature.
    @inlinable
    public static func encode<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for b in bytes {
            out.append(digit(b >> 4))
            out.append(digit(b & 0x0f))
        }
        return String(decoding: out, as: UTF8.self)
    }

    @inlinable
    static func digit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }

    /// Decodes hex of either case; nil for odd length or a non-hex character.
    @inlinable
    public static func decode(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(utf8.count / 2)
        var i = 0
        while i < utf8.count {
            guard let hi = nibble(utf8[i]), let lo = nibble(utf8[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    @usableFromInline
    static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
