import Foundation
import KeyfobCrypto
import Polkadot

/// What Keyfob can stand behind in a transaction before its owner sees it (#42, #54; DESIGN §4.8:
/// "what the page says is what is signed").
///
/// - *Verified*: the payload carries `CheckMetadataHash` mode 1 with the RFC-0078 hash Keyfob
///   computed from the V15 metadata the dapp provided (of the payload's spec version), with the SS58
///   prefix, decimals and token the dapp gave; that runtime's `CheckMetadataHash` is the last
///   extension adding signed data (so the hash is the payload's last 33 bytes); and the payload reads
///   back whole with the runtime's hashed types (`HashedRegistry.readBack`). The chain then refuses
///   the signature if the metadata (and so the decoded call) was not its own. A mode-0 payload for
///   such a chain is made verified: Keyfob sets mode 1 and its hash, and answers the signed
///   transaction with the signature.
/// - The signed extensions must be the chain's own list, in its order: a verified runtime's, else a
///   known genesis hash's (Keyfob's own lists, whatever metadata says), else the provided runtime's.
///   Any other list lets a dapp move bytes between the call and the extensions, so it is refused
///   whatever the account allows; so is a payload whose bytes do not read back.
/// - Anything else is *unverified*: refused unless the account's owner allowed blind signing, and
///   then only with no fee asset (`assetId` is read by its type, which needs verified metadata).
struct TransactionCheck {
    /// The metadata a verified payload is bound to, and what its hash committed to.
    struct Bound {
        let registry: HashedRegistry
        let prefix: UInt16
        let decimals: Int
        let token: String
        /// The signer as the runtime writes it in a transaction (`MultiAddress::Id` or a bare
        /// `AccountId32`); nil when Keyfob cannot build its transactions.
        let signer: [UInt8]?
        /// The payload as the runtime's hashed types read it back: what the page says.
        let reading: PayloadReading
    }

    enum Verdict {
        case verified(Bound)
        /// Why Keyfob cannot check it, in a sentence a dapp developer and the account's owner can act on.
        case unverified(String)
    }

    /// The payload to sign: the dapp's, or with mode 1 and Keyfob's hash set.
    let payload: SignerPayload
    let verdict: Verdict
    /// Keyfob set the metadata hash: the dapp must get the signed transaction, since its own
    /// payload (mode 0) is not what was signed.
    let setHash: Bool

    var bound: Bound? {
        if case .verified(let bound) = verdict { return bound }
        return nil
    }

    /// Checks `payload` against the metadata `definition` the dapp provided for its chain (nil:
    /// none). Throws when the extension list is not the chain's own, a claimed hash is wrong, or the
    /// payload does not read back with the runtime's types.
    static func check(_ payload: SignerPayload, definition: MetadataDefinition?, setHashIfMissing: Bool) throws(PolkadotError)
        -> TransactionCheck
    {
        let known = KnownChains.byGenesis[PolkadotHex.encode(payload.genesisHash)]
        var runtime: MetadataHashes.Runtime?
        var whyNot: String
        if let definition, let provided = definition.providedRuntime {
            if let read = provided, let version = read.metadata.runtimeVersion {
                if version.specVersion != payload.specVersion {
                    whyNot =
                        "the metadata the site provided is of spec version \(version.specVersion), the transaction's \(payload.specVersion)"
                } else if read.metadata.extrinsic?.signedExtensions.contains(where: { $0.identifier == "CheckMetadataHash" }) != true {
                    whyNot = "this chain does not check a metadata hash (its runtime has no CheckMetadataHash)"
                } else {
                    runtime = read
                    whyNot = ""
                }
            } else {
                whyNot = "the metadata the site provided does not read"
            }
        } else if definition != nil {
            whyNot = "the site provided only the calls' metadata (metaCalls), which cannot be checked against the chain; it must send rawMetadata"
        } else {
            whyNot = "the site provided no metadata for this chain"
        }

        if let runtime, let definition {
            switch try verify(payload, runtime: runtime, definition: definition, setHashIfMissing: setHashIfMissing) {
            case .success(let verified): return verified
            case .failure(let why): whyNot = why.message
            }
        }

        // Unverified: the chain's own extension list, whatever else holds — Keyfob's own for a
        // chain it knows (metadata that is not verified chooses nothing), else the runtime's.
        if let known {
            guard known.extensionLists.contains(payload.signedExtensions) else {
                throw PolkadotError(
                    .invalidPayload,
                    "signedExtensions is not \(known.name)'s list (\(known.extensionLists[0].joined(separator: ", "))); nothing was signed"
                )
            }
        } else if let runtime {
            let own = runtime.metadata.extrinsic?.signedExtensions.map(\.identifier) ?? []
            guard payload.signedExtensions == own else {
                throw PolkadotError(
                    .invalidPayload,
                    "signedExtensions is not this runtime's own list (\(own.joined(separator: ", "))); nothing was signed")
            }
        } else {
            throw PolkadotError(
                .invalidPayload,
                "Keyfob cannot tell which signed extensions this chain has (\(whyNot)): the site must provide the runtime's V15 metadata (rawMetadata) for a chain with CheckMetadataHash; nothing was signed"
            )
        }
        // Without types to read it by, a fee asset would be an opaque blob in the signed bytes.
        guard payload.assetId == nil else {
            throw PolkadotError(
                .invalidPayload,
                "assetId can only be signed when Keyfob checks the transaction with the runtime's metadata (\(whyNot)); nothing was signed")
        }
        return TransactionCheck(payload: payload, verdict: .unverified(whyNot), setHash: false)
    }

    /// The verified check, or why this payload is not verified (a sentence). Throws when the payload
    /// cannot be signed at all: not the runtime's list, a wrong claimed hash, bytes that do not read back.
    private static func verify(
        _ payload: SignerPayload, runtime: MetadataHashes.Runtime, definition: MetadataDefinition, setHashIfMissing: Bool
    ) throws(PolkadotError) -> Result<TransactionCheck, PolkadotError> {
        func not(_ why: String) -> Result<TransactionCheck, PolkadotError> { .failure(PolkadotError(.invalidPayload, why)) }
        let registry: HashedRegistry
        switch runtime.registry {
        case .success(let hashed): registry = hashed
        case .failure(let error): return not("the site's metadata cannot be hashed (RFC-0078: \(error.message))")
        }
        let own = registry.extrinsic.signedExtensions.map(\.identifier)
        guard payload.signedExtensions == own else {
            throw PolkadotError(
                .invalidPayload,
                "signedExtensions is not this runtime's own list (\(own.joined(separator: ", "))); nothing was signed")
        }
        guard let version = runtime.metadata.runtimeVersion, let prefix = definition.ss58Format.flatMap(UInt16.init(exactly:)),
            let decimals = definition.tokenDecimals.flatMap(UInt8.init(exactly:)), let token = definition.tokenSymbol
        else { return not("the site's metadata lacks the SS58 prefix, decimals or token symbol") }
        let extra = MerkleizedMetadata.ExtraInfo(
            specVersion: version.specVersion, specName: version.specName, base58Prefix: prefix, decimals: decimals, tokenSymbol: token)
        guard let hash = MetadataHashes.shared.hash(runtime, extra) else { return not("the site's metadata cannot be hashed (RFC-0078)") }
        guard registry.pinsMetadataHashLast else {
            return not(
                "in this runtime CheckMetadataHash is not the last extension that adds signed data, so its hash cannot be told from other fields")
        }
        let signer = encodedSigner(registry, accountId: payload.accountId)
        let signed: SignerPayload
        if payload.mode == 1 {
            guard let claimed = payload.metadataHash, constantTimeEqual(claimed, hash) else {
                throw PolkadotError(
                    .invalidPayload,
                    "metadataHash is not the hash (RFC-0078) of the metadata this site provided for spec \(version.specVersion); nothing was signed"
                )
            }
            signed = payload
        } else {
            // Mode 0: Keyfob checks the hash itself, if it can hand back the transaction it signed.
            guard setHashIfMissing, signer != nil, multiSignature(registry) else {
                return not(
                    setHashIfMissing
                        ? "the transaction leaves the metadata check off (mode 0), and Keyfob cannot build this chain's transactions to turn it on"
                        : "the transaction leaves the metadata check off (mode 0)")
            }
            signed = payload.checkingMetadataHash(hash)
        }
        let decoder = CallDecoder(hashed: registry, ss58Prefix: prefix, decimals: Int(decimals), token: token)
        let reading = try registry.readBack(signed, decoder: decoder)
        let bound = Bound(registry: registry, prefix: prefix, decimals: Int(decimals), token: token, signer: signer, reading: reading)
        return .success(TransactionCheck(payload: signed, verdict: .verified(bound), setHash: signed.mode != payload.mode))
    }

    /// `MultiAddress::Id` is variant 0 before the account id; a runtime whose address is the
    /// account id itself writes it bare. Anything else (AccountId20 chains, other address types): nil.
    static func encodedSigner(_ registry: HashedRegistry, accountId: [UInt8]) -> [UInt8]? {
        guard accountId.count == 32, let info = registry.typeInfo(registry.addressType) else { return nil }
        switch info.path.last {
        case "MultiAddress": return [0] + accountId
        case "AccountId32": return accountId
        default: return nil
        }
    }

    static func multiSignature(_ registry: HashedRegistry) -> Bool {
        registry.typeInfo(registry.signatureType)?.path.last == "MultiSignature"
    }
}

/// What Keyfob keeps of a dapp's `MetadataDef` (`pub(metadata.provide)`), per dapp and chain.
struct MetadataDefinition: Codable, Sendable {
    var genesisHash: String
    var specVersion: Int
    var chain: String?
    var tokenSymbol: String?
    var tokenDecimals: Int?
    var ss58Format: Int?
    /// The runtime's full V15 metadata, 0x-hex, as the dapp sends it: what the RFC-0078 hash is
    /// computed from. Kept apart from the JSON (`runtime`), stored once by its hash.
    var rawMetadata: String?
    /// polkadot-js's calls-only metadata, base64: decodes a call for an unverified display.
    var metaCalls: String?
    /// Whether the dapp provided the runtime's metadata, and that runtime read (nil when its
    /// stored bytes do not read). Not part of the stored JSON.
    var providedRuntime: MetadataHashes.Runtime?? = nil

    enum CodingKeys: String, CodingKey {
        case genesisHash, specVersion, chain, tokenSymbol, tokenDecimals, ss58Format, rawMetadata, metaCalls
    }
}
