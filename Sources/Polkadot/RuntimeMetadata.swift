/// What a dapp's metadata says about calls: the type registry and each pallet's call enum, read
/// from SCALE-encoded runtime metadata v14 or v15 (frame-metadata's `RuntimeMetadataPrefixed`: "meta",
/// the version, then the registry and the pallets) — what polkadot-js's `metaCalls` carries
/// (`asCallsOnly`: storage, events and constants emptied) and what a node's `state_getMetadata` returns.
public struct RuntimeMetadata: Sendable {
    public struct Field: Sendable {
        public let name: String?
        public let type: Int
        public let typeName: String?
    }

    public struct Variant: Sendable {
        public let name: String
        public let fields: [Field]
        public let index: UInt8
    }

    public enum Primitive: UInt8, Sendable {
        case bool, char, str, u8, u16, u32, u64, u128, u256, i8, i16, i32, i64, i128, i256
    }

    public indirect enum Definition: Sendable {
        case composite([Field])
        case variant([Variant])
        case sequence(Int)
        case array(length: Int, type: Int)
        case tuple([Int])
        case primitive(Primitive)
        case compact(Int)
        case bitSequence
    }

    public struct TypeInfo: Sendable {
        public let path: [String]
        public let definition: Definition
    }

    public let version: UInt8
    public let types: [Int: TypeInfo]
    /// Pallet index → (name, the type id of its call enum).
    public let callPallets: [UInt8: (name: String, callType: Int)]

    public init(_ bytes: [UInt8]) throws(PolkadotError) {
        var r = ScaleReader(bytes)
        guard try r.take(4) == Array("meta".utf8) else { throw PolkadotError(.invalidPayload, "metadata does not start with \"meta\"") }
        version = try r.byte()
        guard version == 14 || version == 15 else {
            throw PolkadotError(.unsupported, "runtime metadata v\(version) is not read; v14 and v15 are")
        }
        var types: [Int: TypeInfo] = [:]
        let count = try r.length()
        for _ in 0..<count {
            let id = try r.compact()
            let path = try r.vector { (r: inout ScaleReader) throws(PolkadotError) in try r.text() }
            _ = try r.vector { (r: inout ScaleReader) throws(PolkadotError) in
                _ = try r.text()
                _ = try r.option { (r: inout ScaleReader) throws(PolkadotError) in try r.compact() }
            }
            let definition = try Self.definition(&r)
            _ = try Self.docs(&r)
            types[id] = TypeInfo(path: path, definition: definition)
        }
        self.types = types
        var pallets: [UInt8: (name: String, callType: Int)] = [:]
        let palletCount = try r.length()
        for _ in 0..<palletCount {
            let name = try r.text()
            _ = try r.option { (r: inout ScaleReader) throws(PolkadotError) in try Self.skipStorage(&r) }
            let calls = try r.option { (r: inout ScaleReader) throws(PolkadotError) in try r.compact() }
            _ = try r.option { (r: inout ScaleReader) throws(PolkadotError) in try r.compact() }  // events
            _ = try r.vector { (r: inout ScaleReader) throws(PolkadotError) in  // constants
                _ = try r.text()
                _ = try r.compact()
                _ = try r.take(try r.length())
                _ = try Self.docs(&r)
            }
            _ = try r.option { (r: inout ScaleReader) throws(PolkadotError) in try r.compact() }  // errors
            let index = try r.byte()
            if version == 15 { _ = try Self.docs(&r) }
            if let calls { pallets[index] = (name, calls) }
        }
        callPallets = pallets
        // The extrinsic, runtime APIs and outer enums follow: nothing a call's decoding needs.
    }

    private static func docs(_ r: inout ScaleReader) throws(PolkadotError) -> [String] {
        try r.vector { (r: inout ScaleReader) throws(PolkadotError) in try r.text() }
    }

    private static func fields(_ r: inout ScaleReader) throws(PolkadotError) -> [Field] {
        try r.vector { (r: inout ScaleReader) throws(PolkadotError) in
            let name = try r.option { (r: inout ScaleReader) throws(PolkadotError) in try r.text() }
            let type = try r.compact()
            let typeName = try r.option { (r: inout ScaleReader) throws(PolkadotError) in try r.text() }
            _ = try docs(&r)
            return Field(name: name, type: type, typeName: typeName)
        }
    }

    private static func definition(_ r: inout ScaleReader) throws(PolkadotError) -> Definition {
        switch try r.byte() {
        case 0: return .composite(try fields(&r))
        case 1:
            return .variant(
                try r.vector { (r: inout ScaleReader) throws(PolkadotError) in
                    let name = try r.text()
                    let fields = try fields(&r)
                    let index = try r.byte()
                    _ = try docs(&r)
                    return Variant(name: name, fields: fields, index: index)
                })
        case 2: return .sequence(try r.compact())
        case 3: return .array(length: Int(try r.u32()), type: try r.compact())
        case 4: return .tuple(try r.vector { (r: inout ScaleReader) throws(PolkadotError) in try r.compact() })
        case 5:
            guard let primitive = Primitive(rawValue: try r.byte()) else { throw PolkadotError(.invalidPayload, "unknown primitive type") }
            return .primitive(primitive)
        case 6: return .compact(try r.compact())
        case 7:
            _ = try r.compact()
            _ = try r.compact()
            return .bitSequence
        default: throw PolkadotError(.invalidPayload, "unknown type definition")
        }
    }

    private static func skipStorage(_ r: inout ScaleReader) throws(PolkadotError) {
        _ = try r.text()
        _ = try r.vector { (r: inout ScaleReader) throws(PolkadotError) in
            _ = try r.text()
            _ = try r.byte()
            switch try r.byte() {
            case 0: _ = try r.compact()
            case 1:
                _ = try r.vector { (r: inout ScaleReader) throws(PolkadotError) in try r.byte() }
                _ = try r.compact()
                _ = try r.compact()
            default: throw PolkadotError(.invalidPayload, "unknown storage entry type")
            }
            _ = try r.take(try r.length())
            _ = try docs(&r)
        }
    }
}
