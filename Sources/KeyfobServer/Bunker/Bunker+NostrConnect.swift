import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Logging
import NIOConcurrencyHelpers
import Nostr
import ServiceLifecycle
import WebAuthn

/// `nostrconnect://`: the client names the relays and its key, the user connects it from Keyfob's page.
extension Bunker {
    /// `{"name": …, "url": …}` a client may send with `connect` (its own claim, shown unverified).
    static func metadata(_ text: String) -> (name: String?, url: String?) {
        let object = NIP46.clientMetadata(text)
        return (clean(object["name"]), clean(object["url"]))
    }

    /// The relays a pasted URL names: each a public `wss://` relay (`RelayAddressPolicy`), and the
    /// user within their caps; all of them within the links this server holds.
    func checkRelays(_ url: NostrConnectURL, userID: String) async throws {
        for relay in url.relays {
            do { try await relayPolicy.check(relay) } catch {
                throw KeyfobError.invalid("the relay \"\(LogText.escaped(String(relay.prefix(80))))\" \(error.reason)")
            }
        }
        let others = try await store.nostrConnectClients().filter { !($0.userID == userID && $0.clientPubkey == url.client.hex) }
        let mine = others.filter { $0.userID == userID }
        guard mine.count < Self.maxNostrConnectClients else {
            throw KeyfobError(
                .invalidRequest,
                "\(Self.maxNostrConnectClients) clients are connected through relays of their own; "
                    + "disconnect one on the account page first", status: .conflict)
        }
        let configured = Set(configuredRelays)
        guard Set(mine.flatMap(\.relays) + url.relays).subtracting(configured).count <= Self.maxRelaysPerUser else {
            throw KeyfobError(
                .invalidRequest,
                "your clients name more than \(Self.maxRelaysPerUser) relays of their own; "
                    + "disconnect one on the account page first", status: .conflict)
        }
        guard Set(others.flatMap(\.relays) + url.relays).union(configured).count <= ExternalRelays.maxLinks else {
            throw KeyfobError(
                .rateLimited,
                "this server holds as many relay links as it can; use a client on the server's own relay "
                    + "(a bunker:// URL) instead", status: .serviceUnavailable)
        }
    }

    /// A client's self-description as shown: no control characters, at most 100 of them.
    static func clean(_ value: Any?) -> String? {
        guard let text = value as? String, !text.isEmpty else { return nil }
        return String(text.unicodeScalars.filter { $0.properties.generalCategory != .control }.prefix(100).map(Character.init))
    }

    /// The user pasted a client's `nostrconnect://` URL: the client is connected (with the relays
    /// it named, where Keyfob now listens for it) and gets `connect`'s answer, its own secret.
    /// Stored only while `session` (the one that pasted it) is, as a bunker URL's secret is.
    func connect(_ url: NostrConnectURL, userID: String, unlock: SessionUnlock?, session: [UInt8]) async throws -> BunkerClientRecord {
        let at = now()
        if let wait = nostrConnectLimiter.take(userID, now: at) {
            throw KeyfobError(
                .rateLimited, "too many nostrconnect URLs pasted lately; try again in \(wait) s", status: .tooManyRequests,
                retryAfter: wait)
        }
        try await checkRelays(url, userID: userID)
        let record = try await signer(of: userID, unlock: unlock)
        let key = try secretKey(of: record, unlock: unlock)
        let client = BunkerClientRecord(
            userID: userID, clientPubkey: url.client.hex, name: Self.clean(url.name), url: Self.clean(url.url),
            perms: url.perms.map(\.string).joined(separator: ","), createdAt: at, lastUsedAt: at,
            relays: url.relays)
        do { try await store.putBunkerClient(client, session: session) } catch StoreError.notFound { throw KeyfobError.unauthorized }
        await external?.ensure(url.relays, clientPubkey: client.clientPubkey, signer: record.pubkey)
        // Queued as well: another instance may hold the external relays and send it from the queue.
        try await send(
            NIP46.Response(id: Hex.encode(randomBytes(8)), result: url.secret), with: key,
            to: url.client, encryption: .nip44)
        logger.info("nip46.nostrconnect", metadata: ["client": "\(client.clientPubkey.prefix(12))", "relays": "\(url.relays.count)"])
        return client
    }
}
