import KeyfobCodecs

/// Why a WebAuthn ceremony or parse failed.
///
/// Every failure of this module is one of these values. `code` is the stable
/// string of DESIGN.md §7 that the server sends to clients; `message` says what
/// was wrong in words a developer can act on. Messages never contain secrets
/// (they may name the offending field, never echo key material).
public struct WebAuthnError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        case invalidRequest = "invalid_request"
        case challengeNotFound = "challenge_not_found"
        case originMismatch = "origin_mismatch"
        case rpIdMismatch = "rp_id_mismatch"
        case userPresenceRequired = "user_presence_required"
        case userVerificationRequired = "user_verification_required"
        case unsupportedAlgorithm = "unsupported_algorithm"
        case attestationInvalid = "attestation_invalid"
        case signatureInvalid = "signature_invalid"
        case credentialNotFound = "credential_not_found"
        case counterRegression = "counter_regression"
        case userHandleMismatch = "user_handle_mismatch"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }

    // MARK: Shorthands used across the module

    static func malformed(_ what: String) -> WebAuthnError { .init(.invalidRequest, what) }
    static func attestation(_ format: String, _ what: String) -> WebAuthnError {
        .init(.attestationInvalid, "\(what) (\(format))")
    }
}

extension Base64URL {
    /// Decodes a required field, naming it in the error.
    static func decode(_ string: String, field: String) throws(WebAuthnError) -> [UInt8] {
        guard let bytes = decode(string) else { throw .malformed("\(field) is not valid base64url") }
        return bytes
    }
}
