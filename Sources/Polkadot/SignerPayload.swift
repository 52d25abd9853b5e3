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
    public let mode: UInt8
    public let metadataHash: [UInt8]?

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

    /// Parses and checks every field; refuses what polkadot-js would not produce.
    public init(json: [String: Any]) throws(PolkadotError) {
        func hex(_ name: String, count: Int? = nil, max: Int = 1 << 20) throws(PolkadotError) -> [UInt8] {
            guard let text = json[name] as? String else { throw PolkadotError(.invalidPayload, "\(name) is missing") }
            guard let bytes = PolkadotHex.decode(text), bytes.count <= max, count == nil || bytes.count == count else {
                let size = count.map { " of \($0) bytes" } ?? ""
                throw PolkadotError(.invalidPayload, "\(name) must be 0x-prefixed hex\(size)")
            }
            return bytes
        }
        func number(_ name: String, maxBytes: Int) throws(PolkadotError) -> [UInt8] {
            let bigEndian = try hex(name, max: 64)
            let magnitude = Array(bigEndian.drop { $0 == 0 }.reversed())
            guard magnitude.count <= maxBytes else {
                throw PolkadotError(.invalidPayload, "\(name) is larger than a \(maxBytes * 8)-bit number")
            }
            return magnitude
        }
        func uint(_ magnitude: [UInt8]) -> UInt64 {
            magnitude.enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
        }

        guard let version = json["version"] as? Int, version == 4 else {
            throw PolkadotError(.unsupported, "only extrinsic version 4 payloads can be signed")
        }
        guard let address = json["address"] as? String, let decoded = SS58.decode(address) else {
            throw PolkadotError(.invalidAddress, "address is not an SS58 address")
        }
        guard let extensions = json["signedExtensions"] as? [String], extensions.count <= 64 else {
            throw PolkadotError(.invalidPayload, "signedExtensions must be a list of names")
        }
        if let unknown = extensions.first(where: { Self.knownExtensions[$0] == nil }) {
            throw PolkadotError(
                .unknownExtension,
                "this chain uses the signed extension \(unknown.prefix(64)), which Keyfob cannot encode; nothing was signed")
        }
        self.address = address
        accountId = decoded.accountId
        method = try hex("method")
        guard !method.isEmpty else { throw PolkadotError(.invalidPayload, "method is empty") }
        guard let era = Era(try hex("era", max: 2)) else {
            throw PolkadotError(.invalidPayload, "era is neither immortal (0x00) nor a valid mortal era")
        }
        self.era = era
        nonce = try number("nonce", maxBytes: 8)
        tip = try number("tip", maxBytes: 16)
        specVersion = UInt32(truncatingIfNeeded: uint(try number("specVersion", maxBytes: 4)))
        transactionVersion = UInt32(truncatingIfNeeded: uint(try number("transactionVersion", maxBytes: 4)))
        genesisHash = try hex("genesisHash", count: 32)
        blockHash = try hex("blockHash", count: 32)
        blockNumber = uint(try number("blockNumber", maxBytes: 8))
        signedExtensions = extensions
        // Option fields: polkadot-js writes the inner value's hex, or nothing / "0x" for None.
        if let text = json["assetId"] as? String, text != "0x" {
            guard let bytes = PolkadotHex.decode(text), bytes.count <= 256 else {
                throw PolkadotError(.invalidPayload, "assetId must be 0x-prefixed hex")
            }
            assetId = bytes
        } else {
            assetId = nil
        }
        let mode = json["mode"] as? Int ?? 0
        guard mode == 0 || mode == 1 else { throw PolkadotError(.invalidPayload, "mode is 0 or 1") }
        self.mode = UInt8(mode)
        if let text = json["metadataHash"] as? String, text != "0x" {
            metadataHash = try hex("metadataHash", count: 32)
        } else {
            metadataHash = nil
        }
        if mode == 1 && metadataHash == nil && extensions.contains("CheckMetadataHash") {
            throw PolkadotError(.invalidPayload, "mode 1 checks the metadata hash, so metadataHash is required")
        }
    }

    /// The SCALE bytes the signature covers (before the >256-byte hashing rule).
    public var encoded: [UInt8] {
        var extra: [Field] = []
        var additional: [Field] = []
        for name in signedExtensions {
            guard let fields = Self.knownExtensions[name] else { continue }
            for field in fields.extra where !extra.contains(field) { extra.append(field) }
            for field in fields.additional where !additional.contains(field) { additional.append(field) }
        }
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

    public static func wrap(_ data: [UInt8]) -> [UInt8] {
        let wrapped = data.count >= prefix.count + postfix.count && data.starts(with: prefix) && data.suffix(postfix.count).elementsEqual(postfix)
        return wrapped || data.starts(with: ethereum) ? data : prefix + data + postfix
    }
}
