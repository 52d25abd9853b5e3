/// A JSON reader for the one shape a sign-in's hot path sees: an object whose members are plain
/// strings, `true`, `false`, `null` or objects of the same kind. A plain string is printable
/// ASCII without a backslash, which every base64url field, origin and WebAuthn type is.
///
/// It answers nil for anything else — a number, an array, an escape, a non-ASCII byte, a key
/// given twice, more than 16 members in an object, nesting deeper than four objects, trailing
/// bytes — and the caller then hands the
/// same bytes to Foundation, which decides and words the error. So it never accepts what
/// Foundation refuses nor refuses what Foundation accepts; it only skips Foundation's
/// allocations (a sign-in body costs JSONDecoder ~14 µs here, this reader ~1 µs).
/// `PlainJSONTests` checks it against Foundation on every input it is given.
public struct PlainJSON: Sendable, Equatable {
    public indirect enum Value: Sendable, Equatable {
        case string(String)
        case bool(Bool)
        case null
        case object(PlainJSON)
    }

    /// The members in the order they came; keys are unique.
    public let members: [(key: String, value: Value)]

    public static func == (a: PlainJSON, b: PlainJSON) -> Bool {
        a.members.count == b.members.count && zip(a.members, b.members).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }

    public subscript(key: String) -> Value? {
        for member in members where member.key == key { return member.value }
        return nil
    }

    /// The member's string, nil when it is absent or of another type.
    public func string(_ key: String) -> String? {
        if case .string(let text)? = self[key] { return text }
        return nil
    }

    /// A member that may be a string, null or absent: `.some(nil)` for null or absent, nil for
    /// another type.
    public func optionalString(_ key: String) -> String?? {
        switch self[key] {
        case nil, .null?: return .some(nil)
        case .string(let text)?: return .some(text)
        default: return nil
        }
    }

    /// The member's object, nil when it is absent or of another type.
    public func object(_ key: String) -> PlainJSON? {
        if case .object(let object)? = self[key] { return object }
        return nil
    }

    /// The object `bytes` hold, or nil when they are not the plain shape (see the type's comment).
    public static func parse(_ bytes: [UInt8]) -> PlainJSON? {
        bytes.withUnsafeBufferPointer { buffer in
            var reader = Reader(bytes: buffer)
            reader.skipSpace()
            guard let object = reader.object(depth: 1) else { return nil }
            reader.skipSpace()
            return reader.index == buffer.count ? object : nil
        }
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0
        static let maxDepth = 4
        /// Keeps the check for repeated keys linear in the input.
        static let maxMembers = 16

        mutating func skipSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        mutating func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func take(literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            for offset in 0..<count where bytes[index + offset] != literal.utf8Start[offset] { return false }
            index += count
            return true
        }

        mutating func object(depth: Int) -> PlainJSON? {
            guard depth <= Self.maxDepth, take(UInt8(ascii: "{")) else { return nil }
            var members: [(key: String, value: Value)] = []
            skipSpace()
            if take(UInt8(ascii: "}")) { return PlainJSON(members: members) }
            while true {
                skipSpace()
                guard let key = string() else { return nil }
                guard members.count < Self.maxMembers else { return nil }
                for member in members where member.key == key { return nil }
                skipSpace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipSpace()
                guard let value = value(depth: depth) else { return nil }
                members.append((key, value))
                skipSpace()
                if take(UInt8(ascii: ",")) { continue }
                return take(UInt8(ascii: "}")) ? PlainJSON(members: members) : nil
            }
        }

        mutating func value(depth: Int) -> Value? {
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "\""): return string().map(Value.string)
            case UInt8(ascii: "{"): return object(depth: depth + 1).map(Value.object)
            case UInt8(ascii: "t"): return take(literal: "true") ? .bool(true) : nil
            case UInt8(ascii: "f"): return take(literal: "false") ? .bool(false) : nil
            case UInt8(ascii: "n"): return take(literal: "null") ? .null : nil
            default: return nil
            }
        }

        /// A string of printable ASCII without escapes; nil for anything else.
        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            let start = index
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                    index += 1
                    return text
                }
                guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\\") else { return nil }
                index += 1
            }
            return nil
        }
    }
}
