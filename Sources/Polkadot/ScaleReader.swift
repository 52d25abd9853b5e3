/// Reads SCALE bytes front to back; every read checks the bounds, so a short or hostile input is a
/// `PolkadotError`, never a trap. Lengths are checked against what is left before anything is
/// reserved, so a claimed count cannot make the reader allocate more than the input's size.
struct ScaleReader {
    let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var remaining: Int { bytes.count - offset }
    var isAtEnd: Bool { offset == bytes.count }

    static let short = PolkadotError(.invalidPayload, "the SCALE data ends early")

    mutating func byte() throws(PolkadotError) -> UInt8 {
        guard offset < bytes.count else { throw Self.short }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func take(_ count: Int) throws(PolkadotError) -> [UInt8] {
        guard count >= 0, count <= remaining else { throw Self.short }
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }

    mutating func u32() throws(PolkadotError) -> UInt32 {
        try take(4).enumerated().reduce(0) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
    }

    /// A compact integer as its little-endian magnitude (up to 2^536), in its one canonical form, as
    /// parity-scale-codec decodes it: a value in the shortest mode that holds it, a big integer in
    /// the fewest bytes. Another form is refused, so one number has one encoding.
    mutating func compactBytes() throws(PolkadotError) -> [UInt8] {
        let first = try byte()
        switch first & 0b11 {
        case 0b00: return [first >> 2]
        case 0b01:
            let value = (UInt16(first) | UInt16(try byte()) << 8) >> 2
            guard value >= 1 << 6 else { throw Self.nonCanonical }
            return [UInt8(value & 0xff), UInt8(value >> 8)]
        case 0b10:
            let rest = try take(3)
            let value = (UInt32(first) | UInt32(rest[0]) << 8 | UInt32(rest[1]) << 16 | UInt32(rest[2]) << 24) >> 2
            guard value >= 1 << 14 else { throw Self.nonCanonical }
            return SCALE.littleEndian(UInt64(value), width: 4)
        default:
            let magnitude = try take(Int(first >> 2) + 4)
            guard magnitude.last != 0, magnitude.count > 4 || magnitude[3] >= 0x40 else { throw Self.nonCanonical }
            return magnitude
        }
    }

    static let nonCanonical = PolkadotError(.invalidPayload, "a SCALE compact integer is not in its shortest form")

    /// A compact integer that must fit in an Int (lengths, type ids).
    mutating func compact() throws(PolkadotError) -> Int {
        let magnitude = try compactBytes()
        guard magnitude.dropFirst(7).allSatisfy({ $0 == 0 }) else { throw PolkadotError(.invalidPayload, "a SCALE length is too large") }
        let value = magnitude.prefix(7).enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
        return Int(value)
    }

    /// A length for items of at least `minimumSize` bytes: at most what the rest of the input can hold.
    mutating func length(minimumSize: Int = 1) throws(PolkadotError) -> Int {
        let count = try compact()
        guard count <= remaining / max(minimumSize, 1) else { throw Self.short }
        return count
    }

    mutating func text() throws(PolkadotError) -> String {
        String(decoding: try take(try length()), as: UTF8.self)
    }

    /// A name (a type's path segment, a field's or a variant's name, a type name): at most 512
    /// bytes, so no metadata can make every mention of a name cost megabytes.
    mutating func name() throws(PolkadotError) -> String {
        let count = try length()
        guard count <= 512 else { throw PolkadotError(.invalidPayload, "a name in the metadata is longer than 512 bytes") }
        return String(decoding: try take(count), as: UTF8.self)
    }

    mutating func vector<T>(_ item: (inout ScaleReader) throws(PolkadotError) -> T) throws(PolkadotError) -> [T] {
        let count = try length()
        var out: [T] = []
        for _ in 0..<count { out.append(try item(&self)) }
        return out
    }

    mutating func option<T>(_ item: (inout ScaleReader) throws(PolkadotError) -> T) throws(PolkadotError) -> T? {
        switch try byte() {
        case 0: return nil
        case 1: return try item(&self)
        default: throw PolkadotError(.invalidPayload, "an Option's tag is neither 0 nor 1")
        }
    }
}
