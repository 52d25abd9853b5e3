import HTTPTypes

/// The codes clients see (DESIGN.md §7), each with its usual HTTP status and a message for when
/// the place that fails has nothing more precise to say. Stable: clients switch on them.
public enum ErrorCode: String, CaseIterable, Sendable, Encodable, CustomStringConvertible {
    // Ceremonies.
    case invalidRequest = "invalid_request"
    case challengeNotFound = "challenge_not_found"
    case challengeExpired = "challenge_expired"
    case originMismatch = "origin_mismatch"
    case rpIDMismatch = "rp_id_mismatch"
    case userPresenceRequired = "user_presence_required"
    case userVerificationRequired = "user_verification_required"
    case unsupportedAlgorithm = "unsupported_algorithm"
    case attestationInvalid = "attestation_invalid"
    case signatureInvalid = "signature_invalid"
    case credentialNotFound = "credential_not_found"
    case credentialExists = "credential_exists"
    case counterRegression = "counter_regression"
    case usernameTaken = "username_taken"
    case userHandleMismatch = "user_handle_mismatch"
    // Sessions and signer.
    case unauthorized
    case signerLocked = "signer_locked"
    case permissionDenied = "permission_denied"
    case userRejected = "user_rejected"
    case invalidContent = "invalid_content"
    case invalidCallback = "invalid_callback"
    case unsupportedType = "unsupported_type"
    case invalidPubkey = "invalid_pubkey"
    case decryptFailed = "decrypt_failed"
    case payloadTooLarge = "payload_too_large"
    case rateLimited = "rate_limited"
    case requestNotFound = "request_not_found"
    case internalError = "internal_error"
    /// The database cannot be reached or cannot write right now: nothing was done (no signature
    /// answered without its audit entry); worth retrying after `Retry-After`.
    case storeUnavailable = "store_unavailable"
    /// An action that could hand the account to someone else needs a passkey assertion made for it.
    case confirmationRequired = "confirmation_required"
    /// The stored key is older than its seal (a row put back from a backup): refused, never signed with.
    case keyRolledBack = "key_rolled_back"
    /// A Polkadot transaction Keyfob cannot check against the chain's metadata (RFC-0078), for
    /// an account that does not accept unchecked ones: nothing was queued or signed.
    case unverifiedTransaction = "unverified_transaction"

    /// The code as clients see it (also in text: `"\(code)"` is `invalid_request`).
    public var description: String { rawValue }

    /// The status this code usually answers with; a place may choose another (a 409 for an
    /// `invalid_request` that conflicts with the account's state).
    public var status: HTTPResponse.Status {
        switch self {
        case .credentialNotFound, .requestNotFound, .unsupportedType: .notFound
        case .counterRegression, .credentialExists, .usernameTaken, .keyRolledBack: .conflict
        case .signatureInvalid, .userHandleMismatch, .unauthorized: .unauthorized
        case .userPresenceRequired, .userVerificationRequired, .signerLocked, .permissionDenied, .userRejected,
            .confirmationRequired, .unverifiedTransaction:
            .forbidden
        case .payloadTooLarge: .contentTooLarge
        case .rateLimited: .tooManyRequests
        case .internalError: .internalServerError
        case .storeUnavailable: .serviceUnavailable
        default: .badRequest
        }
    }

    public var defaultMessage: String {
        switch self {
        case .invalidRequest: "the request is not one this endpoint understands"
        case .challengeNotFound: "this ceremony is unknown or already used; start again"
        case .challengeExpired: "this ceremony took too long; start again"
        case .originMismatch: "the page that ran the ceremony is not one of this server's origins"
        case .rpIDMismatch: "the passkey was made for another site"
        case .userPresenceRequired: "the authenticator did not report user presence"
        case .userVerificationRequired: "the authenticator did not verify the user (PIN or biometrics)"
        case .unsupportedAlgorithm: "the passkey's algorithm is not one this server accepts"
        case .attestationInvalid: "the authenticator's attestation does not verify"
        case .signatureInvalid: "the passkey's signature does not verify"
        case .credentialNotFound: "this passkey is not registered here"
        case .credentialExists: "this passkey is registered already"
        case .counterRegression: "the passkey's counter went backwards: it may have been cloned"
        case .usernameTaken: "this username is taken"
        case .userHandleMismatch: "the passkey belongs to another account"
        case .unauthorized: "sign in with a passkey first"
        case .signerLocked: "the signer is locked; unlock it with your passkey"
        case .permissionDenied: "this is not allowed"
        case .userRejected: "the request was rejected"
        case .invalidContent: "the content is not valid for this method"
        case .invalidCallback: "the callback address is not allowed"
        case .unsupportedType: "this method or type is not supported"
        case .invalidPubkey: "not a valid public key"
        case .decryptFailed: "the ciphertext does not decrypt with this key"
        case .payloadTooLarge: "the request is too large"
        case .rateLimited: "too many requests; try again in a moment"
        case .requestNotFound: "no such request"
        case .internalError: "something went wrong on the server"
        case .storeUnavailable: "the database cannot be reached or cannot write right now; nothing was done, try again in a moment"
        case .confirmationRequired: "confirm this with your passkey"
        case .keyRolledBack: "your key's stored copy is older than its seal; nothing was signed"
        case .unverifiedTransaction: "Keyfob cannot check this transaction against the chain's metadata, and this account does not sign blind"
        }
    }
}
