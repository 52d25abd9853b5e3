import Foundation
import KeyfobCodecs

/// Collected client data (WebAuthn Level 3 §5.8.1), parsed from the exact
/// bytes the browser sent. Never compare it as a string: browsers may add keys.
public struct CollectedClientData: Sendable, Equatable {
    public let type: String
    public let challenge: String
    public let origin: String
    public let crossOrigin: Bool?
    public let topOrigin: String?
    /// Whether `topOrigin` was sent at all, whatever its JSON type: a number, object or null
    /// is refused like a string unless configured.
    public let topOriginPresent: Bool
    public let tokenBinding: TokenBinding?

    /// Token binding (Level 2). Early browsers sent a bare string here (e.g. `"unused"`),
    /// which carries no status and is ignored.
    public struct TokenBinding: Sendable, Equatable {
        public let status: String?
        public let id: String?
    }

    /// Parses clientDataJSON; unknown members are ignored (browsers add some).
    public static func parse(_ bytes: [UInt8]) throws(WebAuthnError) -> CollectedClientData {
        guard bytes.count <= 64 * 1024 else { throw .malformed("clientDataJSON is too large") }
        // What browsers send is plain JSON (no escapes, numbers or arrays): read it without
        // Foundation; anything else takes Foundation's path, which decides alike.
        if let object = PlainJSON.parse(bytes) { return try parse(plain: object) }
        return try parseWithFoundation(bytes)
    }

    static func parse(plain object: PlainJSON) throws(WebAuthnError) -> CollectedClientData {
        guard let type = object.string("type"), let challenge = object.string("challenge"),
            let origin = object.string("origin")
        else {
            throw .malformed("clientDataJSON lacks type, challenge or origin as strings")
        }
        var crossOrigin: Bool?
        switch object["crossOrigin"] {
        case nil, .null?: break
        case .bool(let value)?: crossOrigin = value
        default: throw .malformed("clientDataJSON.crossOrigin is not a boolean")
        }
        var tokenBinding: TokenBinding?
        if let binding = object.object("tokenBinding") {
            tokenBinding = TokenBinding(status: binding.string("status"), id: binding.string("id"))
        }
        return CollectedClientData(
            type: type, challenge: challenge, origin: origin, crossOrigin: crossOrigin,
            topOrigin: object.string("topOrigin"), topOriginPresent: object["topOrigin"] != nil,
            tokenBinding: tokenBinding)
    }

    static func parseWithFoundation(_ bytes: [UInt8]) throws(WebAuthnError) -> CollectedClientData {
        // JSONSerialization: measurably cheaper than JSONDecoder here.
        guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else {
            throw .malformed("clientDataJSON is not a JSON object")
        }
        guard let type = object["type"] as? String, let challenge = object["challenge"] as? String,
            let origin = object["origin"] as? String
        else {
            throw .malformed("clientDataJSON lacks type, challenge or origin as strings")
        }
        var crossOrigin: Bool?
        if let value = object["crossOrigin"], !(value is NSNull) {
            // Foundation bridges the numbers 0 and 1 to Bool too: only a JSON true/false (objCType "c") counts.
            guard let number = value as? NSNumber, ["c", "B"].contains(String(cString: number.objCType)) else {
                throw .malformed("clientDataJSON.crossOrigin is not a boolean")
            }
            crossOrigin = number.boolValue
        }
        let topOriginPresent = object.keys.contains("topOrigin")
        let topOrigin = object["topOrigin"] as? String
        var tokenBinding: TokenBinding?
        if let binding = object["tokenBinding"] as? [String: Any] {
            tokenBinding = TokenBinding(status: binding["status"] as? String, id: binding["id"] as? String)
        }
        return CollectedClientData(
            type: type, challenge: challenge, origin: origin, crossOrigin: crossOrigin,
            topOrigin: topOrigin, topOriginPresent: topOriginPresent, tokenBinding: tokenBinding)
    }
}
