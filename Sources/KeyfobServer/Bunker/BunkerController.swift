import Foundation
import Hummingbird
import KeyfobStore
import Nostr

/// `GET /api/signer/bunker`, `POST /api/signer/bunker/rotate`, `GET /api/signer/bunker/clients`,
/// `DELETE /api/signer/bunker/clients/<pubkey>` (DESIGN.md §4.7). A bunker URL hands out a way
/// to connect a client, so it needs an unlocked session, as revoking does.
struct BunkerController: Sendable {
    let bunker: Bunker
    let sessions: Sessions
    let configuration: ServerConfiguration

    func addRoutes(to router: Router<KeyfobRequestContext>) {
        // Both give a URL with a new single-use secret (the unused one before it stops working);
        // `rotate` stays for clients written against it.
        router.get("/api/signer/bunker") { request, _ in try await self.url(request) }
        router.post("/api/signer/bunker/rotate") { request, _ in try await self.url(request) }
        router.get("/api/signer/bunker/clients", use: clients)
        router.delete("/api/signer/bunker/clients/:pubkey", use: revoke)
        router.post("/api/signer/nostrconnect", use: nostrConnect)
        // The page /.well-known/nostr.json's nostrconnect_url opens.
        router.get("/connect/**") { _, _ in try htmlPage("connect.html", in: configuration.publicDirectory) }
    }

    /// `POST /api/signer/nostrconnect`'s body.
    struct Pasted: Decodable {
        var url: String?
    }

    /// A client's `nostrconnect://` URL, pasted by the user (DESIGN.md §4.7).
    @Sendable func nostrConnect(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.requireUnlocked(request)
        let body = try await request.decodeJSON(Pasted.self, limit: configuration.maxBodySize)
        guard let text = body.url, text.utf8.count <= 8192 else {
            throw KeyfobError.invalid("url must be the client's nostrconnect:// URL")
        }
        let url: NostrConnectURL
        do { url = try NostrConnectURL.parse(text) } catch {
            throw KeyfobError(.invalidRequest, "this is not a usable nostrconnect:// URL: \(error.message)")
        }
        guard url.relays.count <= 8 else { throw KeyfobError.invalid("a nostrconnect URL may name at most 8 relays") }
        let client = try await bunker.connect(url, userID: auth.user.id, unlock: auth.unlock, session: auth.session.tokenHash)
        return jsonResponse(
            ConnectedClientReply(
                pubkey: client.clientPubkey, relays: client.relays,
                perms: url.perms.map(\.string), name: client.name))
    }

    func url(_ request: Request) async throws -> Response {
        let auth = try await sessions.requireUnlocked(request)
        let relays = configuration.bunkerRelays
        guard !relays.isEmpty else {
            throw KeyfobError(
                .invalidRequest, "the built-in NIP-46 relay is off on this server (--nip46-port 0) and no --relay is set",
                status: .notFound)
        }
        let signer = try await bunker.signer(of: auth.user.id, unlock: auth.unlock)
        let (secret, expiresAt) = try await bunker.newSecret(of: signer, session: auth.session.tokenHash)
        let url = BunkerURL(signer: try PublicKey(hex: signer.pubkey), relays: relays, secret: secret)
        return jsonResponse(
            BunkerURLReply(
                url: url.string, pubkey: signer.pubkey, relays: relays,
                secretExpiresAt: Int(expiresAt.timeIntervalSince1970)))
    }

    @Sendable func clients(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        let list = try await bunker.store.bunkerClients(ofUser: auth.user.id).map { client in
            BunkerClientsReply.Client(
                pubkey: client.clientPubkey, perms: client.perms,
                createdAt: Int(client.createdAt.timeIntervalSince1970), name: client.name, url: client.url,
                lastUsedAt: client.lastUsedAt.map { Int($0.timeIntervalSince1970) })
        }
        return jsonResponse(BunkerClientsReply(clients: list))
    }

    @Sendable func revoke(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.requireUnlocked(request)
        guard let pubkey = context.parameters.get("pubkey"), pubkey.utf8.count == 64,
            try await bunker.disconnect(userID: auth.user.id, clientPubkey: pubkey.lowercased())
        else {
            throw KeyfobError(.requestNotFound, "you have no connected client with this key", status: .notFound)
        }
        return jsonResponse(["revoked": true])
    }
}

extension ServerConfiguration {
    /// Where clients reach the built-in relay: `wss://<host>/nip46` behind the TLS proxy, or the
    /// relay's own port on a local `http://localhost` setup.
    var builtInRelayURL: String? {
        guard let port = effectiveNIP46Port, let origin = effectiveOrigins.first,
            let url = URLComponents(string: origin), let host = url.host
        else { return nil }
        if url.scheme == "https" { return "wss://\(host)\(url.port.map { ":\($0)" } ?? "")/nip46" }
        return "ws://\(host):\(port)/nip46"
    }

    /// Relays users name: local ones (`ws://`, loopback) only while Keyfob itself runs on localhost.
    var relayAddressPolicy: RelayAddressPolicy { RelayAddressPolicy(allowsLocal: rpID == "localhost") }

    /// The relays a bunker URL names: the built-in one first, then the `--relay` ones.
    var bunkerRelays: [String] { (builtInRelayURL.map { [$0] } ?? []) + relays }
}

struct ConnectedClientReply: Encodable {
    let pubkey: String
    let relays: [String]
    let perms: [String]
    let name: String?
}

/// The account's bunker URL; its secret works once and until `secretExpiresAt` (seconds since 1970).
struct BunkerURLReply: Encodable {
    let url, pubkey: String
    let relays: [String]
    let secretExpiresAt: Int
}

struct BunkerClientsReply: Encodable {
    struct Client: Encodable {
        let pubkey, perms: String
        let createdAt: Int
        let name, url: String?
        let lastUsedAt: Int?
    }
    let clients: [Client]
}
