/// What a dapp's metadata says about calls: the type registry and each pallet's call enum, read
/// from SCALE-encoded runtime metadata v14 or v15 (frame-metadata's `RuntimeMetadataPrefixed`: "meta",
/// the version, then the registry and the pallets) — what polkadot-js's `metaCalls` carries
/// (`asCallsOnly`: storage, events and constants emptied) and what a node's `state_getMetadata` returns.
///
/// V15 is read to its last byte (runtime APIs, outer enums, custom values) and nothing may follow:
/// it is what a verified page is decoded with, so no part of it goes unread. Type ids must be the
/// registry's positions, as scale-info writes them (the RFC-0078 reference resolves a type by its
/// position; a registry naming ids of its own could mean one thing to it and another here).
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
        /// The store type (u8…u64) and the order type (`Lsb0` or `Msb0`).
        case bitSequence(store: Int, order: Int)
    }

    /// How the runtime's extrinsics are made: the call type and the signed extensions in the
    /// order they appear in a transaction and in its signing payload.
    public struct Extrinsic: Sendable {
        public struct SignedExtension: Sendable {
            public let identifier: String
            /// What the extension adds to the extrinsic (`extra`).
            public let type: Int
            /// What it adds to the signed data only (`additionalSigned`, `implicit`).
            public let additionalSigned: Int
        }

        public let version: UInt8
        /// V15 only (V14 names the unchecked-extrinsic type instead).
        public let addressType, callType, signatureType: Int?
        public let signedExtensions: [SignedExtension]
    }

    public struct TypeInfo: Sendable {
        public let path: [String]
        public let definition: Definition
    }

    public let version: UInt8
    public let types: [Int: TypeInfo]
    /// Pallet index → (name, the type id of its call enum).
    public let callPallets: [UInt8: (name: String, callType: Int)]
    /// Nil when the metadata carries none (polkadot-js's calls-only form may cut it).
    public let extrinsic: Extrinsic?
    /// The runtime's own name and version, from the `System` pallet's `Version` constant (nil in
    /// calls-only metadata, whose constants are emptied).
    public let runtimeVersion: (specName: String, specVersion: UInt32)?

    /// `bytes`: `RuntimeMetadataPrefixed` as `state_getMetadata` returns it, or wrapped in the SCALE
    /// `Option<Vec<u8>>` that `state_call("Metadata_metadata_at_version", 15)` returns.
    public init(_ bytes: [UInt8]) throws(PolkadotError) {
        var r = ScaleReader(Self.unwrapped(bytes))
        guard try r.take(4) == Array("meta".utf8) else { throw PolkadotError(.invalidPayload, "metadata does not start with \"meta\"") }
        version = try r.byte()
        guard version == 14 || version == 15 else {
            throw PolkadotError(.unsupported, "runtime metadata v\(version) is not read; v14 and v15 are")
        }
        var types: [Int: TypeInfo] = [:]
        let count = try r.length()
        for position in 0..<count {
            let id = try r.compact()
            guard id == position else { throw PolkadotError(.invalidPayload, "the metadata's type \(position) is numbered \(id)") }
            let path = try r.vector { (r: inout ScaleReader) throws(PolkadotError) in try r.name() }
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
        var runtimeVersion: (String, UInt32)?
        let palletCount = try r.length()
        for _ in 0..<palletCount {
            let name = try r.name()
            _ = try r.option { (r: inout ScaleReader) throws(PolkadotError) in try Self.skipStorage(&r) }
            let calls = try r.option { (r: inout ScaleReader) throws(PolkadotError) in try r.compact() }
            _ = try r.option { (r: inout ScaleReader) throws(PolkadotError) in try r.compact() }  // events
            let constants = try r.vector { (r: inout ScaleReader) throws(PolkadotError) in
                let constant = try r.text()
                _ = try r.compact()
                let value = try r.take(try r.length())
                _ = try Self.docs(&r)
                return (constant, value)
            }
            if name == "System", let value = constants.first(where: { $0.0 == "Version" })?.1 {
                // sp_version's RuntimeVersion: spec_name, impl_name, authoring_version, spec_version, …
                var v = ScaleReader(value)
                let specName = try v.text()
                _ = try v.text()
                _ = try v.u32()
                runtimeVersion = (specName, try v.u32())
            }
            _ = try r.option { (r: inout ScaleReader) throws(PolkadotError) in try r.compact() }  // errors
            let index = try r.byte()
            if version == 15 { _ = try Self.docs(&r) }
            if let calls { pallets[index] = (name, calls) }
        }
        callPallets = pallets
        self.runtimeVersion = runtimeVersion
        guard version == 15 else {
            // V14 (polkadot-js's calls-only form may cut it after the pallets): read for a site's own
            // words only, never for a verified page.
            extrinsic = try? Self.extrinsic(&r, version: version)
            return
        }
        extrinsic = try Self.extrinsic(&r, version: version)
        try Self.skipRest(&r)
        guard r.isAtEnd else { throw PolkadotError(.invalidPayload, "the metadata has \(r.remaining) bytes after the runtime") }
    }

    /// The `Option<Vec<u8>>` of `Metadata_metadata_at_version` taken off, when it is there.
    static func unwrapped(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.first == 1 else { return bytes }
        var r = ScaleReader(bytes)
        _ = try? r.byte()
        guard let length = try? r.compact(), length == r.remaining, let inner = try? r.take(length),
            inner.starts(with: Array("meta".utf8))
        else { return bytes }
        return inner
    }

    /// What V15 holds after the extrinsic: the runtime type, the runtime APIs, the outer enums and the
    /// custom values. None of it is shown; all of it is read, so nothing can hide after it.
    private static func skipRest(_ r: inout ScaleReader) throws(PolkadotError) {
        _ = try r.compact()  // the runtime type
        _ = try r.vector { (r: inout ScaleReader) throws(PolkadotError) in
            _ = try r.text()
            _ = try r.vector { (r: inout ScaleReader) throws(PolkadotError) in
                _ = try r.text()
                _ = try r.vector { (r: inout ScaleReader) throws(PolkadotError) in
                    _ = try r.text()
                    _ = try r.compact()
                }
                _ = try r.compact()  // output
                _ = try docs(&r)
            }
            _ = try docs(&r)
        }
        for _ in 0..<3 { _ = try r.compact() }  // call, event and error enums
        _ = try r.vector { (r: inout ScaleReader) throws(PolkadotError) in
            _ = try r.text()
            _ = try r.compact()
            _ = try r.take(try r.length())
        }
    }

    private static func extrinsic(_ r: inout ScaleReader, version: UInt8) throws(PolkadotError) -> Extrinsic {
        var (address, call, signature): (Int?, Int?, Int?) = (nil, nil, nil)
        let extrinsicVersion: UInt8
        if version == 15 {
            extrinsicVersion = try r.byte()
            (address, call, signature) = (try r.compact(), try r.compact(), try r.compact())
            _ = try r.compact()  // extra_ty: the extensions' tuple, listed one by one below
        } else {
            _ = try r.compact()  // the unchecked extrinsic's type
            extrinsicVersion = try r.byte()
        }
        let extensions = try r.vector { (r: inout ScaleReader) throws(PolkadotError) in
            Extrinsic.SignedExtension(identifier: try r.name(), type: try r.compact(), additionalSigned: try r.compact())
        }
        return Extrinsic(
            version: extrinsicVersion, addressType: address, callType: call, signatureType: signature, signedExtensions: extensions)
    }

    private static func docs(_ r: inout ScaleReader) throws(PolkadotError) -> [String] {
        try r.vector { (r: inout ScaleReader) throws(PolkadotError) in try r.text() }
    }

    private static func fields(_ r: inout ScaleReader) throws(PolkadotError) -> [Field] {
        try r.vector { (r: inout ScaleReader) throws(PolkadotError) in
            let name = try r.option { (r: inout ScaleReader) throws(PolkadotError) in try r.name() }
            let type = try r.compact()
            let typeName = try r.option { (r: inout ScaleReader) throws(PolkadotError) in try r.name() }
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
                    let name = try r.name()
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
        case 7: return .bitSequence(store: try r.compact(), order: try r.compact())
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
