import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import NIOConcurrencyHelpers
import NIOPosix
import Nostr
import WebAuthn

/// The signer over REST (DESIGN.md §4.1–§4.3, §4.6): the seven methods for the user's own
/// signed-in app, key import and export, and the audit history.
struct SignerController: Sendable {
    let sessions: Sessions
    let dispatcher: SignerDispatcher
    let custody: KeyCustody
    let store: any AuditStore & PolkadotStore
    let configuration: ServerConfiguration
    let confirmations: ActionConfirmations
    let now: @Sendable () -> Date
    /// scrypt (NIP-49) takes 64–256 MiB a call: at most this many run at once.
    let scryptSlots = ScryptSlots(limit: 2)

    func addRoutes(to router: Router<KeyfobRequestContext>) {
        router.post("/api/signer/key", use: importKey)
        router.post("/api/signer/key/export", use: exportKey)
        router.post("/api/signer/key/check", use: checkImport)
        router.get("/api/signer/history", use: history)
        router.post("/api/signer/:method", use: method)
    }

    // MARK: Methods

    @Sendable func method(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let name = context.parameters.get("method") ?? ""
        guard let method = SignerMethod(rawValue: name) else {
            throw KeyfobError(
                .unsupportedType,
                "\"\(name.prefix(64))\" is not a signer method; use one of \(SignerMethod.allCases.map(\.rawValue).joined(separator: ", "))",
                status: .notFound)
        }
        let caller = try await unlockedCaller(request, context: context)
        let body = try await request.jsonObject(limit: configuration.maxBodySize)
        let id = try echoedID(body)
        let result = try await dispatcher.run(method, for: caller) { try SignerCall.parse(method: method, body: body, now: now()) }

        var reply = SignerReply(result: result.result, id: id)
        switch method {
        case .getPublicKey:
            reply.pubkey = result.pubkey.hex
            reply.npub = NIP19.npub(result.pubkey)
        case .signEvent, .decryptZapEvent:
            reply.event = result.event.map(EventObject.init)
        default: break
        }
        return jsonResponse(reply)
    }

    /// A session whose signer is unlocked, as the dispatcher's caller. A locked one is audited.
    func unlockedCaller(_ request: Request, context: KeyfobRequestContext) async throws -> SignerCaller {
        try await unlockedSession(request, context: context).caller
    }

    /// The session (for confirmations bound to it) and the caller it makes; the signer must be unlocked.
    func unlockedSession(_ request: Request, context: KeyfobRequestContext) async throws
        -> (auth: Sessions.Authenticated, caller: SignerCaller)
    {
        let auth = try await sessions.require(request)
        let caller = caller(auth, request: request, context: context)
        guard auth.session.isUnlocked(at: now()) else {
            throw try await dispatcher.refusal(
                .signerLocked, method: request.uri.path.split(separator: "/").last.map(String.init) ?? "", for: caller)
        }
        return (auth, caller)
    }

    /// The signed-in app's session as the dispatcher's caller.
    func caller(_ auth: Sessions.Authenticated, request: Request, context: KeyfobRequestContext) -> SignerCaller {
        SignerCaller(
            userID: auth.user.id, username: auth.user.username, client: "api", transport: "rest",
            limitKey: Self.limitKey(auth),
            ip: sessions.client.resolve(request, context: context), unlock: auth.unlock)
    }

    /// The signer's rate-limit key for a REST session: the one limit its calls, imports and checks share.
    static func limitKey(_ auth: Sessions.Authenticated) -> String { Hex.encode(auth.session.tokenHash) }

    /// `id`, when sent, is echoed back; it must be a string (NIP-46 and NIP-155 ids are).
    func echoedID(_ body: [String: Any]) throws -> String? {
        guard let raw = body["id"], !(raw is NSNull) else { return nil }
        guard let id = raw as? String, id.utf8.count <= 256 else {
            throw KeyfobError.invalid("id must be a string of at most 256 bytes")
        }
        return id
    }

    // MARK: Import and export

    @Sendable func importKey(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let (auth, caller) = try await unlockedSession(request, context: context)
        let body = try await request.decodeJSON(KeyTransfer.self, limit: configuration.maxBodySize, emptyIsObject: true)
        let record = try await dispatcher.perform("import_key", for: caller) { _ in
            try await refuseReplacingWhilePolkadotAccounts(userID: auth.user.id)
            // Replacing the key is an account change: an assertion made for it, by an older passkey.
            _ = try await confirmations.verify(body.confirmation, .importKey, target: "", for: auth)
            let key = try await importedKey(in: body, userID: auth.user.id)
            return try await custody.replace(userID: caller.userID, with: key, unlock: caller.unlock)
        }
        let pubkey = try PublicKey(hex: record.pubkey)
        return jsonResponse(["pubkey": pubkey.hex, "npub": NIP19.npub(pubkey)])
    }

    /// The npub of a key the user is about to import, so the page can name both keys before the
    /// passkey confirms the replacement. Nothing is stored; the key is not kept.
    @Sendable func checkImport(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let body = try await request.decodeJSON(KeyTransfer.self, limit: configuration.maxBodySize, emptyIsObject: true)
        // An ncryptsec costs an scrypt run: checks share the signer's per-session limit, and are
        // audited like the import they prepare (the key itself is not kept).
        let key = try await dispatcher.perform("check_import", for: caller(auth, request: request, context: context)) { _ in
            try await refuseReplacingWhilePolkadotAccounts(userID: auth.user.id)
            return try await importedKey(in: body, userID: auth.user.id)
        }
        let current = try await custody.record(for: auth.user.id)
        let pubkey = key.publicKey
        return jsonResponse(ImportCheck(pubkey: pubkey.hex, npub: NIP19.npub(pubkey), sameAsCurrent: pubkey.hex == current.pubkey))
    }

    /// The bodies of import, its check and export: the key in exactly one of `nsec`, `secret` (64
    /// hex) or `ncryptsec` (with `password`); export's `password`; the passkey `confirmation`.
    struct KeyTransfer: Decodable {
        var nsec, secret, ncryptsec, password: String?
        var confirmation: AuthenticationCredential?
    }

    struct ImportCheck: Encodable {
        let pubkey: String
        let npub: String
        /// The key given is the one Keyfob already holds: importing it would change nothing.
        let sameAsCurrent: Bool
    }

    /// Polkadot accounts are sealed under a key derived from the nostr key: replacing it would lose them.
    func refuseReplacingWhilePolkadotAccounts(userID: String) async throws {
        guard try await store.substrateAccounts(ofUser: userID).isEmpty else {
            throw KeyfobError(
                .permissionDenied,
                "your Polkadot accounts are sealed with your current nostr key: export them (JSON backup) and remove them before replacing it",
                status: .conflict)
        }
    }

    /// The secret key in an import body: exactly one of `nsec`, `secret` (64 hex) or `ncryptsec` with `password`.
    func importedKey(in body: KeyTransfer, userID: String) async throws -> SecretKey {
        let given = [("nsec", body.nsec), ("secret", body.secret), ("ncryptsec", body.ncryptsec)].filter { $0.1 != nil }
        guard given.count == 1, let value = given[0].1 else {
            throw KeyfobError.invalid("send exactly one of nsec, secret (64 hex characters) or ncryptsec with password")
        }
        do {
            switch given[0].0 {
            case "nsec":
                guard case .nsec(var bytes) = try NIP19.decode(value) else {
                    throw KeyfobError(.invalidContent, "nsec must be an nsec1… string")
                }
                defer { wipe(&bytes) }
                return try SecretKey(bytes: bytes)
            case "secret":
                return try SecretKey(hex: value)
            default:
                guard let password = body.password, !password.isEmpty else {
                    throw KeyfobError.invalid("an ncryptsec needs its password")
                }
                return try await scryptSlots.run(for: userID) {
                    try NIP49.decrypt(value, password: password, maxLogN: configuration.maxImportLogN)
                }
            }
        } catch let error as NostrError {
            throw error.code == .invalidRequest ? KeyfobError(.invalidContent, "not a valid secret key") : KeyfobError(error)
        }
    }

    @Sendable func exportKey(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let (auth, caller) = try await unlockedSession(request, context: context)
        let body = try await request.decodeJSON(KeyTransfer.self, limit: configuration.maxBodySize, emptyIsObject: true)
        let ncryptsec = try await dispatcher.perform("export_key", for: caller) { _ in
            guard let password = body.password, password.count >= 8, password.utf8.count <= 1024 else {
                throw KeyfobError.invalid("choose a password of at least 8 characters to encrypt the backup with")
            }
            // The key leaving Keyfob is a takeover if it is not the owner: an assertion made for it.
            _ = try await confirmations.verify(body.confirmation, .exportKey, target: "", for: auth)
            let key = try await custody.open(custody.record(for: caller.userID), unlock: caller.unlock)
            return try await scryptSlots.run(for: caller.userID) { try NIP49.encrypt(key, password: password, logN: 16) }
        }
        return jsonResponse(["ncryptsec": ncryptsec])
    }

    // MARK: History

    @Sendable func history(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        var before: Int64?
        if let text = request.queryValue("before"), !text.isEmpty {
            guard let value = Int64(text), value > 0 else { throw KeyfobError.invalid("before must be a cursor from a previous page") }
            before = value
        }
        var limit = 50
        if let text = request.queryValue("limit") {
            guard let value = Int(text), (1...200).contains(value) else { throw KeyfobError.invalid("limit must be 1 to 200") }
            limit = value
        }
        let entries = try await store.auditEntries(ofUser: auth.user.id, before: before, limit: limit)
        let formatter = ISO8601DateFormatter()
        let list = entries.map { e in
            HistoryReply.Entry(
                id: String(e.id), at: formatter.string(from: e.at), client: e.client, transport: e.transport,
                method: e.method, outcome: e.outcome.rawValue, kind: e.kind, eventId: e.eventID, code: e.code)
        }
        return jsonResponse(HistoryReply(entries: list, next: entries.count == limit ? entries.last.map { String($0.id) } : nil))
    }
}

/// What a signer method answers over REST.
struct SignerReply: Encodable {
    let result: String
    let id: String?
    var pubkey: String?
    var npub: String?
    var event: EventObject?
}

/// A page of the signing history, newest first; `next` is the cursor of the page after.
struct HistoryReply: Encodable {
    struct Entry: Encodable {
        let id, at, client, transport, method, outcome: String
        let kind: Int?
        let eventId: String?
        let code: String?
    }
    let entries: [Entry]
    let next: String?
}

/// Where password-stretching runs (NIP-49's scrypt, polkadot-js backups' scrypt): a pool of its
/// own, so a flood of scrypt never waits ahead of the shared pool's other work; at most `limit` a
/// controller at once (a 2^18 scrypt is 256 MiB), and a per-account rate, so one account with
/// many sessions cannot keep the pool busy.
final class ScryptSlots: Sendable {
    private let inUse = NIOLockedValueBox(0)
    let limit: Int
    /// Scrypt runs an account may start, whichever controller runs them: 10 at once, 30 an hour.
    static let perAccount = RateLimiter(rate: 30, per: 3600, burst: 10)
    static let pool: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        return pool
    }()

    init(limit: Int) { self.limit = limit }

    func run<R: Sendable>(for userID: String, _ body: @escaping @Sendable () throws -> R) async throws -> R {
        if let retryAfter = Self.perAccount.take(userID, now: Date()) { throw KeyfobError.rateLimited(retryAfter: retryAfter) }
        let taken = inUse.withLockedValue { count -> Bool in
            guard count < limit else { return false }
            count += 1
            return true
        }
        guard taken else { throw KeyfobError.rateLimited(retryAfter: 2) }
        defer { inUse.withLockedValue { $0 -= 1 } }
        return try await Self.pool.runIfActive(body)
    }
}
