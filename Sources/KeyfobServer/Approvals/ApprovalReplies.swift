import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Nostr
import WebAuthn

/// What the approval endpoints answer, as the account and approval pages read it.
struct PendingRequestsReply: Encodable {
    struct Item: Encodable {
        let id, client, transport, method, createdAt, expiresAt: String
        let kind: Int?
        let kindName: String?
        let clientName: String?
    }
    let requests: [Item]
}

/// One request as the approval page shows it.
struct ApprovalView: Encodable {
    struct Account: Encodable { let username, npub, pubkey: String }
    let id, transport, client, method, expiresAt: String
    let account: Account
    let signerLocked, needsPasskey: Bool
    let remember: [String]
    let firstFromClient: Bool
    var clientName: String?
    var requestedPerms: [String]?
    var kind: Int?
    var kindName: String?
    var clientNpub: String?
    var event: EventObject?
    var plaintext, ciphertext, peer, peerNpub: String?
    var warnings: [String] = []
}

/// Where the page goes after a decision: `null` when the app gets its answer another way (NIP-46).
struct RedirectReply: Encodable {
    let redirect: String?
    enum CodingKeys: CodingKey { case redirect }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(redirect, forKey: .redirect)
    }
}

struct GrantsReply: Encodable {
    struct Item: Encodable {
        let id, client, method: String
        let allow: Bool
        let createdAt: String
        let kind: Int?
        let expiresAt: String?
    }
    let grants: [Item]
}

extension GrantRecord {
    /// What the browser extension's session may see and revoke (#56): an allowance (revoking it takes
    /// power away; a refusal it may not lift) given to a client named like a web origin —
    /// `http://host[:port]`, or a host name with a dot or `localhost`, with an optional port — never
    /// a bunker app's (`nip46:`) nor an app's named by its URL scheme.
    var isWebSiteAllowance: Bool {
        guard allow, !client.hasPrefix("nip46:") else { return false }
        let host = client.hasPrefix("http://") ? String(client.dropFirst(7)) : client
        return host.wholeMatch(of: /(localhost|[a-z0-9-]+(\.[a-z0-9-]+)+)(:[0-9]{1,5})?/) != nil
    }
}

extension GrantsReply.Item {
    init(_ grant: GrantRecord) {
        let formatter = ISO8601DateFormatter()
        self.init(
            id: grant.id, client: grant.client, method: grant.method, allow: grant.allow,
            createdAt: formatter.string(from: grant.createdAt), kind: grant.kind, expiresAt: grant.expiresAt.map(formatter.string(from:)))
    }
}

/// What a passkey-confirmed approval keeps: the text the passkey signed and the assertion itself
/// (without its PRF output), checkable by anyone with the passkey's public key.
struct Receipt: Encodable {
    let version: Int
    let committed, challenge, credentialId, publicKey: String
    let algorithm: Int
    let rpId: String
    let assertion: AuthenticationCredential
}

/// A nostr event as a JSON object in NIP-01's field names (`sig` absent before signing).
struct EventObject: Encodable {
    let id, pubkey: String
    let createdAt: Int64
    let kind: Int
    let tags: [[String]]
    let content: String
    let sig: String?

    enum CodingKeys: String, CodingKey {
        case id, pubkey, kind, tags, content, sig
        case createdAt = "created_at"
    }
}

extension EventObject {
    init(_ event: Event) {
        self.init(
            id: Hex.encode(event.id), pubkey: event.pubkey.hex, createdAt: event.createdAt, kind: event.kind,
            tags: event.tags, content: event.content, sig: Hex.encode(event.sig))
    }
}
