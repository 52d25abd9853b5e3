/// A call decoded with runtime metadata, as the approval page shows it:
/// `Balances.transfer_keep_alive(dest: Id(15oF4…), value: 1 DOT)`.
public struct DecodedCall: Sendable, Equatable {
    public let pallet: String
    public let call: String
    public let arguments: [Argument]

    public struct Argument: Sendable, Equatable {
        public let name: String
        public let value: String
        /// How many items the argument holds, when it is a list (a batch's calls, a nomination's targets).
        public var count: Int? = nil
        /// The calls the argument is, when it is a call or a list of calls (a batch's, a proxy's), each whole.
        public var calls: [DecodedCall]? = nil

        public init(name: String, value: String, count: Int? = nil, calls: [DecodedCall]? = nil) {
            (self.name, self.value, self.count, self.calls) = (name, value, count, calls)
        }
    }

    public init(pallet: String, call: String, arguments: [Argument]) {
        (self.pallet, self.call, self.arguments) = (pallet, call, arguments)
        text = "\(pallet).\(call)(" + arguments.map { "\($0.name): \($0.value)" }.joined(separator: ", ") + ")"
    }

    /// `Pallet.call(name: value, …)`, made once.
    public let text: String

    /// The calls this one makes (a batch's or a proxy's), in order, every one of them.
    public var innerCalls: [DecodedCall] { arguments.flatMap { $0.calls ?? [] } }
}

/// Decodes a call's bytes with runtime metadata, with bounded work: at most `maxSteps` values, 24
/// levels deep. Every value is shown whole (a batch's calls, every item of a list); a call that does
/// not consume exactly its bytes is refused: what is shown is what is signed. Text the call carries
/// has its hidden characters escaped (`VisibleText`).
///
/// Two ways to make one, and only the first may word a verified page:
/// - `init(hashed:)` reads through `HashedRegistry`: the call from the `RuntimeCall` type's variants
///   (pallet) and their call enums, every argument by a type the RFC-0078 hash covers;
/// - `init(siteMetadata:)` reads whatever the site sent (V14 and calls-only metadata included, the
///   pallets from the pallet list): the site's own words, shown as such.
public struct CallDecoder: Sendable {
    let types: [Int: RuntimeMetadata.TypeInfo]
    /// The `RuntimeCall` enum: pallets as variants, each holding its call enum.
    let callType: Int
    let bitSequences: [Int: (width: Int, lsb0: Bool)]
    /// A compact → the number it holds, as the hash sees it (nil: `Compact<()>`, zero bytes).
    let compacts: [Int: RuntimeMetadata.Primitive?]
    public let ss58Prefix: UInt16
    public let decimals: Int?
    public let token: String?
    static let maxSteps = 50_000

    public init(hashed registry: HashedRegistry, ss58Prefix: UInt16, decimals: Int?, token: String?) {
        (types, callType, bitSequences, compacts) = (registry.types, registry.callType, registry.bitSequences, registry.compacts)
        (self.ss58Prefix, self.decimals, self.token) = (ss58Prefix, decimals, token)
    }

    public init(siteMetadata metadata: RuntimeMetadata, ss58Prefix: UInt16, decimals: Int?, token: String?) {
        var types = metadata.types
        if metadata.version == 15, let call = metadata.extrinsic?.callType {
            callType = call
        } else if let outer = Self.outerCallEnum(metadata) {
            callType = outer
        } else {
            // V14 names no call type: one made from the pallet list, under an id no type has.
            callType = (types.keys.max() ?? 0) + 1
            let pallets = metadata.callPallets.sorted { $0.key < $1.key }.map { index, pallet in
                RuntimeMetadata.Variant(name: pallet.name, fields: [.init(name: nil, type: pallet.callType, typeName: nil)], index: index)
            }
            types[callType] = .init(path: ["RuntimeCall"], definition: .variant(pallets))
        }
        var bits: [Int: (width: Int, lsb0: Bool)] = [:]
        var compacts: [Int: RuntimeMetadata.Primitive?] = [:]
        for (id, info) in types {
            if case .compact(var inner) = info.definition {
                // The number under a compact (a struct of one field, or `()`), a few levels down.
                var found: RuntimeMetadata.Primitive?? = nil
                for _ in 0..<8 {
                    switch types[inner]?.definition {
                    case .primitive(let p)?: found = .some(p)
                    case .composite(let fields)? where fields.count == 1: inner = fields[0].type
                    case .composite(let fields)? where fields.isEmpty: found = .some(nil)
                    case .tuple(let members)? where members.isEmpty: found = .some(nil)
                    default: found = .some(.u128)
                    }
                    if found != nil { break }
                }
                compacts[id] = found ?? .some(.u128)
            }
            guard case .bitSequence(let store, let order) = info.definition else { continue }
            let width: Int =
                switch types[store]?.definition {
                case .primitive(.u16)?: 2
                case .primitive(.u32)?: 4
                case .primitive(.u64)?: 8
                default: 1
                }
            bits[id] = (width, types[order]?.path.contains("Msb0") != true)
        }
        (self.types, self.bitSequences, self.compacts) = (types, bits, compacts)
        (self.ss58Prefix, self.decimals, self.token) = (ss58Prefix, decimals, token)
    }

    /// V14's `RuntimeCall`: the enum whose variants are the pallets with calls, each holding its call enum.
    private static func outerCallEnum(_ metadata: RuntimeMetadata) -> Int? {
        metadata.types.first { _, info in
            guard case .variant(let variants) = info.definition, variants.count == metadata.callPallets.count, !variants.isEmpty else {
                return false
            }
            return variants.allSatisfy { $0.fields.count == 1 && metadata.callPallets[$0.index]?.callType == $0.fields[0].type }
        }?.key
    }

    public func decode(_ call: [UInt8]) throws(PolkadotError) -> DecodedCall {
        var walker = Walker(decoder: self, reader: ScaleReader(call))
        let decoded = try walker.call(depth: 0)
        guard walker.reader.isAtEnd else {
            throw PolkadotError(.invalidPayload, "the call has \(walker.reader.remaining) bytes more than this metadata describes")
        }
        return decoded
    }

    /// Reads one value of type `id` from `reader` as text (what a signed extension adds).
    func value(_ id: Int, from reader: inout ScaleReader) throws(PolkadotError) -> String {
        var walker = Walker(decoder: self, reader: reader)
        defer { reader = walker.reader }
        return try walker.value(id, typeName: nil, depth: 0)
    }

    /// Reads the call at the reader's position (the start of a signing payload).
    func call(from reader: inout ScaleReader) throws(PolkadotError) -> DecodedCall {
        var walker = Walker(decoder: self, reader: reader)
        defer { reader = walker.reader }
        return try walker.call(depth: 0)
    }

    private func type(_ id: Int) throws(PolkadotError) -> RuntimeMetadata.TypeInfo {
        guard let info = types[id] else { throw PolkadotError(.invalidPayload, "the metadata lacks type \(id)") }
        return info
    }

    private static func name(_ text: String) -> String { VisibleText.escaped(text).text }

    /// What one call may write as text (its values and names, before they are joined): a page
    /// shows it whole, or the call is not shown at all.
    static let maxText = 512 * 1024

    /// Pallets whose balance arguments are the chain's own token (the one the hash names); a
    /// balance anywhere else (an asset's, a foreign one) is shown as a plain number.
    static let nativeBalancePallets: Set<String> = [
        "Balances", "Staking", "NominationPools", "ConvictionVoting", "Vesting", "Crowdloan", "Bounties", "ChildBounties",
        "Treasury", "Proxy", "Multisig", "Identity", "Referenda", "Democracy", "Council", "FastUnstake",
    ]

    private struct Walker {
        let decoder: CallDecoder
        var reader: ScaleReader
        var steps = 0
        var written = 0
        /// The pallet of the call being read: whether its balances are the native token.
        var pallet = ""

        mutating func step(_ depth: Int) throws(PolkadotError) {
            steps += 1
            guard steps <= CallDecoder.maxSteps, depth < 24 else { throw PolkadotError(.invalidPayload, "the call is nested too deeply to show") }
        }

        /// Counts `text` against the call's text budget.
        mutating func wrote(_ text: String) throws(PolkadotError) -> String {
            written += text.utf8.count
            guard written <= CallDecoder.maxText else { throw PolkadotError(.invalidPayload, "the call is too long to show whole") }
            return text
        }

        /// A `RuntimeCall`: the pallet's variant, then its call enum's variant and the arguments.
        mutating func call(depth: Int) throws(PolkadotError) -> DecodedCall {
            try step(depth)
            guard case .variant(let pallets) = try decoder.type(decoder.callType).definition else {
                throw PolkadotError(.invalidPayload, "the metadata's call type is not an enum")
            }
            let palletIndex = try reader.byte()
            guard let pallet = pallets.first(where: { $0.index == palletIndex }), pallet.fields.count == 1,
                case .variant(let calls) = try decoder.type(pallet.fields[0].type).definition
            else { throw PolkadotError(.invalidPayload, "pallet \(palletIndex) has no calls in this metadata") }
            let callIndex = try reader.byte()
            guard let variant = calls.first(where: { $0.index == callIndex }) else {
                throw PolkadotError(.invalidPayload, "\(CallDecoder.name(pallet.name)) has no call \(callIndex) in this metadata")
            }
            let outer = self.pallet
            self.pallet = pallet.name
            defer { self.pallet = outer }
            var arguments: [DecodedCall.Argument] = []
            for (position, field) in variant.fields.enumerated() {
                let name = try wrote(field.name.map(CallDecoder.name) ?? "\(position)")
                arguments.append(try argument(name, field, depth: depth + 1))
            }
            let decoded = DecodedCall(
                pallet: try wrote(CallDecoder.name(pallet.name)), call: try wrote(CallDecoder.name(variant.name)), arguments: arguments)
            return decoded
        }

        /// One argument; a call or a list of calls is kept whole beside its text.
        private mutating func argument(_ name: String, _ field: RuntimeMetadata.Field, depth: Int) throws(PolkadotError)
            -> DecodedCall.Argument
        {
            if field.type == decoder.callType {
                let inner = try call(depth: depth)
                return .init(name: name, value: inner.text, calls: [inner])
            }
            if case .sequence(let item) = try decoder.type(field.type).definition {
                let count = try reader.length(minimumSize: isZeroSized(item) ? 0 : 1)
                guard item == decoder.callType else {
                    return .init(name: name, value: try list(count: count, item, depth: depth), count: count)
                }
                var calls: [DecodedCall] = []
                for _ in 0..<count { calls.append(try call(depth: depth + 1)) }
                return .init(name: name, value: "[" + calls.map(\.text).joined(separator: ", ") + "]", count: count, calls: calls)
            }
            return .init(name: name, value: try value(field.type, typeName: field.typeName, depth: depth))
        }

        mutating func value(_ id: Int, typeName: String?, depth: Int) throws(PolkadotError) -> String {
            try step(depth)
            if id == decoder.callType { return try call(depth: depth).text }
            let info = try decoder.type(id)
            let isBalance =
                typeName.map { $0.contains("Balance") && !$0.contains("Asset") } == true && CallDecoder.nativeBalancePallets.contains(pallet)
            switch info.definition {
            case .composite(let fields):
                if info.path.last == "AccountId32", fields.count == 1, isBytes32(fields[0].type) {
                    return try wrote(SS58.encode(accountId: try reader.take(32), prefix: decoder.ss58Prefix))
                }
                if fields.count == 1, fields[0].name == nil {
                    return try value(fields[0].type, typeName: fields[0].typeName ?? typeName, depth: depth + 1)
                }
                return try fieldList(fields, depth: depth, empty: "()")
            case .variant(let variants):
                let index = try reader.byte()
                guard let variant = variants.first(where: { $0.index == index }) else {
                    throw PolkadotError(.invalidPayload, "no variant \(index) of \(CallDecoder.name(info.path.last ?? "an enum"))")
                }
                let name = try wrote(CallDecoder.name(variant.name))
                return variant.fields.isEmpty ? name : name + (try fieldList(variant.fields, depth: depth, empty: ""))
            case .sequence(let inner):
                let count = try reader.length(minimumSize: isZeroSized(inner) ? 0 : 1)
                return try list(count: count, inner, depth: depth)
            case .array(let length, let inner):
                return try list(count: length, inner, depth: depth)
            case .tuple(let members):
                var parts: [String] = []
                for member in members { parts.append(try value(member, typeName: nil, depth: depth + 1)) }
                return "(" + parts.joined(separator: ", ") + ")"
            case .primitive(let primitive):
                return try wrote(try self.primitive(primitive, isBalance: isBalance))
            case .compact:
                // As the hash sees it: `Compact<()>` is zero bytes (SCALE writes nothing for it),
                // any other holds one unsigned number no wider than its type.
                let held: RuntimeMetadata.Primitive? = decoder.compacts[id] ?? .some(.u128)
                guard let number = held else { return "()" }
                let magnitude = try reader.compactBytes()
                let width: Int =
                    switch number {
                    case .u8: 1
                    case .u16: 2
                    case .u32: 4
                    case .u64: 8
                    case .u128: 16
                    default: 32
                    }
                guard magnitude.dropFirst(width).allSatisfy({ $0 == 0 }) else {
                    throw PolkadotError(.invalidPayload, "a compact number is wider than its type")
                }
                return try wrote(amount(magnitude, isBalance: isBalance))
            case .bitSequence:
                // SCALE's BitVec: the bit count, then whole store words.
                let bits = try reader.compact()
                let width = decoder.bitSequences[id]?.width ?? 1
                let bitsPerWord = 8 * width
                return try wrote(PolkadotHex.encode(try reader.take((bits + bitsPerWord - 1) / bitsPerWord * width)))
            }
        }

        private mutating func fieldList(_ fields: [RuntimeMetadata.Field], depth: Int, empty: String) throws(PolkadotError) -> String {
            guard !fields.isEmpty else { return empty }
            var parts: [String] = []
            for field in fields {
                let shown = try value(field.type, typeName: field.typeName, depth: depth + 1)
                if let name = field.name {
                    parts.append("\(try wrote(CallDecoder.name(name))): \(shown)")
                } else {
                    parts.append(shown)
                }
            }
            return fields.allSatisfy({ $0.name == nil }) ? "(" + parts.joined(separator: ", ") + ")" : " { " + parts.joined(separator: ", ") + " }"
        }

        /// Every item, none left out: the page folds a long list, it never drops one.
        private mutating func list(count: Int, _ inner: Int, depth: Int) throws(PolkadotError) -> String {
            if case .primitive(.u8)? = decoder.types[inner]?.definition {
                return try wrote(PolkadotHex.encode(try reader.take(count)))
            }
            guard count <= CallDecoder.maxSteps else { throw PolkadotError(.invalidPayload, "a list in the call is too long to show") }
            var shown: [String] = []
            for _ in 0..<count { shown.append(try value(inner, typeName: nil, depth: depth + 1)) }
            return "[" + shown.joined(separator: ", ") + "]"
        }

        private func isBytes32(_ id: Int) -> Bool {
            guard case .array(32, let inner)? = decoder.types[id]?.definition, case .primitive(.u8)? = decoder.types[inner]?.definition
            else { return false }
            return true
        }

        private func isZeroSized(_ id: Int) -> Bool {
            switch decoder.types[id]?.definition {
            case .tuple(let members)?: members.isEmpty
            case .composite(let fields)?: fields.isEmpty
            default: false
            }
        }

        private mutating func primitive(_ p: RuntimeMetadata.Primitive, isBalance: Bool) throws(PolkadotError) -> String {
            switch p {
            case .bool:
                switch try reader.byte() {
                case 0: return "false"
                case 1: return "true"
                default: throw PolkadotError(.invalidPayload, "a bool is 0 or 1")
                }
            case .char:
                guard let scalar = Unicode.Scalar(try reader.u32()) else { throw PolkadotError(.invalidPayload, "not a character") }
                return VisibleText.quoted(String(scalar), quote: "'")
            case .str:
                guard let text = String(validating: try reader.take(try reader.length()), as: UTF8.self) else {
                    throw PolkadotError(.invalidPayload, "a text argument is not UTF-8")
                }
                return VisibleText.quoted(text)
            case .u8, .u16, .u32, .u64, .u128, .u256:
                let widths: [RuntimeMetadata.Primitive: Int] = [.u8: 1, .u16: 2, .u32: 4, .u64: 8, .u128: 16, .u256: 32]
                return amount(try reader.take(widths[p]!), isBalance: isBalance)
            case .i8, .i16, .i32, .i64, .i128, .i256:
                let widths: [RuntimeMetadata.Primitive: Int] = [.i8: 1, .i16: 2, .i32: 4, .i64: 8, .i128: 16, .i256: 32]
                var bytes = try reader.take(widths[p]!)
                guard bytes.last! & 0x80 != 0 else { return Amount.decimal(bytes) }
                // Two's complement: the magnitude is the complement plus one.
                var carry = 1
                for i in bytes.indices {
                    let sum = Int(~bytes[i]) + carry
                    bytes[i] = UInt8(sum & 0xff)
                    carry = sum >> 8
                }
                return "-" + Amount.decimal(bytes)
            }
        }

        private func amount(_ littleEndian: [UInt8], isBalance: Bool) -> String {
            isBalance ? Amount.format(littleEndian, decimals: decoder.decimals, token: decoder.token) : Amount.decimal(littleEndian)
        }
    }
}

/// Integers as people read them.
public enum Amount {
    /// A little-endian integer in decimal, with `decimals` places and the token ("0.0125 DOT").
    public static func format(_ littleEndian: [UInt8], decimals: Int?, token: String?) -> String {
        var digits = decimal(littleEndian)
        guard let decimals, decimals > 0, decimals < 64, let token else { return digits }
        if digits.count <= decimals { digits = String(repeating: "0", count: decimals - digits.count + 1) + digits }
        var whole = String(digits.dropLast(decimals))
        var fraction = String(digits.suffix(decimals))
        while fraction.hasSuffix("0") { fraction.removeLast() }
        if whole.isEmpty { whole = "0" }
        return (fraction.isEmpty ? whole : "\(whole).\(fraction)") + " \(token)"
    }

    /// Base-10 digits of a little-endian magnitude (at most a few dozen bytes here).
    public static func decimal(_ littleEndian: [UInt8]) -> String {
        var number = Array(littleEndian.reversed().drop { $0 == 0 })  // big-endian, no leading zeros
        guard !number.isEmpty else { return "0" }
        var out: [Character] = []
        while !number.isEmpty {
            var remainder = 0
            var next: [UInt8] = []
            for byte in number {
                let value = remainder * 256 + Int(byte)
                remainder = value % 10
                if !next.isEmpty || value / 10 != 0 { next.append(UInt8(value / 10)) }
            }
            out.append(Character(String(remainder)))
            number = next
        }
        return String(out.reversed())
    }
}
