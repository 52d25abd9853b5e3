/// The part of V15 runtime metadata that RFC-0078's metadata hash covers, and nothing else: the
/// types reachable from the extrinsic (its call, address and signature types, and each signed
/// extension's extra and additional-signed types) and the extrinsic's description.
///
/// The merkle tree is built from these types and a verified page is decoded through them alone
/// (`CallDecoder(hashed:)`), so a verified page cannot be worded by a part of the metadata the
/// hash leaves out — the pallet list, a type no extrinsic reaches, the runtime APIs: they are not
/// here to be read. Compacts and bit sequences are kept as the hash sees them (the number a compact
/// holds, a bit sequence's store width and order), not by the types under them.
///
/// Refused: V14, metadata without its extrinsic description, and any reachable enum that gives two
/// variants one index (the hash would keep one of them and a decoder could read the other).
public struct HashedRegistry: Sendable {
    public let extrinsic: RuntimeMetadata.Extrinsic
    public let callType, addressType, signatureType: Int
    /// Registry id → type, for the reachable types only.
    let types: [Int: RuntimeMetadata.TypeInfo]
    /// A reachable compact → the one unsigned number it holds (nil: none, `Compact<()>`).
    let compacts: [Int: RuntimeMetadata.Primitive?]
    /// A reachable bit sequence → its store's width in bytes and whether its order is `Lsb0`.
    let bitSequences: [Int: (width: Int, lsb0: Bool)]
    /// The reachable types that are always zero bytes long.
    let zeroSized: Set<Int>

    /// Types visited under compacts and bit sequences, for one registry. Real runtimes need about
    /// 500 (Polkadot 453, Kusama 505: a compact wraps a number, or a struct of one); the limit is
    /// 200 times that, so long chains under many compacts are refused rather than walked quadratically.
    static let walkLimit = 100_000

    public init(_ metadata: RuntimeMetadata) throws(PolkadotError) {
        guard metadata.version == 15, let extrinsic = metadata.extrinsic, let call = extrinsic.callType,
            let address = extrinsic.addressType, let signature = extrinsic.signatureType
        else {
            throw PolkadotError(.unsupported, "the metadata hash is defined for V15 metadata with its extrinsic description only")
        }
        (self.extrinsic, callType, addressType, signatureType) = (extrinsic, call, address, signature)
        func type(_ id: Int) throws(PolkadotError) -> RuntimeMetadata.TypeInfo {
            guard let type = metadata.types[id] else {
                throw PolkadotError(.invalidPayload, "the metadata names type \(id) but does not define it")
            }
            return type
        }
        // Every type reachable from the extrinsic; compacts and bit sequences end the walk (the
        // types under them are folded into the reference to them).
        var reachable: [Int: RuntimeMetadata.TypeInfo] = [:]
        var stack =
            ([call, address, signature] + extrinsic.signedExtensions.flatMap { [$0.type, $0.additionalSigned] }).reversed()
            as [Int]
        while let id = stack.popLast() {
            guard reachable[id] == nil else { continue }
            let info = try type(id)
            reachable[id] = info
            switch info.definition {
            case .composite(let fields): stack += fields.reversed().map(\.type)
            case .variant(let variants):
                var indices = Set<UInt8>()
                for variant in variants where !indices.insert(variant.index).inserted {
                    throw PolkadotError(
                        .invalidPayload,
                        "the metadata's \(info.path.last?.prefix(64) ?? "enum") gives two variants the index \(variant.index)")
                }
                stack += variants.flatMap { $0.fields.map(\.type) }.reversed()
            case .sequence(let inner), .array(_, let inner): stack.append(inner)
            case .tuple(let members): stack += members.reversed()
            case .primitive, .compact, .bitSequence: break
            }
        }
        types = reachable

        var left = Self.walkLimit
        // The primitives found walking down from `id` (each type once), as the reference
        // implementation's collector finds them: through fields, variants, sequences, arrays,
        // tuples, compacts and bit sequences (`id` itself may be the primitive).
        func primitives(under id: Int) throws(PolkadotError) -> [RuntimeMetadata.Primitive] {
            var found: [RuntimeMetadata.Primitive] = []
            var visited: Set<Int> = []
            var stack = [try type(id).definition]
            while let definition = stack.popLast() {
                left -= 1
                guard left >= 0 else { throw PolkadotError(.invalidPayload, "the metadata's types nest too deeply under its compacts") }
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
        var compacts: [Int: RuntimeMetadata.Primitive?] = [:]
        var bitSequences: [Int: (width: Int, lsb0: Bool)] = [:]
        for (id, info) in reachable.sorted(by: { $0.key < $1.key }) {
            switch info.definition {
            case .compact:
                let found = try primitives(under: id)
                guard found.count <= 1 else { throw PolkadotError(.invalidPayload, "a compact holds more than one number") }
                switch found.first {
                case nil, .u8?, .u16?, .u32?, .u64?, .u128?, .u256?: compacts[id] = .some(found.first)
                default: throw PolkadotError(.invalidPayload, "a compact holds a signed or non-numeric type")
                }
            case .bitSequence(let store, let order):
                let found = try primitives(under: store)
                let width: Int? =
                    switch found.count == 1 ? found[0] : nil {
                    case .u8: 1
                    case .u16: 2
                    case .u32: 4
                    case .u64: 8
                    default: nil
                    }
                guard let width else { throw PolkadotError(.invalidPayload, "a bit sequence's store type is not u8, u16, u32 or u64") }
                guard let orderName = try type(order).path.first(where: { $0 == "Lsb0" || $0 == "Msb0" }) else {
                    throw PolkadotError(.invalidPayload, "a bit sequence's order type is neither Lsb0 nor Msb0")
                }
                bitSequences[id] = (width, orderName == "Lsb0")
            default: break
            }
        }
        (self.compacts, self.bitSequences) = (compacts, bitSequences)
        zeroSized = Self.zeroSizedTypes(reachable)
    }

    /// Type `id`, when the hash covers it.
    func type(_ id: Int) throws(PolkadotError) -> RuntimeMetadata.TypeInfo {
        guard let type = types[id] else { throw PolkadotError(.invalidPayload, "type \(id) is not covered by the metadata hash") }
        return type
    }

    /// Type `id`, when the hash covers it (nil otherwise).
    public func typeInfo(_ id: Int) -> RuntimeMetadata.TypeInfo? { types[id] }

    /// The registry ids the hash covers (for tests: nothing else can be read).
    public var coveredTypeIDs: Set<Int> { Set(types.keys) }

    /// Whether a value of type `id` is always zero bytes long (`()`, an empty struct, `[T; 0]`, or
    /// made only of such). Each type is looked at once (`zeroSized`, computed with the registry).
    func isZeroSized(_ id: Int) -> Bool { zeroSized.contains(id) }

    /// The reachable types that are zero bytes long: found by rounds over the registry until nothing
    /// changes, each round linear, so no shape of types costs more than their count squared in the
    /// worst case and their count in practice (a few rounds).
    static func zeroSizedTypes(_ types: [Int: RuntimeMetadata.TypeInfo]) -> Set<Int> {
        var zero = Set<Int>()
        var changed = true
        var rounds = 0
        while changed && rounds < 64 {
            changed = false
            rounds += 1
            for (id, info) in types where !zero.contains(id) {
                let isZero: Bool
                switch info.definition {
                case .composite(let fields): isZero = fields.allSatisfy { zero.contains($0.type) }
                case .tuple(let members): isZero = members.allSatisfy { zero.contains($0) }
                case .array(let length, let inner): isZero = length == 0 || zero.contains(inner)
                default: isZero = false
                }
                if isZero {
                    zero.insert(id)
                    changed = true
                }
            }
        }
        return zero
    }
}
