/// A call decoded with a dapp's metadata, as the approval page shows it:
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
    }

    public var text: String {
        "\(pallet).\(call)(" + arguments.map { "\($0.name): \($0.value)" }.joined(separator: ", ") + ")"
    }
}

/// Decodes a call's bytes against runtime metadata, with bounded work: at most `maxSteps` values,
/// 24 levels deep, long lists shortened in the text (still read whole, so every byte is accounted
/// for). A call that does not consume exactly its bytes is refused: what is shown is what is signed.
public struct CallDecoder: Sendable {
    public let metadata: RuntimeMetadata
    public let ss58Prefix: UInt16
    public let decimals: Int?
    public let token: String?
    static let maxSteps = 50_000

    public init(metadata: RuntimeMetadata, ss58Prefix: UInt16, decimals: Int?, token: String?) {
        self.metadata = metadata
        self.ss58Prefix = ss58Prefix
        self.decimals = decimals
        self.token = token
    }

    public func decode(_ call: [UInt8]) throws(PolkadotError) -> DecodedCall {
        var walker = Walker(decoder: self, reader: ScaleReader(call))
        let palletIndex = try walker.reader.byte()
        guard let pallet = metadata.callPallets[palletIndex], case .variant(let variants)? = metadata.types[pallet.callType]?.definition
        else { throw PolkadotError(.invalidPayload, "pallet \(palletIndex) has no calls in this metadata") }
        let callIndex = try walker.reader.byte()
        guard let variant = variants.first(where: { $0.index == callIndex }) else {
            throw PolkadotError(.invalidPayload, "\(pallet.name) has no call \(callIndex) in this metadata")
        }
        var arguments: [DecodedCall.Argument] = []
        for (position, field) in variant.fields.enumerated() {
            walker.topLevelCount = nil
            let value = try walker.value(field.type, typeName: field.typeName, depth: 0)
            arguments.append(.init(name: field.name ?? "\(position)", value: value, count: walker.topLevelCount))
        }
        guard walker.reader.isAtEnd else {
            throw PolkadotError(.invalidPayload, "the call has \(walker.reader.remaining) bytes more than this metadata describes")
        }
        return DecodedCall(pallet: pallet.name, call: variant.name, arguments: arguments)
    }

    private struct Walker {
        let decoder: CallDecoder
        var reader: ScaleReader
        var steps = 0
        /// The length of the argument being read, when the argument itself is a list.
        var topLevelCount: Int?

        mutating func value(_ id: Int, typeName: String?, depth: Int) throws(PolkadotError) -> String {
            steps += 1
            guard steps <= CallDecoder.maxSteps, depth < 24 else { throw PolkadotError(.invalidPayload, "the call is nested too deeply to show") }
            guard let info = decoder.metadata.types[id] else { throw PolkadotError(.invalidPayload, "the metadata lacks type \(id)") }
            let isBalance = typeName?.contains("Balance") == true
            switch info.definition {
            case .composite(let fields):
                if info.path.last == "AccountId32", fields.count == 1 {
                    return SS58.encode(accountId: try reader.take(32), prefix: decoder.ss58Prefix)
                }
                if fields.count == 1, fields[0].name == nil {
                    return try value(fields[0].type, typeName: fields[0].typeName ?? typeName, depth: depth + 1)
                }
                return try fieldList(fields, depth: depth, empty: "()")
            case .variant(let variants):
                let index = try reader.byte()
                guard let variant = variants.first(where: { $0.index == index }) else {
                    throw PolkadotError(.invalidPayload, "no variant \(index) of \(info.path.last ?? "an enum")")
                }
                return variant.fields.isEmpty ? variant.name : variant.name + (try fieldList(variant.fields, depth: depth, empty: ""))
            case .sequence(let inner):
                let count = try reader.length(minimumSize: isZeroSized(inner) ? 0 : 1)
                if depth == 0 { topLevelCount = count }
                return try list(count: count, inner, depth: depth)
            case .array(let length, let inner):
                return try list(count: length, inner, depth: depth)
            case .tuple(let members):
                return "(" + (try members.map { (m) throws(PolkadotError) in try value(m, typeName: nil, depth: depth + 1) }).joined(separator: ", ")
                    + ")"
            case .primitive(let primitive):
                return try self.primitive(primitive, isBalance: isBalance)
            case .compact:
                return amount(try reader.compactBytes(), isBalance: isBalance)
            case .bitSequence:
                let bits = try reader.compact()
                return PolkadotHex.encode(try reader.take((bits + 7) / 8))
            }
        }

        private mutating func fieldList(_ fields: [RuntimeMetadata.Field], depth: Int, empty: String) throws(PolkadotError) -> String {
            guard !fields.isEmpty else { return empty }
            var parts: [String] = []
            for field in fields {
                let shown = try value(field.type, typeName: field.typeName, depth: depth + 1)
                parts.append(field.name.map { "\($0): \(shown)" } ?? shown)
            }
            return fields.allSatisfy({ $0.name == nil }) ? "(" + parts.joined(separator: ", ") + ")" : " { " + parts.joined(separator: ", ") + " }"
        }

        private mutating func list(count: Int, _ inner: Int, depth: Int) throws(PolkadotError) -> String {
            if case .primitive(.u8)? = decoder.metadata.types[inner]?.definition {
                return PolkadotHex.encode(try reader.take(count))
            }
            guard count <= CallDecoder.maxSteps else { throw PolkadotError(.invalidPayload, "a list in the call is too long to show") }
            var shown: [String] = []
            for i in 0..<count {
                let item = try value(inner, typeName: nil, depth: depth + 1)
                if i < 16 { shown.append(item) }
            }
            if count > 16 { shown.append("… \(count - 16) more") }
            return "[" + shown.joined(separator: ", ") + "]"
        }

        private func isZeroSized(_ id: Int) -> Bool {
            switch decoder.metadata.types[id]?.definition {
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
                return "'\(scalar)'"
            case .str:
                return "\"" + (try reader.text()).prefix(256).replacingOccurrences(of: "\"", with: "\\\"") + "\""
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
