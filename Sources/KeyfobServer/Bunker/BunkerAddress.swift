import Foundation
import Nostr

/// A NIP-46 request that waits for the user's decision: who sent it, to which signer key, how its
/// content was encrypted, and the request itself — everything needed to answer it later, on any
/// instance. Stored sealed with the pending request (it may carry a plaintext).
struct BunkerAddress: Codable, Sendable, Equatable {
    static let prefix = "nip46:"

    /// The signer key the request was addressed to (hex).
    let signer: String
    /// The client's key (hex): who gets the answer.
    let client: String
    /// `nip44` or `nip04`: the answer is encrypted as the request was.
    let encryption: String
    let requestID: String
    let method: String
    let params: [String]
    /// The client's own name from `connect` (unverified).
    let name: String?

    /// The client as grants, limits and the audit log know it.
    var clientIdentifier: String { Self.clientIdentifier(client) }
    static func clientIdentifier(_ pubkey: String) -> String { prefix + pubkey }

    var cipher: NIP46.Encryption { encryption == "nip04" ? .nip04 : .nip44 }

    /// What a passkey confirmation commits to for encrypt/decrypt: the text handled.
    var payload: String {
        switch method {
        case "sign_event": params.first ?? ""
        default: params.count > 1 ? params[1] : ""
        }
    }

    var sealedForm: String {
        let json = (try? JSONEncoder().encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return Self.prefix + json
    }

    init(signer: String, client: String, encryption: NIP46.Encryption, request: NIP46.Request, name: String?) {
        self.signer = signer
        self.client = client
        self.encryption = encryption == .nip04 ? "nip04" : "nip44"
        self.requestID = request.id
        self.method = request.method
        self.params = request.params
        self.name = name
    }

    init?(sealedForm: String) {
        guard sealedForm.hasPrefix(Self.prefix),
            let decoded = try? JSONDecoder().decode(Self.self, from: Data(sealedForm.utf8.dropFirst(Self.prefix.utf8.count)))
        else {
            return nil
        }
        self = decoded
    }

    func call(now: Date) throws(KeyfobError) -> SignerCall { try Self.call(method: method, params: params, now: now) }

    /// The signer call a NIP-46 request asks for: `sign_event [event JSON]`,
    /// `nip04_/nip44_encrypt [peer, plaintext]`, `nip04_/nip44_decrypt [peer, ciphertext]`.
    static func call(method: String, params: [String], now: Date) throws(KeyfobError) -> SignerCall {
        func param(_ index: Int, _ name: String) throws(KeyfobError) -> String {
            guard index < params.count else { throw KeyfobError(.invalidRequest, "\(method) needs \(name) as parameter \(index + 1)") }
            return params[index]
        }
        switch method {
        case "get_public_key":
            return .getPublicKey
        case "sign_event":
            let event = try SignerCall.unsignedEvent(try param(0, "the event JSON"), now: now)
            guard !SignerCall.neverSignedKinds.contains(event.kind) else {
                throw KeyfobError(.permissionDenied, "kind \(event.kind) is a direct-message rumor and must stay unsigned", status: .forbidden)
            }
            return .signEvent(event)
        case "nip04_encrypt", "nip44_encrypt":
            let peer = try SignerCall.peer(try param(0, "the other party's pubkey"))
            return .encrypt(method == "nip04_encrypt" ? .nip04 : .nip44, plaintext: try param(1, "the plaintext"), peer: peer)
        case "nip04_decrypt", "nip44_decrypt":
            let peer = try SignerCall.peer(try param(0, "the other party's pubkey"))
            return .decrypt(method == "nip04_decrypt" ? .nip04 : .nip44, ciphertext: try param(1, "the ciphertext"), peer: peer)
        default:
            throw KeyfobError(.unsupportedType, "unknown method \(method.prefix(32))", status: .notFound)
        }
    }

    /// A signer result in NIP-46's form: the signed event's JSON for sign_event, else the text.
    func result(_ result: String, event: String?) -> String {
        method == "sign_event" ? event ?? result : result
    }
}
