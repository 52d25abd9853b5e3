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
        guard var record = try await store.polkadotRequest(id: id, ofUser: userID) else {
            throw KeyfobError(.requestNotFound, "no such Polkadot request of yours (it may have expired)", status: .notFound)
        }
        // A request stored by an earlier Keyfob (another form) is gone like an expired one.
        guard let stored = try? JSONDecoder().decode(StoredRequest.self, from: Data(record.request.utf8)),
            let parsed = try? SigningRequest(type: record.messageType, stored: stored)
        else {
            throw KeyfobError(.requestNotFound, "this request can no longer be read; ask the site to send it again", status: .notFound)
        }
        // The site's permission ended (revoked, or the account no longer shared with it) while
        // its request waited: cancelled, never signed for a site that may no longer ask.
        if record.state == "pending", record.expiresAt > now(),
            try await sharedAccount(for: parsed.accountId, userID: userID, origin: record.origin) == nil
        {
            let outcome = String(decoding: jsonBytes(StoredOutcome(type: record.messageType, error: "Rejected")), as: UTF8.self)
            if try await store.finishPolkadotRequest(id: id, userID: userID, state: "cancelled", result: outcome, now: now()) {
                record.state = "cancelled"
                record.result = outcome
            }
        }
        return (record, parsed)
    }

    struct StateReply: Encodable {
        let id, state, type: String
        let expiresAt: Date
        /// `{type, result}` or `{type, error}`, as stored when it was decided.
        let outcome: StoredOutcome?
    }

    /// The extension's token sees (and rejects) only the requests the extension asked, never
    /// those of Keyfob's own window or of an app.
    static func visible(_ record: PolkadotRequestRecord, to auth: Sessions.Authenticated) -> Bool {
        !auth.isExtension || record.transport == PolkadotTransport.browserExtension
    }

    struct StoredOutcome: Codable {
        let type: String
        var result: SignerResultJSON? = nil
        var error: String? = nil
    }

    @Sendable func requestState(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        guard let record = try await store.polkadotRequest(id: context.parameters.get("id") ?? "", ofUser: auth.user.id),
            Self.visible(record, to: auth)
        else {
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
        let genesisHash: String
        /// The genesis hash is in the signed bytes (`CheckGenesis`): the signature binds the chain.
        let genesisSigned: Bool
        let call: String
        /// `Pallet.call(arguments)`, decoded with the metadata the payload's hash binds (verified only).
        let decodedCall: String?
        /// The decoded call in one sentence, for the common ones ("Send 1 DOT to 15oF4…"); verified only.
        let summary: String?
        /// The whole address the summary sends to, for the page to show start…end with the rest a tap away.
        let recipient: String?
        /// Verified: every call the call makes (a batch's, a proxy's), nested ones under theirs — none left out.
        let calls: [CallLine]?
        /// Unverified: the call as the site's own metadata decodes it (the site's words, not a fact).
        let siteDescription: String?
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
        /// The description is bound to what is signed (RFC-0078): otherwise the page warns.
        let verified: Bool
        /// The RFC-0078 hash signed with mode 1 (Keyfob's, when verified).
        let metadataHash: String?
        /// Fields the site sent that no listed extension signs (shown as the site sent them, bound by nothing).
        let notSigned: [String]
    }

    /// One call of a batch as the page lists it: its sentence when it has one, its whole text, its own calls.
    struct CallLine: Encodable {
        let summary: String?
        let text: String
        let calls: [CallLine]

        static func lines(_ calls: [DecodedCall]) -> [CallLine] {
            calls.map { CallLine(summary: $0.summary, text: $0.text, calls: lines($0.innerCalls)) }
        }
    }

    struct BytesDetails: Encodable {
        let hex: String
        /// The data as text when it is UTF-8 (what a sign-in message usually is), with every
        /// character that is invisible or changes how text around it reads shown as `\uXXXX`.
        let text: String?
        /// `text` shows such characters escaped: the page says so.
        let escaped: Bool
        /// An Ethereum signed message, signed as it is (no `<Bytes>` wrapping): the page says so.
        var ethereum = false

        /// UTF-8 as text a person reads exactly as it is (`VisibleText`); nil when it is not UTF-8.
        static func visibleText(_ data: [UInt8]) -> (text: String, escaped: Bool)? {
            VisibleText.escaped(utf8: data)
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
            verifiedOrigin: record.transport == PolkadotTransport.web || record.transport == PolkadotTransport.browserExtension,
            expiresAt: record.expiresAt,
            account: Self.reply(account),
            payloadHash: PolkadotHex.encode(blake2b256(parsed.signingBytes)))
        if let payload = parsed.extrinsic {
            reply.extrinsic = try await extrinsicDetails(payload, origin: record.origin, account: account)
        } else if let data = parsed.data {
            let visible = BytesDetails.visibleText(data)
            reply.bytes = BytesDetails(
                hex: PolkadotHex.encode(data), text: visible?.text, escaped: visible?.escaped ?? false,
                ethereum: RawPayload.isEthereumMessage(data))
        }
        return jsonResponse(reply)
    }

    /// What the page says of a transaction: decoded back from the exact bytes to be signed; the
    /// call described as fact only when verified (`TransactionCheck`), else as "the site
    /// describes it as …" beside its hex.
    func extrinsicDetails(_ payload: SignerPayload, origin: String, account: SubstrateAccountRecord) async throws -> ExtrinsicDetails {
        let genesis = PolkadotHex.encode(payload.genesisHash)
        let known = KnownChains.byGenesis[genesis]
        // Read once: what the check binds, and (unverified) what the site's words are decoded with.
        let definition = try await providedMetadata(for: payload, origin: origin, userID: account.userID)
        let check: TransactionCheck
        do {
            check = try TransactionCheck.check(payload, definition: definition, setHashIfMissing: false)
        } catch {
            // The site changed its metadata since: the payload is no longer its chain's.
            check = TransactionCheck(payload: payload, verdict: .unverified(error.message), setHash: false)
        }
        let bound = check.bound
        let callHex = PolkadotHex.encode(Array(payload.method.prefix(2)))
        // Amounts in the chain's own unit: the one the verified hash commits to, else the known chain's.
        let decimals = bound?.decimals ?? known?.decimals
        let token = bound?.token ?? known?.token
        var decoded: DecodedCall?
        var siteDescription: String?
        let note: String
        if let bound {
            // Read back from the bytes to be signed, through the hashed types only.
            decoded = bound.reading.call
            note =
                "Checked: this transaction carries the hash of the chain's own metadata (RFC-0078), which Keyfob computed from the metadata \(origin) provided; the chain refuses the signature if this description is wrong."
        } else {
            // Unverified: whatever metadata the site gave describes the call, said as the site's words.
            let metadata =
                definition?.providedRuntime??.metadata
                ?? definition?.metaCalls.flatMap { Data(base64Encoded: $0) }.flatMap { try? RuntimeMetadata([UInt8]($0)) }
            let prefix = UInt16(clamping: definition?.ss58Format ?? account.network)
            siteDescription = metadata.flatMap {
                try? CallDecoder(siteMetadata: $0, ss58Prefix: prefix, decimals: decimals, token: token).decode(payload.method).text
            }
            let why: String
            if case .unverified(let reason) = check.verdict { why = reason } else { why = "" }
            note =
                "Not checked: \(why). Keyfob cannot tell what call \(callHex)… does, nor its amount, recipient or chain; only sign if you trust \(origin) and checked it there."
        }
        // Only what the listed extensions put in the signed bytes is said as part of the
        // transaction: a tip, nonce, era or chain no extension encodes binds nothing. The era is said
        // from signed data only: its period, and the block whose hash it signs (the block number a
        // site sends is in no signed byte).
        let notSigned = "not part of what is signed"
        let era: String
        if !payload.signs(.era) {
            era = notSigned
        } else if let period = payload.era.period {
            let block = PolkadotHex.encode(payload.blockHash)
            era = "for \(period) blocks from block \(block.prefix(10))…\(block.suffix(4))"
        } else {
            era = "immortal (valid until used)"
        }
        let genesisSigned = payload.signs(.genesisHash)
        let unsigned: [(SignerPayload.Field, String)] = [
            (.genesisHash, "genesis hash (the chain)"), (.era, "era"), (.nonce, "nonce"), (.tip, "tip"),
            (.specVersion, "spec version"), (.transactionVersion, "transaction version"),
        ]
        let verified = bound != nil
        return ExtrinsicDetails(
            chain: genesisSigned ? known?.name : nil,
            genesisHash: genesis, genesisSigned: genesisSigned,
            call: PolkadotHex.encode(payload.method), decodedCall: verified ? decoded?.text : nil,
            summary: verified && genesisSigned ? decoded?.summary : nil, recipient: verified && genesisSigned ? decoded?.recipient : nil,
            calls: verified ? decoded.map { CallLine.lines($0.innerCalls) } : nil,
            siteDescription: siteDescription, callIndex: payload.method.prefix(2).map(Int.init), callNote: note,
            tip: payload.signs(.tip) ? Amount.format(payload.tip, decimals: decimals, token: token) : notSigned,
            nonce: payload.signs(.nonce) ? Amount.decimal(payload.nonce) : notSigned, era: era, specVersion: payload.specVersion,
            transactionVersion: payload.transactionVersion, signedExtensions: payload.signedExtensions,
            assetId: bound?.reading.assetId, metadataHashChecked: verified, verified: verified,
            metadataHash: payload.mode == 1 ? payload.metadataHash.map(PolkadotHex.encode) : nil,
            notSigned: unsigned.filter { !payload.signs($0.0) }.map(\.1))
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
            guard let accountRecord = try await accountRecord(for: parsed.accountId, userID: auth.user.id) else {
                throw KeyfobError(.invalidPubkey, "this request's account is no longer in your Keyfob")
            }
            // Checked again as it is signed: the site may have changed its metadata since it asked.
            var check: TransactionCheck?
            if let payload = parsed.extrinsic {
                do {
                    check = try await transactionCheck(payload, origin: record.origin, userID: auth.user.id, setHashIfMissing: false)
                } catch let error as PolkadotError {
                    throw KeyfobError(error)
                }
                if case .unverified(let why)? = check?.verdict, !accountRecord.acceptsUnverified {
                    throw Self.unverifiedRefusal(why)
                }
            }
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
            let key = try await substrate.open(accountRecord, unlock: unlock)
            var signature = key.sign(parsed.signingBytes)
            // polkadot-js: an extrinsic's signature carries its MultiSignature variant; raw bytes do not.
            if parsed.extrinsic != nil { signature = [key.type.multiSignatureTag] + signature }
            // Keyfob set the metadata hash: the dapp's own payload is not what was signed, so it
            // gets the transaction that was (polkadot-js's `SignerResult.signedTransaction`).
            var signedTransaction: String?
            if parsed.keyfobSetMetadataHash, let payload = parsed.extrinsic, let signer = check?.bound?.signer {
                signedTransaction = PolkadotHex.encode(payload.signedExtrinsic(signer: signer, signature: signature))
            }
            let outcome = StoredOutcome(
                type: record.messageType,
                result: SignerResultJSON(
                    id: Int(now().timeIntervalSince1970 * 1000), signature: PolkadotHex.encode(signature),
                    signedTransaction: signedTransaction))
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
        guard let record = try await store.polkadotRequest(id: id, ofUser: auth.user.id), Self.visible(record, to: auth) else {
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
        /// The signed transaction, when Keyfob set its metadata hash (the dapp submits this).
        var signedTransaction: String? = nil
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
