import Foundation
import HTTPTypes
import Nostr

/// One signer operation, parsed and validated, whatever transport carried it (REST today;
/// redirect flows, NIP-07 and NIP-46 build the same value), so there is one dispatcher.
enum SignerCall: Sendable {
    enum Cipher: Sendable { case nip04, nip44 }

    case getPublicKey
    case signEvent(UnsignedEvent)
    case encrypt(Cipher, plaintext: String, peer: PublicKey)
    case decrypt(Cipher, ciphertext: String, peer: PublicKey)
    case decryptZap(Event)

    var method: SignerMethod {
        switch self {
        case .getPublicKey: .getPublicKey
        case .signEvent: .signEvent
        case .encrypt(.nip04, _, _): .nip04Encrypt
        case .encrypt(.nip44, _, _): .nip44Encrypt
        case .decrypt(.nip04, _, _): .nip04Decrypt
        case .decrypt(.nip44, _, _): .nip44Decrypt
        case .decryptZap: .decryptZapEvent
        }
    }

    /// The event kind, for grants and the audit log.
    var kind: Int? {
        switch self {
        case .signEvent(let event): event.kind
        case .decryptZap(let event): event.kind
        default: nil
        }
    }

    /// Direct-message rumors (NIP-17) must stay unsigned: signing one would let it be published.
    static let neverSignedKinds: Set<Int> = [14, 15]
    /// Kinds that can destroy or impersonate (DESIGN.md §4.6): always shown, only a rejection is remembered.
    static let dangerousKinds: Set<Int> = [0, 3, 5, 10002, 22242, 27235, 24133, 30078]

    // MARK: Parsing a JSON request body (REST; NIP-46 params reuse the pieces)

    /// Builds the call for `method` from a JSON object in DESIGN.md §4.3's shapes.
    static func parse(method: SignerMethod, body: [String: Any], now: Date) throws(KeyfobError) -> SignerCall {
        switch method {
        case .getPublicKey:
            return .getPublicKey
        case .signEvent:
            return .signEvent(try unsignedEvent(body["event"], now: now))
        case .nip04Encrypt, .nip44Encrypt:
            guard let plaintext = body["plaintext"] as? String else {
                throw KeyfobError(.invalidContent, "plaintext must be a string")
            }
            return .encrypt(method == .nip04Encrypt ? .nip04 : .nip44, plaintext: plaintext, peer: try peer(body["pubkey"]))
        case .nip04Decrypt, .nip44Decrypt:
            guard let ciphertext = (body["ciphertext"] ?? body["encryptedText"]) as? String else {
                throw KeyfobError(.invalidContent, "ciphertext must be a string")
            }
            return .decrypt(method == .nip04Decrypt ? .nip04 : .nip44, ciphertext: ciphertext, peer: try peer(body["pubkey"]))
        case .decryptZapEvent:
            return .decryptZap(try signedEvent(body["event"]))
        }
    }

    /// A peer's public key: 64 hex characters of an x-only key on the curve.
    static func peer(_ value: Any?) throws(KeyfobError) -> PublicKey {
        guard let hex = value as? String else { throw KeyfobError(.invalidPubkey, "pubkey must be 64 hex characters") }
        do { return try PublicKey(hex: hex) } catch { throw KeyfobError(error) }
    }

    /// An event to sign: a JSON object (or a string holding one, as NIP-55 content is).
    static func unsignedEvent(_ value: Any?, now: Date) throws(KeyfobError) -> UnsignedEvent {
        do {
            return try UnsignedEvent.parse(object: try eventObject(value), now: Int64(now.timeIntervalSince1970))
        } catch { throw KeyfobError(error) }
    }

    static func signedEvent(_ value: Any?) throws(KeyfobError) -> Event {
        do { return try Event.parse(object: try eventObject(value)) } catch { throw KeyfobError(error) }
    }

    private static func eventObject(_ value: Any?) throws(NostrError) -> [String: Any] {
        if let object = value as? [String: Any] { return object }
        if let text = value as? String,
            let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
        {
            return object
        }
        throw NostrError(.invalidContent, "event must be a JSON object with kind and content")
    }
}

extension KeyfobError {
    /// Runs a nostr core call, turning its failure into the client-facing error.
    static func from<T>(_ body: () throws(NostrError) -> T) throws(KeyfobError) -> T {
        do { return try body() } catch { throw KeyfobError(error) }
    }

    /// The client-facing form of a nostr failure.
    init(_ error: NostrError) {
        let status: HTTPResponse.Status =
            switch error.code {
            case .payloadTooLarge: .contentTooLarge
            case .unsupportedType: .notFound
            case .internalError: .internalServerError
            default: .badRequest
            }
        self.init(ErrorCode(rawValue: error.code.rawValue) ?? .invalidRequest, error.message, status: status)
    }
}
