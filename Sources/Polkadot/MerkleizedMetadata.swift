import KeyfobCrypto

/// The metadata hash of RFC-0078 ("Merkleized Metadata", Polkadot Fellowship): what a runtime
/// with the `CheckMetadataHash` extension adds to every signing payload in mode 1, so that a
/// signature made from a wrong description of the chain is not valid on it. Computed from V15
/// runtime metadata, as the RFC and its reference implementation (`merkleized-metadata`) do:
///
/// - the types reachable from the extrinsic (call, address, signature, each signed extension's
///   extra and additional-signed types), each turned into a leaf — an enum one leaf per variant,
///   primitives and compacts folded into the references to them — numbered anew in the order of
///   their registry ids;
/// - a BLAKE3 merkle tree over the leaves (the last two nodes of the queue joined until one is left);
/// - the digest: that root, the hash of the extrinsic's description, the spec version and name,
///   and the chain's SS58 prefix, decimals and token symbol, hashed with BLAKE3.
public enum MerkleizedMetadata {
    /// What the digest holds beside the metadata: the runtime's version and the chain's token.
    public struct ExtraInfo: Sendable, Hashable {
        public var specVersion: UInt32
        public var specName: String
        public var base58Prefix: UInt16
        public var decimals: UInt8
        public var tokenSymbol: String

        public init(specVersion: UInt32, specName: String, base58Prefix: UInt16, decimals: UInt8, tokenSymbol: String) {
            (self.specVersion, self.specName, self.base58Prefix) = (specVersion, specName, base58Prefix)
            (self.decimals, self.tokenSymbol) = (decimals, tokenSymbol)
        }
    }

    /// The 32-byte metadata hash of `metadata` (V15 only, with its extrinsic description).
    public static func hash(_ metadata: RuntimeMetadata, _ extra: ExtraInfo) throws(PolkadotError) -> [UInt8] {
        guard metadata.version == 15, let extrinsic = metadata.extrinsic, let call = extrinsic.callType,
            let address = extrinsic.addressType, let signature = extrinsic.signatureType
        else {
            throw PolkadotError(.unsupported, "the metadata hash is defined for V15 metadata with its extrinsic description only")
        }
        var tree = TypeTree(metadata.types)
        for root in [call, address, signature] + extrinsic.signedExtensions.flatMap({ [$0.type, $0.additionalSigned] }) {
            try tree.collect(root)
        }
        try tree.number()
        var described = Encoder()
        described.byte(extrinsic.version)
        try tree.reference(address, into: &described)
        try tree.reference(call, into: &described)
        try tree.reference(signature, into: &described)
        described.compact(extrinsic.signedExtensions.count)
        for signedExtension in extrinsic.signedExtensions {
            described.string(signedExtension.identifier)
            try tree.reference(signedExtension.type, into: &described)
            try tree.reference(signedExtension.additionalSigned, into: &described)
        }
        let root = merkleRoot(try tree.leaves().map { BLAKE3.hash($0) })
        var digest = Encoder()
        digest.byte(1)  // MetadataDigest::V1
        digest.bytes(root)
        digest.bytes(BLAKE3.hash(described.out))
        digest.bytes(SCALE.littleEndian(UInt64(extra.specVersion), width: 4))
        digest.string(extra.specName)
        digest.bytes(SCALE.littleEndian(UInt64(extra.base58Prefix), width: 2))
        digest.byte(extra.decimals)
        digest.string(extra.tokenSymbol)
        return BLAKE3.hash(digest.out)
    }

    /// The reference implementation's tree: the leaves in a queue; the last two become a node
    /// (left, right) put at the front, until one hash is left. No leaves: 32 zero bytes.
    static func merkleRoot(_ leaves: [[UInt8]]) -> [UInt8] {
        guard !leaves.isEmpty else { return [UInt8](repeating: 0, count: 32) }
        // A ring of the queue's size: it only ever shrinks by one a step.
        var ring = leaves
        let size = ring.count
        var (head, count) = (0, size)
        while count > 1 {
            let right = ring[(head + count - 1) % size]
            let left = ring[(head + count - 2) % size]
            count -= 2
            head = (head + size - 1) % size
            ring[head] = BLAKE3.hash(left + right)
            count += 1
        }
        return ring[head]
    }

    /// The registry seen as the RFC sees it.
    struct TypeTree {
        let types: [Int: RuntimeMetadata.TypeInfo]
        /// Registry ids reachable from the extrinsic.
        private(set) var reachable: Set<Int> = []
        /// Registry id → the leaf's type id (only types that are leaves: not primitives, compacts
        /// or empty composites, variants and tuples).
        private(set) var numbers: [Int: Int] = [:]
        /// Shared by every walk under a compact or a bit sequence of one hash.
        let work = Work(limit: 100_000)

        init(_ types: [Int: RuntimeMetadata.TypeInfo]) { self.types = types }

        func type(_ id: Int) throws(PolkadotError) -> RuntimeMetadata.TypeInfo {
            guard let type = types[id] else {
                throw PolkadotError(.invalidPayload, "the metadata names type \(id) but does not define it")
            }
            return type
        }

        /// Every type reachable from `root` (compacts and bit sequences end the walk: their inner
        /// types are folded into the reference).
        mutating func collect(_ root: Int) throws(PolkadotError) {
            var stack = [root]
            while let id = stack.popLast() {
                guard reachable.insert(id).inserted else { continue }
                switch try type(id).definition {
                case .composite(let fields): stack += fields.reversed().map(\.type)
                case .variant(let variants): stack += variants.flatMap { $0.fields.map(\.type) }.reversed()
                case .sequence(let inner), .array(_, let inner): stack.append(inner)
                case .tuple(let members): stack += members.reversed()
                case .primitive, .compact, .bitSequence: break
                }
            }
        }

        static func isLeaf(_ definition: RuntimeMetadata.Definition) -> Bool {
            switch definition {
            case .primitive, .compact: false
            case .composite(let fields): !fields.isEmpty
            case .variant(let variants): !variants.isEmpty
            case .tuple(let members): !members.isEmpty
            case .sequence, .array, .bitSequence: true
            }
        }

        mutating func number() throws(PolkadotError) {
            var next = 0
            for id in reachable.sorted() where Self.isLeaf(try type(id).definition) {
                numbers[id] = next
                next += 1
            }
        }

        /// The leaves in the tree's order: by new type id, an enum's variants by index.
        func leaves() throws(PolkadotError) -> [[UInt8]] {
            var out: [[UInt8]] = []
            for (id, number) in numbers.sorted(by: { $0.value < $1.value }) {
                let type = try type(id)
                switch type.definition {
                case .variant(let variants):
                    // Variants of one index twice (not valid metadata): the last one stands, as in
                    // the reference implementation's map.
                    var byIndex: [UInt8: RuntimeMetadata.Variant] = [:]
                    for variant in variants { byIndex[variant.index] = variant }
                    for index in byIndex.keys.sorted() {
                        let variant = byIndex[index]!
                        var leaf = Encoder()
                        leaf.path(type.path)
                        leaf.byte(1)  // TypeDef::Enumeration
                        leaf.string(variant.name)
                        try fields(variant.fields, into: &leaf)
                        leaf.compact(Int(variant.index))
                        leaf.compact(number)
                        out.append(leaf.out)
                    }
                default:
                    var leaf = Encoder()
                    leaf.path(type.path)
                    try definition(type.definition, into: &leaf)
                    leaf.compact(number)
                    out.append(leaf.out)
                }
            }
            return out
        }

        private func fields(_ fields: [RuntimeMetadata.Field], into out: inout Encoder) throws(PolkadotError) {
            out.compact(fields.count)
            for field in fields {
                out.optionalString(field.name)
                try reference(field.type, into: &out)
                out.optionalString(field.typeName)
            }
        }

        private func definition(_ definition: RuntimeMetadata.Definition, into out: inout Encoder) throws(PolkadotError) {
            switch definition {
            case .composite(let fields):
                out.byte(0)
                try self.fields(fields, into: &out)
            case .sequence(let inner):
                out.byte(2)
                try reference(inner, into: &out)
            case .array(let length, let inner):
                out.byte(3)
                out.bytes(SCALE.littleEndian(UInt64(length), width: 4))
                try reference(inner, into: &out)
            case .tuple(let members):
                out.byte(4)
                out.compact(members.count)
                for member in members { try reference(member, into: &out) }
            case .bitSequence(let store, let order):
                out.byte(5)
                let found = try primitives(under: store)
                let width: UInt8? =
                    switch found.count == 1 ? found[0] : nil {
                    case .u8: 1
                    case .u16: 2
                    case .u32: 4
                    case .u64: 8
                    default: nil
                    }
                guard let width else { throw PolkadotError(.invalidPayload, "a bit sequence's store type is not u8, u16, u32 or u64") }
                out.byte(width)
                guard let orderName = try type(order).path.first(where: { $0 == "Lsb0" || $0 == "Msb0" }) else {
                    throw PolkadotError(.invalidPayload, "a bit sequence's order type is neither Lsb0 nor Msb0")
                }
                out.byte(orderName == "Lsb0" ? 1 : 0)
            case .variant, .primitive, .compact:
                throw PolkadotError(.invalidPayload, "not a leaf type")
            }
        }

        /// A reference to type `id`: a primitive, a compact of one, nothing (empty types), or the
        /// leaf's type id.
        func reference(_ id: Int, into out: inout Encoder) throws(PolkadotError) {
            switch try type(id).definition {
            case .primitive(let primitive): out.byte(primitive.rawValue)
            case .compact:
                let found = try primitives(under: id)
                guard found.count <= 1 else { throw PolkadotError(.invalidPayload, "a compact holds more than one number") }
                switch found.first {
                case nil: out.byte(21)  // Void
                case .u8: out.byte(15)
                case .u16: out.byte(16)
                case .u32: out.byte(17)
                case .u64: out.byte(18)
                case .u128: out.byte(19)
                case .u256: out.byte(20)
                default: throw PolkadotError(.invalidPayload, "a compact holds a signed or non-numeric type")
                }
            case let definition where !Self.isLeaf(definition): out.byte(21)  // Void
            default:
                guard let number = numbers[id] else { throw PolkadotError(.invalidPayload, "type \(id) is not reachable from the extrinsic") }
                out.byte(22)
                out.compact(number)
            }
        }

        /// The primitives found walking down from `id` (each type once), as the reference
        /// implementation's collector finds them: through fields, variants, sequences, arrays,
        /// tuples, compacts and bit sequences (`id` itself may be the primitive). Iterative, and
        /// all walks of one hash share `work`: a metadata made of long chains under many compacts
        /// is refused rather than walked quadratically.
        private func primitives(under id: Int) throws(PolkadotError) -> [RuntimeMetadata.Primitive] {
            var found: [RuntimeMetadata.Primitive] = []
            var visited: Set<Int> = []
            var stack = [try type(id).definition]
            while let definition = stack.popLast() {
                try work.spend()
                var children: [Int] = []
                switch definition {
                case .composite(let fields): children = fields.map(\.type)
                case .variant(let variants): children = variants.flatMap { $0.fields.map(\.type) }
                case .sequence(let inner), .array(_, let inner), .compact(let inner): children = [inner]
                case .tuple(let members): children = members
                case .primitive(let primitive): found.append(primitive)
                case .bitSequence(let store, let order): children = [order, store]
                }
                for child in children where visited.insert(child).inserted { stack.append(try type(child).definition) }
            }
            return found
        }

        /// Types visited by the walks under compacts and bit sequences, for one hash. Real
        /// runtimes need about 500 (Polkadot 453, Kusama 505: a compact wraps a number, or a
        /// struct of one); the limit is 200 times that.
        final class Work {
            private var left: Int
            init(limit: Int) { left = limit }
            func spend() throws(PolkadotError) {
                left -= 1
                guard left >= 0 else { throw PolkadotError(.invalidPayload, "the metadata's types nest too deeply under its compacts") }
            }
        }
    }

    /// SCALE encoding of the RFC's structures.
    struct Encoder {
        var out: [UInt8] = []
        mutating func byte(_ value: UInt8) { out.append(value) }
        mutating func bytes(_ value: [UInt8]) { out += value }
        mutating func compact(_ value: Int) { out += SCALE.compact(UInt64(value)) }
        mutating func string(_ value: String) {
            compact(value.utf8.count)
            out += value.utf8
        }
        mutating func optionalString(_ value: String?) {
            if let value {
                byte(1)
                string(value)
            } else {
                byte(0)
            }
        }
        mutating func path(_ segments: [String]) {
            compact(segments.count)
            for segment in segments { string(segment) }
        }
    }
}
