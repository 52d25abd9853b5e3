import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import NIOCore
import Nostr
import Polkadot
import WebAuthn

/// The Nova bridge's messages (specs: nova-dapp-bridge.md), answered ready for `onAppResponse`.
extension PolkadotController {
    struct MessageReply: Encodable {
        let type: String
        var result: AnyEncodable? = nil
        var pending: Pending? = nil
    }

    struct Pending: Encodable {
        let id: String
        /// Open it (a sheet, a popup): the user approves there with a passkey.
        let approvalUrl: String
        /// Poll it for the outcome.
        let resultUrl: String
        let expiresIn: Int
    }

    struct MessageError: Encodable {
        let type: String
        let error: ErrorCode
        let message: String
    }

    /// The origin of the dapp's URL (scheme, host, port); nil when it is no web origin.
    static func origin(of url: String) -> String? {
        guard url.utf8.count <= 2048, let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(),
            scheme == "https" || scheme == "http", let host = parsed.host?.lowercased(), !host.isEmpty
        else { return nil }
        let defaultPort = scheme == "https" ? 443 : 80
        let port = parsed.port.map { $0 == defaultPort ? "" : ":\($0)" } ?? ""
        return "\(scheme)://\(host)\(port)"
    }

    /// Every message names its type and the dapp's page; `request` is typed per message.
    struct MessageHead: Decodable {
        let msgType: String
        let url: String
    }

    struct Carrying<Body: Decodable>: Decodable {
        let request: Body
    }

    /// `pub(bytes.sign)`'s `SignerPayloadRaw`.
    struct RawRequest: Codable {
        let address: String
        let data: String
        let type: String?
    }

    /// `T` from a message's JSON text: a field of the wrong type is `400 invalid_request`
    /// (never a default); one a message needs and lacks, `invalid_content`.
    static func decode<T: Decodable>(_ type: T.Type, _ bytes: [UInt8]) throws -> T {
        do {
            return try SignerPayload.decode(type, from: bytes)
        } catch {
            throw KeyfobError(error)
        }
    }

    /// A message's `request` that may be null or absent.
    static func decode<T: Decodable>(_ type: T?.Type, of bytes: [UInt8]) throws -> T? {
        try decode(MaybeCarrying<T>.self, bytes).request
    }

    struct MaybeCarrying<Body: Decodable>: Decodable {
        let request: Body?
    }

    @Sendable func message(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        // metadata.provide carries a runtime's metadata (about a megabyte of hex for Polkadot); every
        // other message keeps the server's usual body limit, so a signing request stores no more.
        let bytes = try await request.bodyBytes(limit: max(configuration.maxBodySize, Self.metadataBodyLimit))
        let head: MessageHead
        do {
            head = try SignerPayload.decode(MessageHead.self, from: bytes)
        } catch {
            throw KeyfobError(.invalidRequest, "a message is {msgType, url, request}: \(error.message)", status: .badRequest)
        }
        let type = head.msgType
        if type != "pub(metadata.provide)", bytes.count > configuration.maxBodySize {
            throw KeyfobError(
                .payloadTooLarge, "a \(type.prefix(64)) message is at most \(configuration.maxBodySize) bytes", status: .contentTooLarge)
        }
        do {
            return try await handle(type: type, url: head.url, body: bytes, auth: auth, request: request, context: context)
        } catch let error as KeyfobError {
            return jsonResponse(
                MessageError(type: String(type.prefix(64)), error: error.code, message: error.message), status: error.status, headers: error.headers)
        } catch let error as PolkadotError {
            let wrapped = KeyfobError(error)
            return jsonResponse(MessageError(type: String(type.prefix(64)), error: wrapped.code, message: wrapped.message), status: wrapped.status)
        }
    }

    private func handle(type: String, url: String, body: [UInt8], auth: Sessions.Authenticated, request: Request, context: KeyfobRequestContext)
        async throws -> Response
    {
        guard let origin = Self.origin(of: url) else {
            throw KeyfobError.invalid("url must be the dapp page's http(s) address")
        }
        // Keyfob's own popup (a cookie session) relays web dapps, whose origin the browser told it,
        // and so does the browser extension (the origin of the tab that asked, from the browser);
        // another bearer session is a native app reporting the page its web view shows.
        let transport = auth.viaCookie ? PolkadotTransport.web : auth.isExtension ? PolkadotTransport.browserExtension : PolkadotTransport.bridge
        let who = caller(auth, origin: origin, transport: transport, request: request, context: context)
        switch type {
        case "pub(authorize.tab)":
            // The app (Nova's own prompt) or Keyfob's popup asked the user before sending this;
            // Keyfob's windows send the accounts the person ticked, and the site sees only those.
            let asked = try Self.decode(Optional<AuthorizeRequest>.self, of: body)
            let chosen = try await chosenAccounts(asked?.accounts, userID: auth.user.id)
            let grant = try await authorization(origin, userID: auth.user.id)
            if grant == nil || chosen != nil {
                // The extension's token connects no site by itself (whoever holds it could name
                // any origin): the person connects it in Keyfob's window, signed in there.
                guard !auth.isExtension else {
                    throw KeyfobError(
                        .permissionDenied,
                        "\(origin) is connected only by you, in Keyfob's window (the extension opens extension-consent.html): its session cannot connect a site",
                        status: .forbidden)
                }
                try await dispatcher.perform(Self.authorizeMethod, for: who, limit: .uncounted) { _ in
                    try await authorize(origin, sharing: chosen, replacing: grant, userID: auth.user.id)
                }
                try await SessionBound.recheck(auth, client: origin, sessions: sessions.store, store: store, now: now())
            }
            return jsonResponse(MessageReply(type: type, result: AnyEncodable(true)))
        case "pub(accounts.list)":
            try await requireAuthorized(origin, who)
            return jsonResponse(MessageReply(type: type, result: AnyEncodable(try await injectedAccounts(auth.user.id, origin: origin))))
        case "pub(accounts.subscribe)":
            try await requireAuthorized(origin, who)
            // Updates stream from GET /api/polkadot/subscribe?id=<this message's id>&url=<the dapp>.
            return jsonResponse(MessageReply(type: type, result: AnyEncodable(true)))
        case "pub(metadata.list)":
            let known = try await store.polkadotMetadata(ofUser: auth.user.id, origin: origin).map {
                KnownMetadata(genesisHash: $0.genesisHash, specVersion: $0.specVersion)
            }
            return jsonResponse(MessageReply(type: type, result: AnyEncodable(known)))
        case "pub(metadata.provide)":
            try await requireAuthorized(origin, who)
            if let retryAfter = metadataRate.take(auth.user.id, now: now()) { throw KeyfobError.rateLimited(retryAfter: retryAfter) }
            let definition: MetadataDefinition
            do {
                definition = try SignerPayload.decode(Carrying<MetadataDefinition>.self, from: body).request
            } catch {
                throw KeyfobError(
                    error.kind == .mistyped ? .invalidRequest : .invalidContent,
                    "metadata must be a MetadataDef with genesisHash and specVersion: \(error.message)")
            }
            do {
                try await provideMetadata(definition, origin: origin, userID: auth.user.id, session: auth.session.tokenHash)
            } catch StoreError.notFound {
                throw KeyfobError.unauthorized  // signed out everywhere meanwhile
            }
            return jsonResponse(MessageReply(type: type, result: AnyEncodable(true)))
        case "pub(bytes.sign)", "pub(extrinsic.sign)":
            try await requireAuthorized(origin, who)
            // Queuing a request is not yet the signature (that is audited when it is decided), but
            // it spends the dapp's limit, and a malformed or unchecked one is audited as the
            // failure it is.
            let stored = try await dispatcher.perform(Self.auditMethod(type), for: who) { operation in
                let stored: StoredRequest
                if type == "pub(extrinsic.sign)" {
                    stored = try await queued(try Self.decode(Carrying<SignerPayload.JSON>.self, body).request, origin: origin, auth: auth)
                } else {
                    let raw = try Self.decode(Carrying<RawRequest>.self, body).request
                    stored = StoredRequest(raw: raw)
                    let parsed = try SigningRequest(type: type, stored: stored)
                    guard try await sharedAccount(for: parsed.accountId, userID: auth.user.id, origin: origin) != nil else {
                        throw KeyfobError(
                            .invalidPubkey, "\(parsed.address.prefix(64)) is not one of the Keyfob Polkadot accounts you shared with \(origin)")
                    }
                }
                operation.queued()
                return stored
            }
            let record = PolkadotRequestRecord(
                id: Base64URL.encode(randomBytes(16)), userID: auth.user.id, origin: origin, transport: transport,
                messageType: type, request: String(decoding: jsonBytes(stored), as: UTF8.self), createdAt: now(),
                expiresAt: now().addingTimeInterval(Self.requestLifetime))
            do {
                // Stored only while the session is: a sign-out everywhere in between would
                // otherwise leave it waiting after it cancelled the rest.
                try await store.insertPolkadotRequest(record, now: now(), maxPending: Self.maxPending, session: auth.session.tokenHash)
            } catch StoreError.limitReached {
                throw KeyfobError.rateLimited(retryAfter: Int(Self.requestLifetime))
            } catch StoreError.notFound {
                throw KeyfobError.unauthorized
            }
            let base = configuration.effectiveOrigins.first ?? ""
            let pending = Pending(
                id: record.id, approvalUrl: "\(base)/polkadot-approve.html?id=\(record.id)",
                resultUrl: "\(base)/api/polkadot/requests/\(record.id)", expiresIn: Int(Self.requestLifetime))
            return jsonResponse(MessageReply(type: type, pending: pending), status: .accepted)
        default:
            throw KeyfobError(.unsupportedType, "\(type.prefix(64)) is not a message Keyfob answers", status: .badRequest)
        }
    }

    /// A transaction to queue for its owner, checked first (`TransactionCheck`): the chain's own
    /// extension list, and either verified or an account that accepts unverified ones.
    private func queued(_ json: SignerPayload.JSON, origin: String, auth: Sessions.Authenticated) async throws -> StoredRequest {
        let payload = try SignerPayload(json)
        guard let account = try await sharedAccount(for: payload.accountId, userID: auth.user.id, origin: origin) else {
            throw KeyfobError(.invalidPubkey, "\(payload.address.prefix(64)) is not one of the Keyfob Polkadot accounts you shared with \(origin)")
        }
        let check = try await transactionCheck(payload, origin: origin, userID: auth.user.id, setHashIfMissing: true)
        if case .unverified(let why) = check.verdict, !account.acceptsUnverified {
            throw Self.unverifiedRefusal(why)
        }
        return StoredRequest(payload: check.payload.json, keyfobSetMetadataHash: check.setHash ? true : nil)
    }

    static func unverifiedRefusal(_ why: String) -> KeyfobError {
        KeyfobError(
            .unverifiedTransaction,
            "Keyfob cannot check this transaction against the chain (\(why)), and it does not sign blind: the site must send pub(metadata.provide) with the runtime's V15 rawMetadata for a chain with CheckMetadataHash. The account's owner can allow unchecked transactions in Keyfob's account page.",
            status: .forbidden)
    }

    /// The dapp's metadata for the payload's chain, and what Keyfob can say of the payload with it.
    func transactionCheck(_ payload: SignerPayload, origin: String, userID: String, setHashIfMissing: Bool) async throws
        -> TransactionCheck
    {
        let definition = try await providedMetadata(for: payload, origin: origin, userID: userID)
        return try TransactionCheck.check(payload, definition: definition, setHashIfMissing: setHashIfMissing)
    }

    /// The `MetadataDef` this dapp provided for the payload's chain, if any.
    func providedMetadata(for payload: SignerPayload, origin: String, userID: String) async throws -> MetadataDefinition? {
        let genesis = PolkadotHex.encode(payload.genesisHash)
        guard let provided = try await store.polkadotMetadata(ofUser: userID, origin: origin).first(where: { $0.genesisHash == genesis }),
            var definition = try? JSONDecoder().decode(MetadataDefinition.self, from: Data(provided.definition.utf8))
        else { return nil }
        if let hash = provided.runtimeHash {
            // Read from the store only when this instance has not read that runtime lately.
            if let known = MetadataHashes.shared.runtime(key: hash) {
                definition.providedRuntime = .some(known)
            } else {
                definition.providedRuntime = .some(try await store.polkadotRuntime(hash: hash).flatMap { MetadataHashes.shared.runtime($0) })
            }
        }
        return definition
    }

    static let metadataBodyLimit = 4 * 1024 * 1024
    /// How often a subscription reads the account list again (changes made on another instance).
    static let subscriptionRefresh: Double = 15

    static func auditMethod(_ type: String) -> String { type == "pub(bytes.sign)" ? "polkadot.sign_raw" : "polkadot.sign_payload" }

    struct KnownMetadata: Encodable {
        let genesisHash: String
        let specVersion: Int
    }

    struct InjectedAccount: Encodable {
        let address: String
        let genesisHash: String?
        let name: String
        let type: String
    }

    /// The accounts `origin` sees: those the person ticked when connecting it (its authorization
    /// says a choice was made, so none left means none), or all of them for a connection made
    /// without a choice (the Nova app's own prompt, connections before #54).
    func injectedAccounts(_ userID: String, origin: String) async throws -> [InjectedAccount] {
        try await sharedAccounts(userID, origin: origin).map { record in
            InjectedAccount(address: Self.reply(record).address, genesisHash: nil, name: record.name, type: record.keyType)
        }
    }

    func sharedAccounts(_ userID: String, origin: String) async throws -> [SubstrateAccountRecord] {
        let grants = try await store.grants(ofUser: userID, now: now()).filter { $0.client == origin }
        guard let authorized = grants.first(where: { $0.method == Self.authorizeMethod && $0.allow }) else { return [] }
        let accounts = try await store.substrateAccounts(ofUser: userID)
        guard authorized.kind == Self.chosenAccounts else { return accounts }
        let shared = Set(grants.filter { $0.method.hasPrefix(Self.shareMethod) }.map { String($0.method.dropFirst(Self.shareMethod.count)) })
        return accounts.filter { shared.contains($0.id) }
    }

    /// The authorization grant's `kind` when the person chose the accounts (nil: every account).
    static let chosenAccounts = 1

    /// `origin`'s authorization grant, if it is connected.
    func authorization(_ origin: String, userID: String) async throws -> GrantRecord? {
        try await store.grants(ofUser: userID, now: now()).first { $0.client == origin && $0.method == Self.authorizeMethod && $0.allow }
    }

    /// Connects `origin`, sharing `chosen` (nil: every account). The authorization says first that a
    /// choice is made, then the shares follow: at no moment does the site see more than it was given.
    private func authorize(_ origin: String, sharing chosen: [SubstrateAccountRecord]?, replacing grant: GrantRecord?, userID: String)
        async throws
    {
        func insertAuthorization() async throws {
            try await store.insertGrant(
                GrantRecord(
                    id: Base64URL.encode(randomBytes(12)), userID: userID, client: origin, method: Self.authorizeMethod,
                    kind: chosen == nil ? nil : Self.chosenAccounts, allow: true, createdAt: now(), expiresAt: nil))
        }
        if let grant, chosen != nil, grant.kind != Self.chosenAccounts {
            // An every-account connection becomes a chosen one: the new grant first, then the old goes.
            try await insertAuthorization()
            _ = try await store.deleteGrant(id: grant.id, ofUser: userID)
        }
        for old in try await store.grants(ofUser: userID, now: now()) where old.client == origin && old.method.hasPrefix(Self.shareMethod) {
            _ = try await store.deleteGrant(id: old.id, ofUser: userID)
        }
        for account in Set((chosen ?? []).map(\.id)).sorted() {
            try await store.insertGrant(
                GrantRecord(
                    id: Base64URL.encode(randomBytes(12)), userID: userID, client: origin, method: Self.shareMethod + account, kind: nil,
                    allow: true, createdAt: now(), expiresAt: nil))
        }
        if grant == nil { try await insertAuthorization() }
    }

    /// `pub(authorize.tab)`'s request: the name the site gives itself and, from Keyfob's own
    /// windows, the addresses the person chose to share.
    struct AuthorizeRequest: Decodable {
        var origin: String?
        var accounts: [String]?
    }

    /// The records of the addresses chosen (nil: no choice was sent). Each must be the person's own.
    private func chosenAccounts(_ addresses: [String]?, userID: String) async throws -> [SubstrateAccountRecord]? {
        guard let addresses else { return nil }
        guard !addresses.isEmpty, addresses.count <= 64 else {
            throw KeyfobError.invalid("accounts lists the addresses to share: at least one")
        }
        let accounts = try await store.substrateAccounts(ofUser: userID)
        return try addresses.map { address in
            guard let id = SS58.decode(address)?.accountId,
                let record = accounts.first(where: { $0.hasAccountId(id) })
            else { throw KeyfobError(.invalidPubkey, "\(address.prefix(64)) is not one of your Keyfob Polkadot accounts") }
            return record
        }
    }

    func isAuthorized(_ origin: String, userID: String) async throws -> Bool {
        try await authorization(origin, userID: userID) != nil
    }

    func requireAuthorized(_ origin: String, _ who: SignerCaller) async throws {
        guard try await isAuthorized(origin, userID: who.userID) else {
            throw KeyfobError(
                .permissionDenied, "\(origin) is not connected to your Keyfob Polkadot accounts: send pub(authorize.tab) first",
                status: .forbidden)
        }
    }

    /// The account, when `origin` may see it (`sharedAccounts`): a site asks to sign only with those.
    func sharedAccount(for accountId: [UInt8], userID: String, origin: String) async throws -> SubstrateAccountRecord? {
        try await sharedAccounts(userID, origin: origin).first { $0.hasAccountId(accountId) }
    }

    func accountRecord(for accountId: [UInt8], userID: String) async throws -> SubstrateAccountRecord? {
        try await store.substrateAccounts(ofUser: userID).first { $0.hasAccountId(accountId) }
    }

    /// Keeps what the approval page uses of a dapp's `MetadataDef`, for that dapp only.
    /// Kept only while `session` (the one the site came through) is: a sign-out everywhere
    /// deletes the account's metadata, and what a site gave while it ran goes with it.
    func provideMetadata(_ def: MetadataDefinition, origin: String, userID: String, session: [UInt8]) async throws {
        guard PolkadotHex.decode(def.genesisHash)?.count == 32 else {
            throw KeyfobError(.invalidContent, "genesisHash must be 0x-hex of 32 bytes")
        }
        var kept = MetadataDefinition(
            genesisHash: def.genesisHash.lowercased(), specVersion: def.specVersion, chain: def.chain.map { String($0.prefix(64)) },
            tokenSymbol: def.tokenSymbol.map { String($0.prefix(64)) }, tokenDecimals: def.tokenDecimals, ss58Format: def.ss58Format)
        // The runtime's full V15 metadata (polkadot-js's `rawMetadata`, hex): what the RFC-0078
        // metadata hash is computed from, so a payload carrying that hash can be checked.
        var runtime: (hash: [UInt8], bytes: [UInt8])?
        if let text = def.rawMetadata {
            // Read through the cache the approval page uses: the page finds it read already.
            guard let bytes = PolkadotHex.decode(text), let read = MetadataHashes.shared.runtime(bytes),
                read.metadata.version == 15, read.metadata.extrinsic != nil, let version = read.metadata.runtimeVersion
            else {
                throw KeyfobError(
                    .invalidContent, "rawMetadata must be the runtime's V15 metadata as 0x-hex (state_call Metadata_metadata_at_version 15)")
            }
            guard Int(version.specVersion) == def.specVersion else {
                throw KeyfobError(
                    .invalidContent, "rawMetadata is the runtime of spec version \(version.specVersion), but specVersion says \(def.specVersion)")
            }
            runtime = (read.key, bytes)
        }
        // The calls' metadata, checked now so a bad one is refused here rather than on the approval page.
        if let calls = def.metaCalls, !calls.isEmpty {
            guard let bytes = Data(base64Encoded: calls), (try? RuntimeMetadata([UInt8](bytes))) != nil else {
                throw KeyfobError(.invalidContent, "metaCalls is not base64 of runtime metadata v14 or v15")
            }
            kept.metaCalls = calls
        }
        try await store.putPolkadotMetadata(
            PolkadotMetadataRecord(
                userID: userID, origin: origin, genesisHash: kept.genesisHash, specVersion: def.specVersion,
                definition: String(decoding: jsonBytes(kept), as: UTF8.self), updatedAt: now(), runtimeHash: runtime?.hash),
            runtime: runtime?.bytes, session: session)
    }

    // MARK: Subscriptions

    /// `pub(accounts.subscribe)`'s updates as server-sent events, each `{"id", "result"}` ready for
    /// `onAppSubscription(id, result)`: the list now, then whenever it changes.
    @Sendable func subscribe(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        guard let url = request.queryValue("url"), let origin = Self.origin(of: url) else {
            throw KeyfobError.invalid("url must be the dapp page's http(s) address")
        }
        let id = String((request.queryValue("id") ?? "").prefix(128))
        let who = caller(auth, origin: origin, transport: PolkadotTransport.bridge, request: request, context: context)
        try await requireAuthorized(origin, who)
        let slot = try streamSlots.take(
            session: auth.session.tokenHash, userID: auth.user.id,
            address: ClientAddress.limitKey(sessions.client.resolve(request, context: context), ipv6Prefix: configuration.ipv6Prefix))
        let changes = events.subscribe(auth.user.id)
        let userID = auth.user.id
        let tokenHash = auth.session.tokenHash
        let stillAllowed: @Sendable () async -> Bool = { [self] in
            guard (try? await sessions.store.session(tokenHash: tokenHash, now: now())) != nil else { return false }
            return (try? await isAuthorized(origin, userID: userID)) == true
        }
        return EventStream.response { stream in
            _ = slot  // held while the stream lives
            var last: [UInt8] = []
            func send(always: Bool) async {
                let update = jsonBytes(SubscriptionUpdate(id: id, result: (try? await injectedAccounts(userID, origin: origin)) ?? []))
                guard always || update != last else { return }
                last = update
                stream.yield(ByteBuffer(string: "data: \(String(decoding: update, as: UTF8.self))\n\n"))
            }
            await send(always: true)
            // This instance's changes at once; another instance's (several on one PostgreSQL)
            // within the refresh interval, when the list is read again.
            await withTaskGroup(of: Void.self) { group in
                // true: a tick (also a keep-alive comment, so a gone client is noticed).
                let (merged, sink) = AsyncStream<Bool>.makeStream(bufferingPolicy: .bufferingNewest(2))
                group.addTask {
                    for await _ in changes { sink.yield(false) }
                    sink.finish()
                }
                group.addTask {
                    while (try? await Task.sleep(for: .seconds(Self.subscriptionRefresh))) != nil { sink.yield(true) }
                }
                for await tick in merged {
                    // The stream lives only as long as its session and the dapp's permission: a
                    // sign-out, "sign out everywhere" or a revocation (on any instance) ends it.
                    guard await stillAllowed() else { break }
                    await send(always: false)
                    if tick { stream.yield(ByteBuffer(string: ": keep-alive\n\n")) }
                }
                group.cancelAll()
            }
        }
    }

    struct SubscriptionUpdate: Encodable {
        let id: String
        let result: [InjectedAccount]
    }
}

/// A signing request as stored: the transaction payload (as Keyfob will sign it) or the raw data.
struct StoredRequest: Codable {
    var payload: SignerPayload.JSON? = nil
    var raw: PolkadotController.RawRequest? = nil
    /// Keyfob set mode 1 and its metadata hash: the dapp gets the signed transaction back.
    var keyfobSetMetadataHash: Bool? = nil
}

/// A signing message's request, checked: `pub(extrinsic.sign)`'s `SignerPayloadJSON` or
/// `pub(bytes.sign)`'s `SignerPayloadRaw`.
struct SigningRequest {
    let address: String
    let accountId: [UInt8]
    /// The bytes the account signs (a payload over 256 bytes is its BLAKE2b-256).
    let signingBytes: [UInt8]
    let extrinsic: SignerPayload?
    /// The raw data as sent, for `pub(bytes.sign)`.
    let data: [UInt8]?
    /// Keyfob set the metadata hash (the dapp gets `signedTransaction`).
    let keyfobSetMetadataHash: Bool

    init(type: String, stored: StoredRequest) throws(PolkadotError) {
        keyfobSetMetadataHash = stored.keyfobSetMetadataHash == true
        if type == "pub(extrinsic.sign)", let json = stored.payload {
            let payload = try SignerPayload(json)
            (address, accountId, signingBytes, extrinsic, data) = (payload.address, payload.accountId, payload.signingBytes, payload, nil)
        } else if type == "pub(bytes.sign)", let request = stored.raw {
            guard let decoded = SS58.decode(request.address) else {
                throw PolkadotError(.invalidAddress, "address is not an SS58 address")
            }
            guard let bytes = PolkadotHex.decode(request.data), bytes.count <= 64 * 1024 else {
                throw PolkadotError(.invalidPayload, "data must be 0x-prefixed hex of at most 64 KiB")
            }
            if let kind = request.type, kind != "bytes", kind != "payload" {
                throw PolkadotError(.invalidPayload, "type is bytes or payload")
            }
            (address, accountId, signingBytes, extrinsic, data) = (request.address, decoded.accountId, RawPayload.wrap(bytes), nil, bytes)
        } else {
            throw PolkadotError(.invalidPayload, "request is missing")
        }
    }
}

/// A value of any Encodable type, for replies whose result varies by message.
struct AnyEncodable: Encodable {
    private let encodeValue: (Encoder) throws -> Void
    init(_ value: some Encodable) { encodeValue = value.encode }
    func encode(to encoder: Encoder) throws { try encodeValue(encoder) }
}

extension SubstrateAccountRecord {
    /// Whether this account's key is the one `accountId` (an SS58 address's 32 bytes) names.
    func hasAccountId(_ accountId: [UInt8]) -> Bool { KeyType(rawValue: keyType)?.accountId(publicKey: publicKey) == accountId }
}
