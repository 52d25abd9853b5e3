import KeyfobCrypto

/// The metadata hash of RFC-0078 ("Merkleized Metadata", Polkadot Fellowship): what a runtime
/// with the `CheckMetadataHash` extension adds to every signing payload in mode 1, so that a
/// signature made from a wrong description of the chain is not valid on it. Computed from V15
/// runtime metadata, as the RFC and its reference implementation (`merkleized-metadata`) do:
///
/// - the types reachable from the extrinsic (call, address, signature, each signed extension's
///   extra and additional-signed types: `HashedRegistry`), each turned into a leaf — an enum one leaf per variant,
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
        try hash(try HashedRegistry(metadata), extra)
    }

    /// The 32-byte metadata hash of the types and extrinsic `registry` holds.
    public static func hash(_ registry: HashedRegistry, _ extra: ExtraInfo) throws(PolkadotError) -> [UInt8] {
        let extrinsic = registry.extrinsic
        let tree = TypeTree(registry)
        var described = Encoder()
        described.byte(extrinsic.version)
        try tree.reference(registry.addressType, into: &described)
        try tree.reference(registry.callType, into: &described)
        try tree.reference(registry.signatureType, into: &described)
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

    /// The registry seen as the RFC sees it: only what `HashedRegistry` holds.
    struct TypeTree {
        let registry: HashedRegistry
        /// Registry id → the leaf's type id (only types that are leaves: not primitives, compacts
        /// or empty composites, variants and tuples), numbered anew in registry-id order.
        let numbers: [Int: Int]

        init(_ registry: HashedRegistry) {
            self.registry = registry
            var numbers: [Int: Int] = [:]
            for (id, info) in registry.types.sorted(by: { $0.key < $1.key }) where Self.isLeaf(info.definition) {
                numbers[id] = numbers.count
            }
            self.numbers = numbers
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

        /// The leaves in the tree's order: by new type id, an enum's variants by index (the
        /// registry has refused an enum that repeats one).
        func leaves() throws(PolkadotError) -> [[UInt8]] {
            var out: [[UInt8]] = []
            for (id, number) in numbers.sorted(by: { $0.value < $1.value }) {
                let type = try registry.type(id)
                switch type.definition {
                case .variant(let variants):
                    for variant in variants.sorted(by: { $0.index < $1.index }) {
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
                    try definition(id, type.definition, into: &leaf)
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

        private func definition(_ id: Int, _ definition: RuntimeMetadata.Definition, into out: inout Encoder) throws(PolkadotError) {
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
            case .bitSequence:
                guard let bits = registry.bitSequences[id] else { throw PolkadotError(.invalidPayload, "not a bit sequence") }
                out.byte(5)
                out.byte(UInt8(bits.width))
                out.byte(bits.lsb0 ? 1 : 0)
            case .variant, .primitive, .compact:
                throw PolkadotError(.invalidPayload, "not a leaf type")
            }
        }

        /// A reference to type `id`: a primitive, a compact of one, nothing (empty types), or the
        /// leaf's type id.
        func reference(_ id: Int, into out: inout Encoder) throws(PolkadotError) {
            switch try registry.type(id).definition {
            case .primitive(let primitive): out.byte(primitive.rawValue)
            case .compact:
                switch registry.compacts[id] ?? nil {
                case nil: out.byte(21)  // Void
                case .u8?: out.byte(15)
                case .u16?: out.byte(16)
                case .u32?: out.byte(17)
                case .u64?: out.byte(18)
                case .u128?: out.byte(19)
                case .u256?: out.byte(20)
                default: throw PolkadotError(.invalidPayload, "a compact holds a signed or non-numeric type")
                }
            case let definition where !Self.isLeaf(definition): out.byte(21)  // Void
            default:
                guard let number = numbers[id] else { throw PolkadotError(.invalidPayload, "type \(id) is not reachable from the extrinsic") }
                out.byte(22)
                out.compact(number)
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
