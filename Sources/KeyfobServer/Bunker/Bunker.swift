import Foundation
import KeyfobStore
import Logging
import Nostr
import COpenSSL
import WebAuthn

/// The NIP-46 remote signer behind the built-in relay: it reads every kind-24133 event p-tagged to
/// a signer key Keyfob holds, opens it with that key, answers the request, and publishes the
/// answer through the relay. Each user has one signer key (not their nostr key: clients learn that
/// with `get_public_key`). A client is connected once it sends `connect` with the user's current
/// secret (single use, 10 minutes); requests from any other key get no answer.
final class Bunker: Sendable {
    let store: any KeyfobStore
    let vault: KeyVault
    let custody: KeyCustody
    let hub: RelayHub
    let logger: Logger
    let now: @Sendable () -> Date
    static let secretLifetime: TimeInterval = 600

    init(store: any KeyfobStore, vault: KeyVault, custody: KeyCustody, hub: RelayHub, logger: Logger,
         now: @escaping @Sendable () -> Date) {
        self.store = store
        self.vault = vault
        self.custody = custody
        self.hub = hub
        self.logger = logger
        self.now = now
    }

    /// Starts reading the relay.
    func attach() {
        hub.listen { [self] event in
            guard event.kind == NIP46.kind else { return }
            Task { await self.handle(event) }
        }
    }

    // MARK: Signer keys and secrets

    /// The user's signer, made on first use.
    func signer(of userID: String) async throws -> BunkerSignerRecord {
        if let existing = try await store.bunkerSigner(ofUser: userID) { return existing }
        let key = SecretKey.generate()
        let sealed = try key.withUnsafeSecretBytes { bytes in try vault.seal(bytes, context: Self.context(userID)) }
        return try await store.insertBunkerSignerIfAbsent(BunkerSignerRecord(
            userID: userID, pubkey: key.publicKey.hex, nonce: sealed.nonce, sealed: sealed.sealed, secretHash: nil,
            secretExpiresAt: nil, createdAt: now()))
    }

    static func context(_ userID: String) -> String { "bunker-signer:\(userID)" }

    func secretKey(of record: BunkerSignerRecord) throws -> SecretKey {
        guard var bytes = vault.open(nonce: record.nonce, sealed: record.sealed, context: Self.context(record.userID)) else {
            throw APIError("internal_error", "the bunker key cannot be opened with this server's master key", status: .internalServerError)
        }
        defer { bytes.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) } }
        return try SecretKey(bytes: bytes)
    }

    /// The secret that expires at `expiry` (derived, so it can be shown again; only its hash is stored).
    func secret(userID: String, expiry: Date) throws -> String {
        Base64URL.encode(try vault.derive("bunker-secret:\(userID):\(expiry.timeIntervalSince1970)"))
    }

    /// The current secret, or a new one when there is none (or `rotate`).
    func currentSecret(of record: BunkerSignerRecord, rotate: Bool) async throws -> (secret: String, expiresAt: Date) {
        // The stored hash must match what this master key derives (after a rotation it does not).
        if !rotate, let hash = record.secretHash, let expiry = record.secretExpiresAt, expiry > now() {
            let value = try secret(userID: record.userID, expiry: expiry)
            if sha256(Array(value.utf8)) == hash { return (value, expiry) }
        }
        let expiry = Date(timeIntervalSince1970: (now().timeIntervalSince1970 + Self.secretLifetime).rounded())
        let value = try secret(userID: record.userID, expiry: expiry)
        _ = try await store.setBunkerSecret(userID: record.userID, secretHash: sha256(Array(value.utf8)), expiresAt: expiry)
        return (value, expiry)
    }

    // MARK: Requests

    func handle(_ event: Event) async {
        let addressed = event.tags.filter { $0.count >= 2 && $0[0] == "p" }.map { $0[1] }.prefix(4)
        for pubkey in addressed {
            guard let record = try? await store.bunkerSigner(pubkey: pubkey), let key = try? secretKey(of: record) else { continue }
            guard let (sender, message, encryption) = try? NIP46.unwrap(event, with: key) else { return }
            guard let request = try? NIP46.Request.parse(message) else {
                logger.notice("nip46.unreadable", metadata: ["signer": "\(pubkey.prefix(12))"])
                return
            }
            guard let response = await answer(request, from: sender, signer: record) else { return }
            do {
                let reply = try NIP46.wrap(response.json, from: key, to: sender, createdAt: Int64(now().timeIntervalSince1970),
                                           encryption: encryption)
                hub.publish(reply)
            } catch {
                logger.error("nip46.reply_failed", metadata: ["code": "\(error.code.rawValue)"])
            }
            return
        }
    }

    /// The answer to `request` from `sender`, or nil for none (a key that never connected).
    func answer(_ request: NIP46.Request, from sender: PublicKey, signer record: BunkerSignerRecord) async -> NIP46.Response? {
        let userID = record.userID
        let client = sender.hex
        let at = now()
        do {
            if request.method == "connect" {
                guard request.params.first?.lowercased() == record.pubkey else {
                    return NIP46.Response(id: request.id, result: nil, error: "connect names another signer")
                }
                if try await store.bunkerClient(userID: userID, clientPubkey: client) != nil {
                    try await store.touchBunkerClient(userID: userID, clientPubkey: client, at: at)
                    return NIP46.Response(id: request.id, result: "ack")
                }
                guard request.params.count >= 2, !request.params[1].isEmpty,
                      try await store.consumeBunkerSecret(userID: userID, secretHash: sha256(Array(request.params[1].utf8)), now: at) else {
                    logger.notice("nip46.connect_refused", metadata: ["client": "\(client.prefix(12))"])
                    return NIP46.Response(id: request.id, result: nil, error: "unauthorized: the secret is wrong, used or expired")
                }
                let perms = request.params.count >= 3 ? (try? NIP46Permission.parseList(request.params[2]))?.map(\.string) ?? [] : []
                let metadata: (name: String?, url: String?) = request.params.count >= 4 ? Self.metadata(request.params[3]) : (nil, nil)
                try await store.putBunkerClient(BunkerClientRecord(userID: userID, clientPubkey: client, name: metadata.name,
                                                                   url: metadata.url, perms: perms.joined(separator: ","),
                                                                   createdAt: at, lastUsedAt: at))
                logger.info("nip46.connected", metadata: ["client": "\(client.prefix(12))"])
                return NIP46.Response(id: request.id, result: "ack")
            }
            // Anyone else gets silence: the signer does not exist for them.
            guard try await store.bunkerClient(userID: userID, clientPubkey: client) != nil else { return nil }
            try await store.touchBunkerClient(userID: userID, clientPubkey: client, at: at)
            switch request.method {
            case "ping":
                return NIP46.Response(id: request.id, result: "pong")
            case "get_public_key":
                return NIP46.Response(id: request.id, result: try await custody.publicKey(of: userID).hex)
            case "switch_relays":
                // No relays beyond the built-in one are configured: stay where you are.
                return NIP46.Response(id: request.id, result: nil)
            case "logout":
                _ = try await store.deleteBunkerClient(userID: userID, clientPubkey: client)
                return NIP46.Response(id: request.id, result: "ack")
            case "sign_event", "nip04_encrypt", "nip04_decrypt", "nip44_encrypt", "nip44_decrypt":
                // Approval through the bunker (grants, auth_url and the approval page) is the
                // next step of issue #9; until then these are refused, never silently dropped.
                return NIP46.Response(id: request.id, result: nil,
                                      error: "\(request.method) through the bunker needs approval, which Keyfob does not offer yet")
            default:
                return NIP46.Response(id: request.id, result: nil, error: "unknown method \(request.method.prefix(32))")
            }
        } catch {
            logger.warning("nip46.failed", metadata: ["method": "\(request.method.prefix(32))"])
            return NIP46.Response(id: request.id, result: nil, error: "the signer failed; try again")
        }
    }

    /// `{"name": …, "url": …}` a client may send with `connect` (its own claim, shown unverified).
    static func metadata(_ text: String) -> (name: String?, url: String?) {
        guard text.utf8.count <= 4096,
              let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else { return (nil, nil) }
        func clean(_ value: Any?) -> String? {
            guard let text = value as? String, !text.isEmpty else { return nil }
            return String(text.unicodeScalars.filter { $0.properties.generalCategory != .control }.prefix(100).map(Character.init))
        }
        return (clean(object["name"]), clean(object["url"]))
    }
}
