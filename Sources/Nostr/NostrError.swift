/// Why a nostr operation or decode failed. `code` is one of DESIGN.md §7's stable codes.
public struct NostrError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        case invalidContent = "invalid_content"
        case invalidPubkey = "invalid_pubkey"
        case decryptFailed = "decrypt_failed"
        case invalidCallback = "invalid_callback"
        case unsupportedType = "unsupported_type"
        case payloadTooLarge = "payload_too_large"
        case invalidRequest = "invalid_request"
        case internalError = "internal_error"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }

    static func content(_ message: String) -> NostrError { .init(.invalidContent, message) }
    static func decrypt(_ message: String) -> NostrError { .init(.decryptFailed, message) }
}
