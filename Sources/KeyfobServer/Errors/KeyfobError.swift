import HTTPTypes

/// A failure a client is told about: a §7 code and a message a person can act on (never a secret).
/// Thrown by ceremonies, the signer, approvals and the bunker alike; the HTTP layer turns it into
/// `{"error": code, "message": text}` (ErrorReplies), NIP-46 into its `error` string, redirect
/// flows into each spec's own codes.
public struct KeyfobError: Error, Sendable {
    public let code: ErrorCode
    public let message: String
    /// Seconds the client should wait before trying again (rate limits, a database outage).
    public let retryAfter: Int?
    /// Set only where this place answers with another status than the code's usual one.
    let statusOverride: HTTPResponse.Status?

    public init(_ code: ErrorCode, _ message: String? = nil, status: HTTPResponse.Status? = nil, retryAfter: Int? = nil) {
        self.code = code
        self.message = message ?? code.defaultMessage
        self.statusOverride = status == code.status ? nil : status
        self.retryAfter = retryAfter
    }

    public var status: HTTPResponse.Status { statusOverride ?? code.status }

    static func invalid(_ message: String) -> KeyfobError { .init(.invalidRequest, message) }
    /// The database cannot be reached right now (PostgreSQL down or restarting): a 503 the
    /// client may retry, never a hang.
    static let databaseUnavailable = KeyfobError(
        .storeUnavailable, "the database cannot be reached or cannot write right now; nothing was done, try again in a moment",
        status: .serviceUnavailable, retryAfter: 2)
    static let unauthorized = KeyfobError(.unauthorized)
    static func usernameTaken(_ username: String) -> KeyfobError {
        KeyfobError(.usernameTaken, "username \"\(username)\" is taken; sign in to add a passkey to it")
    }
    static func rateLimited(retryAfter: Int) -> KeyfobError {
        KeyfobError(.rateLimited, "too many requests; try again in \(retryAfter) s", retryAfter: retryAfter)
    }
}
