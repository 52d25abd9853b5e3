import Foundation

/// Collected client data (WebAuthn Level 3 §5.8.1), parsed from the exact
/// bytes the browser sent. Never compare it as a string: browsers may add keys.
public struct CollectedClientData: Sendable, Decodable {
    public let type: String
    public let challenge: String
    public let origin: String
    public let crossOrigin: Bool?
    public let topOrigin: String?
    public let tokenBinding: TokenBinding?

    /// Token binding (Level 2). Early browsers sent a bare string here (e.g. `"unused"`),
    /// which carries no status and is ignored.
    public struct TokenBinding: Sendable, Decodable {
        public let status: String?
        public let id: String?

        public init(from decoder: Decoder) throws {
            if let object = try? decoder.container(keyedBy: CodingKeys.self) {
                status = try object.decodeIfPresent(String.self, forKey: .status)
                id = try object.decodeIfPresent(String.self, forKey: .id)
            } else {
                status = nil
                id = nil
            }
        }
        private enum CodingKeys: String, CodingKey { case status, id }
    }

    /// Parses clientDataJSON; the challenge must be base64url.
    public static func parse(_ bytes: [UInt8]) throws(WebAuthnError) -> CollectedClientData {
        guard bytes.count <= 64 * 1024 else { throw .malformed("clientDataJSON is too large") }
        do {
            return try JSONDecoder().decode(CollectedClientData.self, from: Data(bytes))
        } catch {
            throw .malformed("clientDataJSON is not the expected JSON object")
        }
    }
}
