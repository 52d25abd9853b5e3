import Foundation
import KeyfobCodecs
import KeyfobCrypto
import Nostr

/// polkadot-js's `SignerPayloadJSON` (what `signPayload` and `pub(extrinsic.sign)` carry), checked
/// and turned into the bytes an extrinsic's signature covers: polkadot-js's `ExtrinsicPayload` v4,
/// `toU8a({ method: true })` — the call without its length prefix, then every listed signed
/// extension's extra fields, then their additional-signed fields, in list order.
public struct SignerPayload: Sendable, Equatable {
    public let address: String
    public let accountId: [UInt8]
    public let method: [UInt8]
    public let era: Era
    public let nonce: [UInt8]  // little-endian magnitude
    public let tip: [UInt8]  // little-endian magnitude
    public let specVersion: UInt32
    public let transactionVersion: UInt32
    public let genesisHash: [UInt8]
    public let blockHash: [UInt8]
    public let blockNumber: UInt64
    public let signedExtensions: [String]
    public let assetId: [UInt8]?
    public private(set) var mode: UInt8
    public private(set) var metadataHash: [UInt8]?
    /// The dapp said it takes a `signedTransaction` back.
    public let withSignedTransaction: Bool

    /// The fields signed extensions add, by polkadot-js's names.
    public enum Field: Hashable, Sendable {
        case era, nonce, tip, assetId, mode, specVersion, transactionVersion, genesisHash, blockHash, metadataHash
    }

    /// Whether one of the listed extensions puts `field` in the signed bytes. A field none of them
    /// encodes is not signed: the page must not present it as part of the transaction.
    public func signs(_ field: Field) -> Bool {
        signedExtensions.contains { name in
            Self.knownExtensions[name].map { $0.extra.contains(field) || $0.additional.contains(field) } ?? false
        }
    }

    /// Every signed extension Keyfob can encode (polkadot-js's `allExtensions`, plus `CheckMetadataHash`
    /// and Cumulus's `StorageWeightReclaim`): its extra fields and its additional-signed fields.
    /// Anything else is refused — its bytes are unknown, so a signature over a guess would sign blind.
    static let knownExtensions: [String: (extra: [Field], additional: [Field])] = {
        let mortality: ([Field], [Field]) = ([.era], [.blockHash])
        var table: [String: (extra: [Field], additional: [Field])] = [
            "ChargeTransactionPayment": ([.tip], []),
            "ChargeAssetTxPayment": ([.tip, .assetId], []),
            "CheckEra": mortality,
            "CheckMortality": mortality,
            "CheckGenesis": ([], [.genesisHash]),
            "CheckNonce": ([.nonce], []),
            "CheckSpecVersion": ([], [.specVersion]),
            "CheckVersion": ([], [.specVersion]),
            "CheckTxVersion": ([], [.transactionVersion]),
            "CheckMetadataHash": ([.mode], [.metadataHash]),
        ]
        for empty in [
            "CheckBlockGasLimit", "CheckNonZeroSender", "CheckWeight", "LockStakingStatus", "ValidateEquivocationReport",
            "LimitParathreadCommits", "OnlyStakingAndClaims", "PrevalidateAttests", "RestrictFunctionality",
            "TransactionCallFilter", "ValidateDoubleVoteReports", "DisallowSigned", "StorageWeightReclaim",
        ] {
            table[empty] = ([], [])
        }
        return table
    }()

    /// polkadot-js's `SignerPayloadJSON` as sent: every field of one type (a number where hex is
    /// expected, or a string where a number is, is refused, never read as a default).
    public struct JSON: Codable, Sendable {
        public var address: String
        public var assetId: String?
        public var blockHash: String
        public var blockNumber: String
        public var era: String
        public var genesisHash: String
        public var metadataHash: String?
        public var method: String
        public var mode: Int?
        public var nonce: String
        public var signedExtensions: [String]
        public var specVersion: String
        public var tip: String
        public var transactionVersion: String
        public var version: Int
        /// The dapp takes a `signedTransaction` back (polkadot-js api's `withSignedTransaction`).
        public var withSignedTransaction: Bool?
    }

    /// Reads and checks a `SignerPayloadJSON` from its JSON text.
    public init(data: [UInt8]) throws(PolkadotError) {
        try self.init(try Self.decode(JSON.self, from: data))
    }

    /// `type` from JSON, a wrong or missing field named in the error.
    public static func decode<T: Decodable>(_ type: T.Type, from data: [UInt8]) throws(PolkadotError) -> T {
        do {
            return try JSONDecoder().decode(type, from: Data(data))
        } catch let DecodingError.typeMismatch(expected, context) {
            throw PolkadotError(.mistyped, "\(Self.field(context)) must be \(Self.kind(expected))")
        } catch let DecodingError.valueNotFound(expected, context) {
            throw PolkadotError(.mistyped, "\(Self.field(context)) must be \(Self.kind(expected))")
        } catch let DecodingError.keyNotFound(key, context) {
            let path = (context.codingPath + [key]).map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
            throw PolkadotError(.invalidPayload, "\(path.prefix(64)) is missing")
        } catch {
            throw PolkadotError(.mistyped, "the body is not a JSON object of the expected shape")
        }
    }

    private static func field(_ context: DecodingError.Context) -> String {
        let path = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        return path.isEmpty ? "the payload" : String(path.prefix(64))
    }

    private static func kind(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type: "an integer"
        case is Bool.Type: "true or false"
        case is [String].Type: "a list of strings"
        default: "of another type"
        }
    }

    /// Checks every field; refuses what polkadot-js would not produce.
    public init(_ json: JSON) throws(PolkadotError) {
        func hex(_ name: String, _ text: String, count: Int? = nil, max: Int = 1 << 20) throws(PolkadotError) -> [UInt8] {
            guard let bytes = PolkadotHex.decode(text), bytes.count <= max, count == nil || bytes.count == count else {
                let size = count.map { " of \($0) bytes" } ?? ""
                throw PolkadotError(.invalidPayload, "\(name) must be 0x-prefixed hex\(size)")
            }
            return bytes
        }
        func number(_ name: String, _ text: String, maxBytes: Int) throws(PolkadotError) -> [UInt8] {
            let bigEndian = try hex(name, text, max: 64)
            let magnitude = Array(bigEndian.drop { $0 == 0 }.reversed())
            guard magnitude.count <= maxBytes else {
                throw PolkadotError(.invalidPayload, "\(name) is larger than a \(maxBytes * 8)-bit number")
            }
            return magnitude
        }
        func uint(_ magnitude: [UInt8]) -> UInt64 {
            magnitude.enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
        }

        guard json.version == 4 else {
            throw PolkadotError(.unsupported, "only extrinsic version 4 payloads can be signed")
        }
        guard let decoded = SS58.decode(json.address) else {
            throw PolkadotError(.invalidAddress, "address is not an SS58 address")
        }
        let extensions = json.signedExtensions
        guard extensions.count <= 64 else { throw PolkadotError(.invalidPayload, "signedExtensions must be a list of names") }
        if let unknown = extensions.first(where: { Self.knownExtensions[$0] == nil }) {
            throw PolkadotError(
                .unknownExtension,
                "this chain uses the signed extension \(unknown.prefix(64)), which Keyfob cannot encode; nothing was signed")
        }
        guard Set(extensions).count == extensions.count else {
            throw PolkadotError(.invalidPayload, "signedExtensions lists an extension twice")
        }
        address = json.address
        accountId = decoded.accountId
        method = try hex("method", json.method)
        guard !method.isEmpty else { throw PolkadotError(.invalidPayload, "method is empty") }
        guard let era = Era(try hex("era", json.era, max: 2)) else {
            throw PolkadotError(.invalidPayload, "era is neither immortal (0x00) nor a valid mortal era")
        }
        self.era = era
        nonce = try number("nonce", json.nonce, maxBytes: 8)
        tip = try number("tip", json.tip, maxBytes: 16)
        specVersion = UInt32(truncatingIfNeeded: uint(try number("specVersion", json.specVersion, maxBytes: 4)))
        transactionVersion = UInt32(truncatingIfNeeded: uint(try number("transactionVersion", json.transactionVersion, maxBytes: 4)))
        genesisHash = try hex("genesisHash", json.genesisHash, count: 32)
        blockHash = try hex("blockHash", json.blockHash, count: 32)
        blockNumber = uint(try number("blockNumber", json.blockNumber, maxBytes: 8))
        signedExtensions = extensions
        // Option fields: polkadot-js writes the inner value's hex, or nothing / null / "0x" for None.
        if let text = json.assetId, text != "0x" {
            assetId = try hex("assetId", text, max: 256)
        } else {
            assetId = nil
        }
        let mode = json.mode ?? 0
        guard mode == 0 || mode == 1 else { throw PolkadotError(.invalidPayload, "mode is 0 or 1") }
        self.mode = UInt8(mode)
        if let text = json.metadataHash, text != "0x" {
            metadataHash = try hex("metadataHash", text, count: 32)
        } else {
            metadataHash = nil
        }
        if mode == 1 && metadataHash == nil && extensions.contains("CheckMetadataHash") {
            throw PolkadotError(.invalidPayload, "mode 1 checks the metadata hash, so metadataHash is required")
        }
        // Mode 0 signs None: a hash beside it would be signed as Some(hash), which no runtime accepts.
        if mode == 0 && metadataHash != nil {
            throw PolkadotError(.invalidPayload, "mode 0 leaves the metadata check off, so metadataHash must be absent")
        }
        withSignedTransaction = json.withSignedTransaction ?? false
    }

    /// The same payload with the metadata hash checked (`CheckMetadataHash` mode 1 and `hash`):
    /// what Keyfob signs when the dapp left the check off but gave the metadata to compute it.
    public func checkingMetadataHash(_ hash: [UInt8]) -> SignerPayload {
        var payload = self
        payload.mode = 1
        payload.metadataHash = hash
        return payload
    }

    /// The payload as polkadot-js writes it (what Keyfob stores and hands back).
    public var json: JSON {
        // Big-endian hex of at least `width` bytes, as polkadot-js writes numbers.
        func number(_ magnitude: [UInt8], width: Int) -> String {
            PolkadotHex.encode([UInt8](repeating: 0, count: max(0, width - magnitude.count)) + magnitude.reversed())
        }
        func number(_ value: UInt64, width: Int) -> String {
            number(Array(SCALE.littleEndian(value, width: 8).reversed().drop { $0 == 0 }.reversed()), width: width)
        }
        return JSON(
            address: address, assetId: assetId.map(PolkadotHex.encode), blockHash: PolkadotHex.encode(blockHash),
            blockNumber: number(blockNumber, width: 4),
            era: PolkadotHex.encode(era.encoded), genesisHash: PolkadotHex.encode(genesisHash),
            metadataHash: metadataHash.map(PolkadotHex.encode), method: PolkadotHex.encode(method), mode: Int(mode),
            nonce: number(nonce, width: 4), signedExtensions: signedExtensions,
            specVersion: number(UInt64(specVersion), width: 4), tip: number(tip, width: 16),
            transactionVersion: number(UInt64(transactionVersion), width: 4), version: 4,
            withSignedTransaction: withSignedTransaction ? true : nil)
    }

    /// The fields the listed extensions add, extra ones (carried in the transaction) first, then
    /// the additional-signed ones (signed only), each once, in list order.
    private var fieldOrder: (extra: [Field], additional: [Field]) {
        var extra: [Field] = []
        var additional: [Field] = []
        for name in signedExtensions {
            guard let fields = Self.knownExtensions[name] else { continue }
            for field in fields.extra where !extra.contains(field) { extra.append(field) }
            for field in fields.additional where !additional.contains(field) { additional.append(field) }
        }
        return (extra, additional)
    }

    /// The signed transaction (extrinsic v4, length-prefixed) carrying this payload: the signer as
    /// the runtime encodes an address, the signature as it encodes one, the extensions' extra
    /// fields, then the call.
    public func signedExtrinsic(signer: [UInt8], signature: [UInt8]) -> [UInt8] {
        var body: [UInt8] = [0x84] + signer + signature
        for field in fieldOrder.extra { body += encode(field) }
        body += method
        return SCALE.compact(UInt64(body.count)) + body
    }

    /// The SCALE bytes the signature covers (before the >256-byte hashing rule).
    public var encoded: [UInt8] {
        let (extra, additional) = fieldOrder
        var out = method
        for field in extra + additional { out += encode(field) }
        return out
    }

    /// What is signed: the payload, or its BLAKE2b-256 when longer than 256 bytes (as polkadot-js and
    /// Substrate both do).
    public var signingBytes: [UInt8] {
        let bytes = encoded
        return bytes.count > 256 ? blake2b256(bytes) : bytes
    }

    /// What extension `name` alone adds: its extra fields (carried in the transaction) and its
    /// additional-signed ones, as Keyfob encodes them; nil for an extension Keyfob cannot encode.
    public func encodedFields(of name: String) -> (extra: [UInt8], additional: [UInt8])? {
        guard let fields = Self.knownExtensions[name] else { return nil }
        return (fields.extra.flatMap(encode), fields.additional.flatMap(encode))
    }

    private func encode(_ field: Field) -> [UInt8] {
        switch field {
        case .era: era.encoded
        case .nonce: SCALE.compact(littleEndian: nonce)
        case .tip: SCALE.compact(littleEndian: tip)
        case .assetId: assetId.map { [1] + $0 } ?? [0]
        case .mode: [mode]
        case .specVersion: SCALE.littleEndian(UInt64(specVersion), width: 4)
        case .transactionVersion: SCALE.littleEndian(UInt64(transactionVersion), width: 4)
        case .genesisHash: genesisHash
        case .blockHash: blockHash
        case .metadataHash: metadataHash.map { [1] + $0 } ?? [0]
        }
    }
}

/// An extrinsic era: immortal (one zero byte) or mortal (two bytes: period and phase).
public struct Era: Sendable, Equatable {
    public let encoded: [UInt8]
    /// Nil for immortal.
    public let period: UInt64?
    public let phase: UInt64?

    /// polkadot-js's `MortalEra` decoding rules: period = 2 << (n mod 16), at least 4; phase below it.
    init?(_ bytes: [UInt8]) {
        if bytes == [0] {
            (encoded, period, phase) = (bytes, nil, nil)
            return
        }
        guard bytes.count == 2 else { return nil }
        let value = UInt64(bytes[0]) | UInt64(bytes[1]) << 8
        let period = UInt64(2) << (value % 16)
        let quantizeFactor = max(period >> 12, 1)
        let phase = (value >> 4) * quantizeFactor
        guard period >= 4, phase < period else { return nil }
        (encoded, self.period, self.phase) = (bytes, period, phase)
    }
}

/// `0x`-prefixed hex as polkadot-js writes it ("0x" alone is empty).
public enum PolkadotHex {
    public static func decode(_ text: String) -> [UInt8]? {
        guard text.hasPrefix("0x") || text.hasPrefix("0X") else { return nil }
        let digits = String(text.dropFirst(2))
        return digits.isEmpty ? [] : Hex.decode(digits)
    }

    public static func encode(_ bytes: [UInt8]) -> String { "0x" + Hex.encode(bytes) }
}

/// polkadot-js's `u8aWrapBytes`: what `signRaw` and `pub(bytes.sign)` sign — the data inside
/// `<Bytes>…</Bytes>`, unless it is already wrapped or is an Ethereum signed message.
public enum RawPayload {
    static let prefix = Array("<Bytes>".utf8)
    static let postfix = Array("</Bytes>".utf8)
    static let ethereum = Array("\u{19}Ethereum Signed Message:\n".utf8)

    /// Data polkadot-js signs unwrapped: an Ethereum signed message (its own prefix keeps it from
    /// being a transaction of an Ethereum chain, not of a Substrate one).
    public static func isEthereumMessage(_ data: [UInt8]) -> Bool { data.starts(with: ethereum) }

    public static func wrap(_ data: [UInt8]) -> [UInt8] {
        let wrapped = data.count >= prefix.count + postfix.count && data.starts(with: prefix) && data.suffix(postfix.count).elementsEqual(postfix)
        return wrapped || data.starts(with: ethereum) ? data : prefix + data + postfix
    }
}
