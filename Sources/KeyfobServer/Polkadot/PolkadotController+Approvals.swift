import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Polkadot
import WebAuthn

/// Approving a Polkadot signature: the page shows what is signed; the user's passkey signs a
/// challenge bound to the payload's hash; the receipt is kept with the audit entry.
extension PolkadotController {
    func load(_ id: String, userID: String) async throws -> (PolkadotRequestRecord, SigningRequest) {
        guard let record = try await store.polkadotRequest(id: id, ofUser: userID) else {
            throw KeyfobError(.requestNotFound, "no such Polkadot request of yours (it may have expired)", status: .notFound)
        }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(record.request.utf8))) as? [String: Any] else {
            throw KeyfobError(.internalError, "the stored request cannot be read", status: .internalServerError)
        }
        do {
            return (record, try SigningRequest(type: record.messageType, request: object))
        } catch {
            throw KeyfobError(error)
        }
    }

    struct StateReply: Encodable {
        let id, state, type: String
        let expiresAt: Date
        /// `{type, result}` or `{type, error}`, as stored when it was decided.
        let outcome: StoredOutcome?
    }

    struct StoredOutcome: Codable {
        let type: String
        var result: SignerResultJSON? = nil
        var error: String? = nil
    }

    @Sendable func requestState(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        guard let record = try await store.polkadotRequest(id: context.parameters.get("id") ?? "", ofUser: auth.user.id) else {
            throw KeyfobError(.requestNotFound, "no such Polkadot request of yours (it may have expired)", status: .notFound)
        }
        let state = record.state == "pending" && record.expiresAt <= now() ? "expired" : record.state
        return jsonResponse(
            StateReply(
                id: record.id, state: state, type: record.messageType, expiresAt: record.expiresAt,
                outcome: record.result.flatMap { try? JSONDecoder().decode(StoredOutcome.self, from: Data($0.utf8)) }))
    }

    // MARK: What the page shows

    struct DetailsReply: Encodable {
        let id, origin, transport, type, state: String
        let verifiedOrigin: Bool
        let expiresAt: Date
        let account: AccountReply
        var extrinsic: ExtrinsicDetails? = nil
        var bytes: BytesDetails? = nil
        /// SHA-256 of nothing secret: BLAKE2b-256 of what is signed, as the receipt names it.
        let payloadHash: String
    }

    struct ExtrinsicDetails: Encodable {
        let chain: String?
        let chainFromDapp: String?
        let genesisHash: String
        /// The genesis hash is in the signed bytes (`CheckGenesis`): the signature binds the chain.
        let genesisSigned: Bool
        let call: String
        /// `Pallet.call(arguments)`, decoded with the metadata this dapp provided.
        let decodedCall: String?
        /// The decoded call in one sentence, for the common ones ("Send 1 DOT to 15oF4…").
        let summary: String?
        let callIndex: [Int]
        let callNote: String
        let tip: String
        let nonce: String
        let era: String
        let specVersion: UInt32
        let transactionVersion: UInt32
        let signedExtensions: [String]
        let assetId: String?
        let metadataHashChecked: Bool
        /// Fields the site sent that no listed extension signs (shown as the site sent them, bound by nothing).
        let notSigned: [String]
    }

    struct BytesDetails: Encodable {
        let hex: String
        /// The data as text when it is UTF-8 (what a sign-in message usually is), with every
        /// character that is invisible or changes how text around it reads shown as `\uXXXX`.
        let text: String?
        /// `text` shows such characters escaped: the page says so.
        let escaped: Bool

        /// UTF-8 as text a person reads exactly as it is: control characters (but the line break),
        /// format characters (bidi overrides such as U+202E, zero-width spaces and joiners, the BOM),
        /// line and paragraph separators and noncharacters written as `\u202E`, so no hidden
        /// character makes the message read differently on screen. Nil when it is not UTF-8.
        static func visibleText(_ data: [UInt8]) -> (text: String, escaped: Bool)? {
            guard let text = String(validating: data, as: UTF8.self) else { return nil }
            func hidden(_ scalar: Unicode.Scalar) -> Bool {
                switch scalar.properties.generalCategory {
                case .control: scalar != "\n"
                case .format, .lineSeparator, .paragraphSeparator: true
                default: scalar.properties.isNoncharacterCodePoint
                }
            }
            guard text.unicodeScalars.contains(where: hidden) else { return (text, false) }
            // Escaping: a backslash the message itself holds is doubled, so `\u202E` on screen is
            // always the escape, never text that imitates it.
            var out = ""
            for scalar in text.unicodeScalars {
                if hidden(scalar) {
                    let hex = String(scalar.value, radix: 16, uppercase: true)
                    out += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
                } else if scalar == "\\" {
                    out += "\\\\"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
            return (out, true)
        }
    }

    @Sendable func details(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let (record, parsed) = try await load(context.parameters.get("id") ?? "", userID: auth.user.id)
        guard let account = try await accountRecord(for: parsed.accountId, userID: auth.user.id) else {
            throw KeyfobError(.invalidPubkey, "this request's account is no longer in your Keyfob")
        }
        var reply = DetailsReply(
            id: record.id, origin: record.origin, transport: record.transport, type: record.messageType,
            state: record.state == "pending" && record.expiresAt <= now() ? "expired" : record.state,
            verifiedOrigin: record.transport == "polkadot-web", expiresAt: record.expiresAt, account: Self.reply(account),
            payloadHash: PolkadotHex.encode(blake2b256(parsed.signingBytes)))
        if let payload = parsed.extrinsic {
            let genesis = PolkadotHex.encode(payload.genesisHash)
            let known = KnownChains.byGenesis[genesis]
            let provided = try await store.polkadotMetadata(ofUser: auth.user.id, origin: record.origin).first { $0.genesisHash == genesis }
            let def = provided.flatMap { (try? JSONSerialization.jsonObject(with: Data($0.definition.utf8))) as? [String: Any] }
            let callHex = PolkadotHex.encode(Array(payload.method.prefix(2)))
            let decimals = known?.decimals ?? def?["tokenDecimals"] as? Int
            let token = known?.token ?? def?["tokenSymbol"] as? String
            let prefix = UInt16(clamping: def?["ss58Format"] as? Int ?? account.network)
            var decoded: DecodedCall?
            let note: String
            let checked = Self.checkedMetadata(payload, definition: def)
            if let checked {
                decoded = try? CallDecoder(metadata: checked, ss58Prefix: prefix, decimals: decimals, token: token).decode(payload.method)
                note =
                    "Checked: this payload carries the hash of the chain's own metadata (RFC-0078), which Keyfob computed from the metadata \(record.origin) provided; the chain refuses the signature if this description is wrong."
            } else if let calls = (def?["metaCalls"] as? String).flatMap({ Data(base64Encoded: $0) }) {
                do {
                    let metadata = try RuntimeMetadata([UInt8](calls))
                    decoded = try CallDecoder(metadata: metadata, ss58Prefix: prefix, decimals: decimals, token: token)
                        .decode(payload.method)
                    note = "Decoded with the metadata \(record.origin) provided (spec \(provided?.specVersion ?? 0))."
                } catch {
                    note = "call \(callHex)… — the metadata this site gave does not describe it (\(error.message)); check the call in your dapp"
                }
            } else {
                note = "call \(callHex)… — this site gave no metadata; check the call in your dapp"
            }
            // Only what the listed extensions put in the signed bytes is said as part of the
            // transaction: a tip, nonce, era or chain no extension encodes binds nothing.
            let notSigned = "not part of what is signed"
            let era =
                !payload.signs(.era)
                ? notSigned
                : payload.era.period.map { "valid for \($0) blocks from block \(payload.blockNumber)" } ?? "immortal (valid until used)"
            let genesisSigned = payload.signs(.genesisHash)
            let unsigned: [(SignerPayload.Field, String)] = [
                (.genesisHash, "genesis hash (the chain)"), (.era, "era"), (.nonce, "nonce"), (.tip, "tip"),
                (.specVersion, "spec version"), (.transactionVersion, "transaction version"),
            ]
            reply.extrinsic = ExtrinsicDetails(
                chain: genesisSigned ? known?.name : nil, chainFromDapp: genesisSigned ? def?["chain"] as? String : nil,
                genesisHash: genesis, genesisSigned: genesisSigned,
                call: PolkadotHex.encode(payload.method), decodedCall: decoded?.text, summary: genesisSigned ? decoded?.summary : nil,
                callIndex: payload.method.prefix(2).map(Int.init), callNote: note,
                tip: payload.signs(.tip) ? Amount.format(payload.tip, decimals: decimals, token: token) : notSigned,
                nonce: payload.signs(.nonce) ? Amount.decimal(payload.nonce) : notSigned, era: era, specVersion: payload.specVersion,
                transactionVersion: payload.transactionVersion, signedExtensions: payload.signedExtensions,
                assetId: payload.assetId.map(PolkadotHex.encode), metadataHashChecked: checked != nil,
                notSigned: unsigned.filter { !payload.signs($0.0) }.map(\.1))
        } else if let data = parsed.data {
            let visible = BytesDetails.visibleText(data)
            reply.bytes = BytesDetails(hex: PolkadotHex.encode(data), text: visible?.text, escaped: visible?.escaped ?? false)
        }
        return jsonResponse(reply)
    }

    /// The metadata a payload is bound to, or nil: the payload checks the metadata hash (mode 1,
    /// `CheckMetadataHash` among its extensions), lists exactly the runtime's own extensions in the
    /// runtime's order, has the runtime's spec version, and its hash is the one Keyfob computes
    /// (RFC-0078) from the V15 metadata the dapp provided with its SS58 prefix, decimals and token.
    /// Then the chain itself refuses a signature made from a wrong description: what the page
    /// says of the call is bound to what is signed. A mode-0 payload, a calls-only or V14
    /// metadata, or any difference: nil (nothing claimed).
    static func checkedMetadata(_ payload: SignerPayload, definition def: [String: Any]?) -> RuntimeMetadata? {
        guard payload.mode == 1, let claimed = payload.metadataHash, payload.signedExtensions.contains("CheckMetadataHash"),
            let text = def?["rawMetadata"] as? String, let bytes = PolkadotHex.decode(text),
            let decimals = def?["tokenDecimals"] as? Int, let symbol = def?["tokenSymbol"] as? String,
            let prefix = def?["ss58Format"] as? Int, let prefix16 = UInt16(exactly: prefix), let decimals8 = UInt8(exactly: decimals)
        else { return nil }
        guard let known = MetadataHashes.shared.runtime(bytes), let version = known.metadata.runtimeVersion,
            version.specVersion == payload.specVersion,
            known.metadata.extrinsic?.signedExtensions.map(\.identifier) == payload.signedExtensions
        else { return nil }
        let extra = MerkleizedMetadata.ExtraInfo(
            specVersion: version.specVersion, specName: version.specName, base58Prefix: prefix16, decimals: decimals8, tokenSymbol: symbol)
        guard let computed = MetadataHashes.shared.hash(known, extra), constantTimeEqual(computed, claimed) else { return nil }
        return known.metadata
    }

    // MARK: Confirmation and signing

    /// What the passkey confirms: the request, the dapp, the account and the payload's hash.
    func committedBytes(_ record: PolkadotRequestRecord, _ parsed: SigningRequest, nonce: [UInt8]) -> String {
        """
        keyfob polkadot approval v1
        request:\(record.id)
        origin:\(record.origin)
        account:\(SS58.encode(accountId: parsed.accountId, prefix: SS58.generic))
        message:\(record.messageType)
        payload-blake2b256:\(Hex.encode(blake2b256(parsed.signingBytes)))
        nonce:\(Hex.encode(nonce))
        """
    }

    @Sendable func challenge(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let (record, parsed) = try await load(context.parameters.get("id") ?? "", userID: auth.user.id)
        let nonce = randomBytes(16)
        guard try await store.setConfirmationNonce(.polkadot, id: record.id, userID: auth.user.id, nonce: nonce, now: now()) else {
            throw KeyfobError(.requestNotFound, "this request was decided already or has expired", status: .notFound)
        }
        return jsonResponse(
            try await passkeys.approvalOptions(
                committed: committedBytes(record, parsed, nonce: nonce), userID: auth.user.id,
                opensSealedKey: try await !substrate.custody.canOpen(auth.user.id, unlock: auth.unlock)))
    }

    /// Signs once the passkey confirmed this payload. The signer must be unlocked (the same lock as
    /// nostr's: the kill switch locks it); a passkey-sealed key opens only with the unlocked session.
    @Sendable func approve(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let (record, parsed) = try await load(context.parameters.get("id") ?? "", userID: auth.user.id)
        let who = caller(auth, origin: record.origin, transport: record.transport, request: request, context: context)
        let method = Self.auditMethod(record.messageType)
        let body = try await request.decodeJSON(Decision.self, limit: 64 * 1024, emptyIsObject: true)
        // A locked signer (the kill switch, the unlock window over) signs only with this request's
        // passkey confirmation, which unlocks it — as a nostr approval does.
        guard auth.session.isUnlocked(at: now()) || body.assertion != nil else {
            throw try await dispatcher.refusal(.signerLocked, method: method, for: who)
        }
        let outcome = try await dispatcher.perform(method, for: who) { operation in
            let sealedShut = try await !substrate.custody.canOpen(auth.user.id, unlock: auth.unlock)
            let confirmation = try await confirm(body.assertion, record: record, parsed: parsed, user: auth.user)
            var unlock = auth.unlock
            if sealedShut || !auth.session.isUnlocked(at: now()) {
                unlock = try await substrate.custody.unlock(
                    auth, until: now().addingTimeInterval(TimeInterval(configuration.signerUnlockTTL)), sealedShut: sealedShut,
                    credentialID: confirmation.credential.id,
                    prf: PRFOutputs(
                        first: SharedSecret(confirmation.assertion.clientExtensionResults?.prfFirst),
                        second: SharedSecret(confirmation.assertion.clientExtensionResults?.prfSecond)),
                    challenge: confirmation.challenge)
            }
            operation.receipt = confirmation.receipt
            guard let accountRecord = try await accountRecord(for: parsed.accountId, userID: auth.user.id) else {
                throw KeyfobError(.invalidPubkey, "this request's account is no longer in your Keyfob")
            }
            let key = try await substrate.open(accountRecord, unlock: unlock)
            var signature = key.sign(parsed.signingBytes)
            // polkadot-js: an extrinsic's signature carries its MultiSignature variant; raw bytes do not.
            if parsed.extrinsic != nil { signature = [key.type.multiSignatureTag] + signature }
            let outcome = StoredOutcome(
                type: record.messageType,
                result: SignerResultJSON(id: Int(now().timeIntervalSince1970 * 1000), signature: PolkadotHex.encode(signature)))
            let json = String(decoding: jsonBytes(outcome), as: UTF8.self)
            // The signature (which the dapp collects from the stored result) and its audit entry are
            // one transaction: neither is kept without the other.
            operation.eventID = Hex.encode(blake2b256(parsed.signingBytes))
            let entry = operation.entryWrittenWithChange(by: dispatcher)
            let decided: Bool
            do {
                decided = try await store.finishPolkadotRequest(
                    id: record.id, userID: auth.user.id, state: "approved", result: json, now: now(), audit: entry)
            } catch {
                throw SignerDispatcher.writeFailed(error, method: method, logger: dispatcher.logger)
            }
            guard decided else {
                throw KeyfobError(.requestNotFound, "this request was decided already or has expired", status: .notFound)
            }
            return outcome
        }
        return jsonResponse(outcome)
    }

    @Sendable func reject(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let id = context.parameters.get("id") ?? ""
        guard let record = try await store.polkadotRequest(id: id, ofUser: auth.user.id) else {
            throw KeyfobError(.requestNotFound, "no such Polkadot request of yours (it may have expired)", status: .notFound)
        }
        // What polkadot-js extensions answer a refusal with: `Rejected`.
        let outcome = StoredOutcome(type: record.messageType, error: "Rejected")
        let who = caller(auth, origin: record.origin, transport: record.transport, request: request, context: context)
        try await dispatcher.perform(Self.auditMethod(record.messageType), for: who, limit: .uncounted) { operation in
            guard
                try await store.finishPolkadotRequest(
                    id: id, userID: auth.user.id, state: "rejected", result: String(decoding: jsonBytes(outcome), as: UTF8.self),
                    now: now())
            else {
                throw KeyfobError(.requestNotFound, "this request was decided already or has expired", status: .notFound)
            }
            operation.rejected()
        }
        return jsonResponse(outcome)
    }

    /// `POST …/approve`: the passkey's assertion over the committed bytes (`…/challenge`).
    struct Decision: Decodable {
        var assertion: AuthenticationCredential?
    }

    struct SignerResultJSON: Codable {
        let id: Int
        let signature: String
    }

    /// Verifies the assertion over the committed bytes: the receipt (no PRF output in it), the
    /// passkey, the assertion as sent (its PRF outputs open a sealed key) and the challenge.
    func confirm(_ assertion: AuthenticationCredential?, record: PolkadotRequestRecord, parsed: SigningRequest, user: UserRecord)
        async throws -> (receipt: String, credential: CredentialRecord, assertion: AuthenticationCredential, challenge: [UInt8])
    {
        guard let assertion, let nonce = record.confirmationNonce else {
            throw KeyfobError(
                .userVerificationRequired, "signing this needs your passkey: ask for a challenge first", status: .forbidden)
        }
        let committed = committedBytes(record, parsed, nonce: nonce)
        let (receipt, credential, challenge) = try await passkeys.receipt(for: assertion, committed: committed, user: user)
        return (receipt, credential, assertion, challenge)
    }
}
