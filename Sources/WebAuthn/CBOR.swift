import CCBOR

/// A decoded CBOR data item (RFC 8949), as WebAuthn uses them.
public indirect enum CBOR: Sendable, Hashable {
    case unsigned(UInt64)
    /// A negative integer stored as CBOR does: the value is `-1 - n`.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBOR])
    case map([(CBOR, CBOR)])
    case tagged(UInt64, CBOR)
    case bool(Bool)
    case null
    case undefined
    case float(Double)

    public static func == (a: CBOR, b: CBOR) -> Bool {
        switch (a, b) {
        case let (.unsigned(x), .unsigned(y)), let (.negative(x), .negative(y)): return x == y
        case let (.bytes(x), .bytes(y)): return x == y
        case let (.text(x), .text(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.map(x), .map(y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case let (.tagged(t, x), .tagged(u, y)): return t == u && x == y
        case let (.bool(x), .bool(y)): return x == y
        case (.null, .null), (.undefined, .undefined): return true
        case let (.float(x), .float(y)): return x == y
        default: return false
        }
    }

    /// Consistent with `==`, so duplicate map keys are found with a set in linear time.
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .unsigned(let n): hasher.combine(0); hasher.combine(n)
        case .negative(let n): hasher.combine(1); hasher.combine(n)
        case .bytes(let b): hasher.combine(2); hasher.combine(b)
        case .text(let t): hasher.combine(3); hasher.combine(t)
        case .array(let a): hasher.combine(4); hasher.combine(a)
        case .map(let m):
            hasher.combine(5)
            hasher.combine(m.count)
            for (k, v) in m { hasher.combine(k); hasher.combine(v) }
        case .tagged(let t, let v): hasher.combine(6); hasher.combine(t); hasher.combine(v)
        case .bool(let b): hasher.combine(7); hasher.combine(b)
        case .null: hasher.combine(8)
        case .undefined: hasher.combine(9)
        case .float(let d): hasher.combine(10); hasher.combine(d)
        }
    }

    /// The integer value of `.unsigned`/`.negative` when it fits in Int64.
    public var int: Int64? {
        switch self {
        case .unsigned(let n): return n <= UInt64(Int64.max) ? Int64(n) : nil
        case .negative(let n): return n <= UInt64(Int64.max) ? -1 - Int64(n) : nil
        default: return nil
        }
    }

    public var bytes: [UInt8]? { if case .bytes(let b) = self { return b } else { return nil } }
    public var text: String? { if case .text(let t) = self { return t } else { return nil } }
    public var array: [CBOR]? { if case .array(let a) = self { return a } else { return nil } }
    public var mapPairs: [(CBOR, CBOR)]? { if case .map(let m) = self { return m } else { return nil } }

    /// Looks up a map entry by key.
    public subscript(key: CBOR) -> CBOR? {
        guard case .map(let pairs) = self else { return nil }
        return pairs.first { $0.0 == key }?.1
    }
    public subscript(text key: String) -> CBOR? { self[.text(key)] }
    public subscript(int key: Int64) -> CBOR? {
        self[key >= 0 ? .unsigned(UInt64(key)) : .negative(UInt64(-1 - key))]
    }
}

/// Decodes untrusted CBOR with libcbor, behind a pre-scan.
///
/// libcbor 0.8's `cbor_load` allocates whatever length an array or map *declares*
/// (5 bytes can ask for 52 GB), so every input is first walked head by head:
/// declared lengths must fit in the bytes left and nesting must stay shallow.
/// Only then does libcbor build the items, which are copied into `CBOR` values.
public enum CBORDecoder {
    public static let maxDepth = 16
    /// Entries an array or map may have. A real attestation object's largest is a handful
    /// (an x5c chain, a TPM statement); a 64 KiB body could otherwise declare tens of thousands.
    public static let maxEntries = 256

    /// Decodes exactly one item filling `bytes`.
    public static func decode(_ bytes: ArraySlice<UInt8>) throws(WebAuthnError) -> CBOR {
        let (item, used) = try decodePrefix(bytes)
        guard used == bytes.count else { throw .malformed("CBOR has \(bytes.count - used) trailing bytes") }
        return item
    }

    public static func decode(_ bytes: [UInt8]) throws(WebAuthnError) -> CBOR { try decode(bytes[...]) }

    /// Decodes the first item of `bytes`; returns it and how many bytes it used.
    public static func decodePrefix(_ bytes: ArraySlice<UInt8>) throws(WebAuthnError) -> (CBOR, Int) {
        var scanner = Prescan(bytes: bytes)
        do { try scanner.item(depth: 0) } catch { throw .malformed("CBOR is malformed or truncated") }
        let used = scanner.position - bytes.startIndex
        return try bytes.withUnsafeBufferPointer { (buffer) throws(WebAuthnError) -> (CBOR, Int) in
            var result = cbor_load_result()
            guard let base = buffer.baseAddress,
                let root = cbor_load(base, used, &result)
            else {
                throw .malformed("CBOR could not be decoded")
            }
            defer { var ref: UnsafeMutablePointer<cbor_item_t>? = root; cbor_decref(&ref) }
            guard result.read == used else { throw .malformed("CBOR length disagrees with its content") }
            return (try convert(root, depth: 0), used)
        }
    }

    private static func convert(_ item: UnsafeMutablePointer<cbor_item_t>, depth: Int) throws(WebAuthnError) -> CBOR {
        guard depth <= maxDepth else { throw .malformed("CBOR nests too deeply") }
        switch cbor_typeof(item) {
        case CBOR_TYPE_UINT: return .unsigned(cbor_get_int(item))
        case CBOR_TYPE_NEGINT: return .negative(cbor_get_int(item))
        case CBOR_TYPE_BYTESTRING:
            return .bytes(
                try stringBytes(
                    item, definite: cbor_bytestring_is_definite(item),
                    handle: cbor_bytestring_handle, length: cbor_bytestring_length,
                    chunks: cbor_bytestring_chunks_handle, chunkCount: cbor_bytestring_chunk_count))
        case CBOR_TYPE_STRING:
            let utf8 = try stringBytes(
                item, definite: cbor_string_is_definite(item),
                handle: cbor_string_handle, length: cbor_string_length,
                chunks: cbor_string_chunks_handle, chunkCount: cbor_string_chunk_count)
            guard let text = String(validating: utf8, as: UTF8.self) else { throw .malformed("CBOR text is not UTF-8") }
            return .text(text)
        case CBOR_TYPE_ARRAY:
            let count = cbor_array_size(item)
            guard count == 0 || cbor_array_handle(item) != nil else { throw .malformed("CBOR array is empty") }
            var out: [CBOR] = []
            out.reserveCapacity(count)
            for i in 0..<count {
                guard let child = cbor_array_handle(item)[i] else { throw .malformed("CBOR array has a hole") }
                out.append(try convert(child, depth: depth + 1))
            }
            return .array(out)
        case CBOR_TYPE_MAP:
            let count = cbor_map_size(item)
            var out: [(CBOR, CBOR)] = []
            out.reserveCapacity(count)
            var seen = Set<CBOR>(minimumCapacity: count)
            guard count == 0 || cbor_map_handle(item) != nil else { throw .malformed("CBOR map is empty") }
            for i in 0..<count {
                let pair = cbor_map_handle(item)[i]
                guard let k = pair.key, let v = pair.value else { throw .malformed("CBOR map has a hole") }
                let key = try convert(k, depth: depth + 1)
                // CTAP2 canonical CBOR has no duplicate keys; libcbor does not check. A set keeps it linear.
                guard seen.insert(key).inserted else { throw .malformed("CBOR map repeats a key") }
                out.append((key, try convert(v, depth: depth + 1)))
            }
            return .map(out)
        case CBOR_TYPE_TAG:
            guard let inner = cbor_tag_item(item) else { throw .malformed("CBOR tag without content") }
            defer { var ref: UnsafeMutablePointer<cbor_item_t>? = inner; cbor_decref(&ref) }
            return .tagged(cbor_tag_value(item), try convert(inner, depth: depth + 1))
        case CBOR_TYPE_FLOAT_CTRL:
            if cbor_float_get_width(item) == CBOR_FLOAT_0 {
                switch cbor_ctrl_value(item) {
                case 20: return .bool(false)
                case 21: return .bool(true)
                case 22: return .null
                case 23: return .undefined
                default: throw .malformed("CBOR simple value is not supported")
                }
            }
            return .float(cbor_float_get_float(item))
        default:
            throw .malformed("CBOR item type is not supported")
        }
    }

    private static func stringBytes(
        _ item: UnsafeMutablePointer<cbor_item_t>, definite: Bool,
        handle: (UnsafePointer<cbor_item_t>?) -> cbor_mutable_data?,
        length: (UnsafePointer<cbor_item_t>?) -> Int,
        chunks: (UnsafePointer<cbor_item_t>?) -> UnsafeMutablePointer<UnsafeMutablePointer<cbor_item_t>?>?,
        chunkCount: (UnsafePointer<cbor_item_t>?) -> Int
    ) throws(WebAuthnError) -> [UInt8] {
        if definite {
            let n = length(item)
            guard n > 0 else { return [] }
            guard let data = handle(item) else { throw .malformed("CBOR string has no data") }
            return Array(UnsafeBufferPointer(start: data, count: n))
        }
        var out: [UInt8] = []
        let count = chunkCount(item)
        guard count == 0 || chunks(item) != nil else { throw .malformed("CBOR string has no chunks") }
        for i in 0..<count {
            guard let chunk = chunks(item)![i] else { throw .malformed("CBOR string chunk missing") }
            let n = length(chunk)
            if n > 0, let data = handle(chunk) { out.append(contentsOf: UnsafeBufferPointer(start: data, count: n)) }
        }
        return out
    }
}

/// Walks CBOR heads without allocating, so that `cbor_load` only ever sees
/// well-formed input whose declared sizes fit in the bytes actually present.
private struct Prescan {
    struct Invalid: Error {}
    let bytes: ArraySlice<UInt8>
    var position: Int

    init(bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        self.position = bytes.startIndex
    }

    var remaining: Int { bytes.endIndex - position }

    mutating func byte() throws(Invalid) -> UInt8 {
        guard position < bytes.endIndex else { throw Invalid() }
        defer { position += 1 }
        return bytes[position]
    }

    /// Reads an item head; returns (major type, argument or nil when indefinite).
    mutating func head() throws(Invalid) -> (UInt8, UInt64?) {
        let initial = try byte()
        let major = initial >> 5
        let info = initial & 0x1f
        switch info {
        case 0..<24: return (major, UInt64(info))
        case 24...27:
            let size = 1 << Int(info - 24)
            var value: UInt64 = 0
            for _ in 0..<size { value = value << 8 | UInt64(try byte()) }
            // A one-byte simple value below 32 is not well-formed (RFC 8949 §3.3).
            if major == 7 && info == 24 && value < 32 { throw Invalid() }
            return (major, value)
        case 31: return (major, nil)
        default: throw Invalid()  // 28...30 are reserved
        }
    }

    mutating func item(depth: Int) throws(Invalid) {
        guard depth <= CBORDecoder.maxDepth else { throw Invalid() }
        let (major, argument) = try head()
        switch major {
        case 0, 1:
            guard argument != nil else { throw Invalid() }
        case 2, 3:
            if let length = argument {
                guard length <= UInt64(remaining) else { throw Invalid() }
                position += Int(length)
            } else {
                // Indefinite string: definite chunks of the same major type, then a break.
                while true {
                    guard remaining > 0 else { throw Invalid() }
                    if bytes[position] == 0xff { position += 1; break }
                    let (chunkMajor, chunkLength) = try head()
                    guard chunkMajor == major, let n = chunkLength, n <= UInt64(remaining) else { throw Invalid() }
                    position += Int(n)
                }
            }
        case 4, 5:
            let perEntry: UInt64 = major == 4 ? 1 : 2
            if let count = argument {
                guard count <= UInt64(CBORDecoder.maxEntries), count <= UInt64(remaining) / perEntry else { throw Invalid() }
                for _ in 0..<(count * perEntry) { try item(depth: depth + 1) }
            } else {
                var entries = 0
                while true {
                    guard remaining > 0 else { throw Invalid() }
                    if bytes[position] == 0xff { position += 1; break }
                    try item(depth: depth + 1)
                    entries += 1
                    guard entries <= CBORDecoder.maxEntries * Int(perEntry) else { throw Invalid() }
                }
                guard major == 4 || entries % 2 == 0 else { throw Invalid() }
            }
        case 6:
            guard argument != nil else { throw Invalid() }
            try item(depth: depth + 1)
        default:  // 7: simple values and floats
            guard argument != nil else { throw Invalid() }  // a lone break
        }
    }
}
