/// The pieces of SCALE (Substrate's codec) a signing payload needs: compact integers of any width,
/// fixed-width little-endian integers and compact-prefixed strings.
public enum SCALE {
    /// The compact encoding of a non-negative integer given as little-endian bytes (any length).
    public static func compact(littleEndian magnitude: [UInt8]) -> [UInt8] {
        var bytes = magnitude
        while let last = bytes.last, last == 0 { bytes.removeLast() }
        if bytes.count <= 4 {
            var value: UInt64 = 0
            for (i, b) in bytes.enumerated() { value |= UInt64(b) << (8 * UInt64(i)) }
            if value < 1 << 30 { return compact(value) }
        }
        precondition(bytes.count <= 67, "SCALE compact integers are at most 2^536")
        return [UInt8((bytes.count - 4) << 2 | 0b11)] + bytes
    }

    public static func compact(_ value: UInt64) -> [UInt8] {
        switch value {
        case ..<(1 << 6): return [UInt8(value << 2)]
        case ..<(1 << 14): return littleEndian(value << 2 | 0b01, width: 2)
        case ..<(1 << 30): return littleEndian(value << 2 | 0b10, width: 4)
        default:
            var bytes = littleEndian(value, width: 8)
            while let last = bytes.last, last == 0 { bytes.removeLast() }
            return [UInt8((bytes.count - 4) << 2 | 0b11)] + bytes
        }
    }

    public static func littleEndian(_ value: UInt64, width: Int) -> [UInt8] {
        (0..<width).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }

    public static func string(_ text: String) -> [UInt8] { compact(UInt64(text.utf8.count)) + Array(text.utf8) }
}
