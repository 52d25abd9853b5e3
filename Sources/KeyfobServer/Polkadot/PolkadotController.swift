import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Polkadot
import WebAuthn

/// How a Polkadot request reached Keyfob, stored with it as its `transport`: a Keyfob page signed
/// in by cookie, the browser extension, or an app (the Nova bridge) with a token.
enum PolkadotTransport {
    static let web = "polkadot-web"
    static let browserExtension = "polkadot-extension"
    static let bridge = "polkadot-bridge"
}

/// Polkadot dapps signing through a passkey: Substrate accounts in custody, the Nova bridge's
/// messages (`POST /api/polkadot/message`, for native apps and for Keyfob's own popup behind
/// `/polkadot.js`), and approvals confirmed with a passkey bound to what is signed.
///
///     GET  /api/polkadot/accounts                      the user's accounts
///     POST /api/polkadot/accounts                      create {type?, name?, network?}; import {mnemonic, path?} or {backup, password}
///     POST /api/polkadot/accounts/:id/export           {password, confirmation} → a polkadot-js JSON backup
///     POST /api/polkadot/accounts/:id/remove           {confirmation}
///     POST /api/polkadot/accounts/:id/settings         {acceptUnverified, confirmation} → the account
///     POST /api/polkadot/message                       {id, msgType, origin, request, url} → {type, result} | {type, error} | 202 {type, pending}
///     GET  /api/polkadot/subscribe?id=&url=            server-sent account lists for pub(accounts.subscribe)
///     GET  /api/polkadot/requests/:id                  a signing request's state and, once decided, its {type, result|error}
///     GET  /api/polkadot/requests/:id/details          what the approval page shows
///     POST /api/polkadot/requests/:id/challenge        passkey options bound to the payload's hash
///     POST /api/polkadot/requests/:id/approve          {assertion} → signs
///     POST /api/polkadot/requests/:id/reject
struct PolkadotController: Sendable {
    typealias Store = any PolkadotStore & ApprovalStore & CredentialStore & CeremonyStore & AuditStore & KeyWrapStore
    let store: Store
    let sessions: Sessions
    let substrate: SubstrateCustody
    let dispatcher: SignerDispatcher
    let confirmations: ActionConfirmations
    let configuration: ServerConfiguration
    let passkeys: PasskeyCheck
    let events: SubstrateAccountEvents
    let streamSlots: StreamSlots
    let now: @Sendable () -> Date
    /// scrypt for JSON backups (32 MiB a call): at most two at once.
    let scryptSlots = ScryptSlots(limit: 2)
    /// `metadata.provide` an account may send: each carries up to 4 MiB to read and keep (8 at once, 60 an hour;
    /// `/polkadot.js` sends it again with each signature, and the stored one serves when it is refused).
    let metadataRate = RateLimiter(rate: 60, per: 3600, burst: 8)

    /// A signing request waits this long for the user.
    static let requestLifetime: TimeInterval = 300
    static let maxPending = 10
    static let authorizeMethod = "polkadot.authorize"
    /// A grant per account a connected site sees: `polkadot.account:<account id>`.
    static let shareMethod = "polkadot.account:"

    func addRoutes(to router: Router<KeyfobRequestContext>) {
        router.get("/api/polkadot/accounts", use: listAccounts)
        router.post("/api/polkadot/accounts", use: addAccount)
        router.post("/api/polkadot/accounts/:id/export", use: exportAccount)
        router.post("/api/polkadot/accounts/:id/remove", use: removeAccount)
        router.post("/api/polkadot/accounts/:id/settings", use: accountSettings)
        router.post("/api/polkadot/message", use: message)
        router.get("/api/polkadot/subscribe", use: subscribe)
        router.get("/api/polkadot/requests/:id", use: requestState)
        router.get("/api/polkadot/requests/:id/details", use: details)
        router.post("/api/polkadot/requests/:id/challenge", use: challenge)
        router.post("/api/polkadot/requests/:id/approve", use: approve)
        router.post("/api/polkadot/requests/:id/reject", use: reject)
    }

    func caller(_ auth: Sessions.Authenticated, origin: String, transport: String, request: Request, context: KeyfobRequestContext)
        -> SignerCaller
    {
        SignerCaller(
            userID: auth.user.id, username: auth.user.username, client: origin, transport: transport,
            limitKey: Hex.encode(auth.session.tokenHash), ip: sessions.client.resolve(request, context: context),
            unlock: auth.unlock)
    }

    // MARK: Accounts

    struct AccountReply: Encodable {
        let id, name, type, address, publicKey: String
        let network: Int
        let createdAt: Date
        /// Signs transactions Keyfob cannot check against the chain (off unless its owner said so).
        let acceptsUnverified: Bool
    }

    static func reply(_ record: SubstrateAccountRecord) -> AccountReply {
        let accountId = KeyType(rawValue: record.keyType)?.accountId(publicKey: record.publicKey) ?? record.publicKey
        return AccountReply(
            id: record.id, name: record.name, type: record.keyType,
            address: SS58.encode(accountId: accountId, prefix: UInt16(clamping: record.network)),
            publicKey: PolkadotHex.encode(record.publicKey), network: record.network, createdAt: record.createdAt,
            acceptsUnverified: record.acceptsUnverified)
    }

    @Sendable func listAccounts(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let accounts = try await store.substrateAccounts(ofUser: auth.user.id).map(Self.reply)
        return jsonResponse(["accounts": accounts])
    }

    /// Create (sr25519 unless `type` says), or import from a recovery phrase (with an optional
    /// derivation path) or a polkadot-js JSON backup. The signer must be unlocked.
    @Sendable func addAccount(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.requireUnlocked(request)
        let body = try await request.decodeJSON(AddAccount.self, limit: 64 * 1024, emptyIsObject: true)
        let who = caller(auth, origin: "account", transport: "rest", request: request, context: context)
        let record = try await dispatcher.perform("polkadot.account_added", for: who) { _ in
            try await add(body, auth: auth)
        }
        events.changed(auth.user.id)
        return jsonResponse(Self.reply(record), status: .created)
    }

    /// A new or imported account, checked and stored.
    private func add(_ body: AddAccount, auth: Sessions.Authenticated) async throws -> SubstrateAccountRecord {
        let name = body.name?.trimmingCharacters(in: .whitespaces) ?? ""
        guard name.utf8.count <= 64, !name.contains(where: { $0.isNewline }) else {
            throw KeyfobError.invalid("name is at most 64 bytes on one line")
        }
        let network = body.network ?? Int(SS58.generic)
        guard (0..<16384).contains(network), network != 46, network != 47 else {
            throw KeyfobError.invalid("network is an SS58 prefix: 0 Polkadot, 2 Kusama, 42 generic Substrate")
        }
        let type = body.type ?? .sr25519
        guard body.mnemonic == nil || body.backup == nil else {
            throw KeyfobError.invalid("send a mnemonic or a backup, not both (neither: a new random account)")
        }
        guard body.path == nil || body.mnemonic != nil else { throw KeyfobError.invalid("a derivation path goes with a mnemonic") }
        // An imported key may be known to someone else: only the owner's passkey brings one in.
        if body.mnemonic != nil || body.backup != nil {
            try await confirmations.verify(body.confirmation, .importPolkadot, target: "", for: auth)
        }
        let key: SubstrateKey
        do {
            if let phrase = body.mnemonic {
                let path = body.path ?? ""
                guard path.isEmpty || path.hasPrefix("/") else {
                    throw PolkadotError(.invalidDerivationPath, "a derivation path starts with / or //, for example //polkadot//0")
                }
                key = try SubstrateKey(type: type, secretURI: phrase + path)
            } else if let backup = body.backup {
                guard let password = body.password else { throw KeyfobError.invalid("the backup's password is missing") }
                key = try await scryptSlots.run(for: auth.user.id) {
                    try JSONBackup.importKey(backup, password: password)
                }
            } else {
                var seed = randomBytes(32)
                defer { wipe(&seed) }
                key = try SubstrateKey(type: type, seed: seed)
            }
        } catch let error as PolkadotError {
            throw KeyfobError(error)
        }
        let defaultName = body.backup != nil ? "Imported" : "Polkadot account"
        return try await substrate.add(
            key, name: name.isEmpty ? defaultName : name, network: UInt16(network), userID: auth.user.id, unlock: auth.unlock)
    }

    /// `POST /api/polkadot/accounts`: every field optional, each of one type (a wrong one is a 400,
    /// never a default: a backup sent as a string must not become a new random account).
    struct AddAccount: Decodable {
        var name: String?
        var network: Int?
        var type: KeyType?
        var mnemonic: String?
        var path: String?
        /// A polkadot-js account file (a JSON object; anything else is refused as it is read).
        var backup: JSONBackup.File?
        var password: String?
        /// The `polkadot.import` confirmation a mnemonic or a backup needs.
        var confirmation: AuthenticationCredential?
    }

    struct AccountSettings: Decodable {
        var acceptUnverified: Bool
        /// The `polkadot.accept_unverified` confirmation on this account's id.
        var confirmation: AuthenticationCredential?
    }

    /// Whether the account signs transactions Keyfob cannot check (blind signing): changed only
    /// with a passkey assertion made for it (`polkadot.accept_unverified` on the account id),
    /// either way, and audited.
    @Sendable func accountSettings(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let id = context.parameters.get("id") ?? ""
        let body = try await request.decodeJSON(AccountSettings.self, limit: 16 * 1024)
        let who = caller(auth, origin: "account", transport: "rest", request: request, context: context)
        let record = try await dispatcher.perform("polkadot.accept_unverified", for: who, limit: .uncounted) { _ in
            try await confirmations.verify(body.confirmation, .polkadotUnverified, target: id, for: auth)
            guard try await store.setSubstrateAccountAcceptsUnverified(id: id, ofUser: auth.user.id, body.acceptUnverified) else {
                throw KeyfobError(.requestNotFound, "you have no Polkadot account with this id", status: .notFound)
            }
            return try await account(id, of: auth.user.id)
        }
        return jsonResponse(Self.reply(record))
    }

    struct ExportAccount: Decodable {
        var password: String?
        var confirmation: AuthenticationCredential?
    }

    func account(_ id: String, of userID: String) async throws -> SubstrateAccountRecord {
        guard let record = try await store.substrateAccounts(ofUser: userID).first(where: { $0.id == id }) else {
            throw KeyfobError(.requestNotFound, "you have no Polkadot account with this id", status: .notFound)
        }
        return record
    }

    /// A polkadot-js JSON backup under the given password: the key leaves Keyfob, so a passkey
    /// assertion made for this (`polkadot.export` on the account id) is required.
    @Sendable func exportAccount(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.requireUnlocked(request)
        let id = context.parameters.get("id") ?? ""
        let body = try await request.decodeJSON(ExportAccount.self, limit: 16 * 1024, emptyIsObject: true)
        let who = caller(auth, origin: "account", transport: "rest", request: request, context: context)
        let file = try await dispatcher.perform("polkadot.export", for: who) { _ in
            try await confirmations.verify(body.confirmation, .exportPolkadot, target: id, for: auth)
            guard let password = body.password, password.count >= 8 else {
                throw KeyfobError.invalid("choose a password of at least 8 characters for the backup")
            }
            let record = try await account(id, of: auth.user.id)
            let key = try await substrate.open(record, unlock: auth.unlock)
            let (name, prefix) = (record.name, UInt16(clamping: record.network))
            return try await scryptSlots.run(for: auth.user.id) {
                jsonBytes(JSONBackup.export(key, password: password, name: name, prefix: prefix))
            }
        }
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: file)))
    }

    /// Removing destroys the key: a passkey assertion made for it (`polkadot.remove`).
    @Sendable func removeAccount(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.requireUnlocked(request)
        let id = context.parameters.get("id") ?? ""
        let assertion = try await ActionConfirmations.assertion(in: request)
        let who = caller(auth, origin: "account", transport: "rest", request: request, context: context)
        try await dispatcher.perform("polkadot.account_removed", for: who, limit: .uncounted) { _ in
            try await confirmations.verify(assertion, .removePolkadot, target: id, for: auth)
            guard try await store.deleteSubstrateAccount(id: id, ofUser: auth.user.id) else {
                throw KeyfobError(.requestNotFound, "you have no Polkadot account with this id", status: .notFound)
            }
        }
        events.changed(auth.user.id)
        return jsonResponse(["removed": true])
    }
}
