/// A signing payload read back with the runtime's own types (DESIGN §4.8, "Bytes round-trip" and
/// "Layout pinned"): what a verified page may say, each field decoded from the bytes to be signed.
public struct PayloadReading: Sendable, Equatable {
    /// The call, decoded through the hashed types.
    public let call: DecodedCall
    /// The asset a fee is paid in, as its type decodes it (`ChargeAssetTxPayment`); nil when the
    /// runtime has no such field or it is `None`.
    public let assetId: String?
}

extension HashedRegistry {
    /// Whether `CheckMetadataHash` is the last extension that adds signed data: every extension
    /// after it adds nothing, to the transaction or to the signed data. Then its `Some(hash)` is the
    /// payload's last 33 bytes, and a chain checks that the hash is its own there — a chain whose own
    /// layout put other data last would have to find its block or genesis hash equal to Keyfob's
    /// metadata hash (docs/security.md).
    public var pinsMetadataHashLast: Bool {
        let extensions = extrinsic.signedExtensions
        guard let at = extensions.firstIndex(where: { $0.identifier == "CheckMetadataHash" }) else { return false }
        return extensions[(at + 1)...].allSatisfy { isZeroSized($0.type) && isZeroSized($0.additionalSigned) }
    }

    /// Decodes `payload`'s signing bytes back, in order: the call, then each signed extension's extra
    /// value, then each one's additional-signed value, every one by its type in this registry. Each
    /// extension's bytes must be exactly what Keyfob encoded from the payload's fields, and every byte
    /// must be read — or it throws and nothing is signed: no field is an opaque blob, and no field's
    /// bytes can be read as another's.
    public func readBack(_ payload: SignerPayload, decoder: CallDecoder) throws(PolkadotError) -> PayloadReading {
        let extensions = extrinsic.signedExtensions
        guard payload.signedExtensions == extensions.map(\.identifier) else {
            throw PolkadotError(.invalidPayload, "signedExtensions is not this runtime's own list")
        }
        guard pinsMetadataHashLast, payload.mode == 1, let hash = payload.metadataHash else {
            throw PolkadotError(.invalidPayload, "the payload does not end with the metadata hash")
        }
        let bytes = payload.encoded
        guard bytes.suffix(33).elementsEqual([1] + hash) else {
            throw PolkadotError(.invalidPayload, "the payload does not end with the metadata hash")
        }
        // What each extension writes, by itself, in payload order: every extension's extra value,
        // then every one's additional-signed value. Two that share a field (polkadot-js writes it
        // once) would lay the transaction out otherwise than the runtime reads it.
        var parts: [(identifier: String, type: Int, isExtra: Bool, expected: [UInt8])] = []
        for isExtra in [true, false] {
            for signedExtension in extensions {
                guard let fields = payload.encodedFields(of: signedExtension.identifier) else {
                    throw PolkadotError(.unknownExtension, "Keyfob cannot encode \(signedExtension.identifier.prefix(64))")
                }
                parts.append(
                    isExtra
                        ? (signedExtension.identifier, signedExtension.type, true, fields.extra)
                        : (signedExtension.identifier, signedExtension.additionalSigned, false, fields.additional))
            }
        }
        guard payload.method + parts.flatMap(\.expected) == bytes else {
            throw PolkadotError(.invalidPayload, "two of the runtime's signed extensions write the same field")
        }
        var reader = ScaleReader(bytes)
        let call = try decoder.call(from: &reader)
        guard reader.offset == payload.method.count else {
            throw PolkadotError(.invalidPayload, "the call's bytes are not the call the runtime reads")
        }
        var assetId: String?
        for part in parts {
            let start = reader.offset
            if part.isExtra, part.identifier == "ChargeAssetTxPayment" {
                assetId = try assetField(part.type, decoder: decoder, from: &reader)
            } else {
                _ = try decoder.value(part.type, from: &reader)
            }
            guard bytes[start..<reader.offset].elementsEqual(part.expected) else {
                throw PolkadotError(
                    .invalidPayload, "\(part.identifier) does not read back as what the page shows (its type takes other bytes)")
            }
        }
        guard reader.isAtEnd else { throw PolkadotError(.invalidPayload, "the payload has \(reader.remaining) bytes no type reads") }
        return PayloadReading(call: call, assetId: assetId)
    }

    /// `ChargeAssetTxPayment`'s extra, `{ tip, asset_id: Option<AssetId> }`: the asset as its type
    /// decodes it, nil for `None`.
    private func assetField(_ id: Int, decoder: CallDecoder, from reader: inout ScaleReader) throws(PolkadotError) -> String? {
        guard case .composite(let fields) = try type(id).definition, fields.count == 2, fields[1].name == "asset_id",
            try type(fields[1].type).path.last == "Option"
        else {
            throw PolkadotError(.invalidPayload, "ChargeAssetTxPayment is not { tip, asset_id } in this runtime")
        }
        _ = try decoder.value(fields[0].type, from: &reader)
        let isSome = reader.offset < reader.bytes.count && reader.bytes[reader.offset] != 0
        let asset = try decoder.value(fields[1].type, from: &reader)
        guard isSome else { return nil }
        return asset.hasPrefix("Some(") && asset.hasSuffix(")") ? String(asset.dropFirst(5).dropLast()) : asset
    }
}
