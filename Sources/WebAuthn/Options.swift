import KeyfobCodecs
import KeyfobCrypto

/// `PublicKeyCredentialCreationOptionsJSON` (WebAuthn Level 3 §5.4), base64url fields.
public struct CreationOptions: Sendable, Codable, Equatable {
    public struct RP: Sendable, Codable, Equatable { public var name: String; public var id: String }
    public struct User: Sendable, Codable, Equatable {
        public var id: String
        public var name: String
        public var displayName: String
    }
    public struct Parameter: Sendable, Codable, Equatable {
        public var type: String = "public-key"
        public var alg: Int
    }
    public struct Selection: Sendable, Codable, Equatable {
        public var residentKey: String
        public var requireResidentKey: Bool
        public var userVerification: String
        public var authenticatorAttachment: String?
    }
    public struct Extensions: Sendable, Codable, Equatable {
        public var credProps: Bool
        /// The PRF extension (WebAuthn Level 3 §10.1.4): asks the authenticator to enable it and,
        /// where it can, to evaluate it already at creation.
        public var prf: PRFInputs?
    }

    public var rp: RP
    public var user: User
    public var challenge: String
    public var pubKeyCredParams: [Parameter]
    /// Milliseconds.
    public var timeout: Int
    public var excludeCredentials: [CredentialDescriptor]
    public var authenticatorSelection: Selection
    public var attestation: String
    public var extensions: Extensions
}

/// `PublicKeyCredentialRequestOptionsJSON` (§5.5).
public struct RequestOptions: Sendable, Codable, Equatable {
    public var challenge: String
    /// Milliseconds.
    public var timeout: Int
    public var rpId: String
    public var allowCredentials: [CredentialDescriptor]
    public var userVerification: String
    public var extensions: RequestExtensions?
}

/// `AuthenticationExtensionsClientInputsJSON` for request options (only what Keyfob asks).
public struct RequestExtensions: Sendable, Codable, Equatable {
    public var prf: PRFInputs?
    public init(prf: PRFInputs? = nil) { self.prf = prf }
}

/// `AuthenticationExtensionsPRFInputs`: salts as base64url. `eval` for any credential,
/// `evalByCredential` keyed by base64url credential id (only with `allowCredentials`).
public struct PRFInputs: Sendable, Codable, Equatable {
    public var eval: PRFValues?
    public var evalByCredential: [String: PRFValues]?
    public init(eval: PRFValues? = nil, evalByCredential: [String: PRFValues]? = nil) {
        self.eval = eval
        self.evalByCredential = evalByCredential
    }
}

/// `AuthenticationExtensionsPRFValues`, base64url.
public struct PRFValues: Sendable, Codable, Equatable {
    public var first: String
    public var second: String?
    public init(first: String, second: String? = nil) {
        self.first = first
        self.second = second
    }
}

/// `PublicKeyCredentialDescriptorJSON`.
public struct CredentialDescriptor: Sendable, Codable, Equatable {
    public var type: String = "public-key"
    public var id: String
    public var transports: [String]?

    public init(id: [UInt8], transports: [String]? = nil) {
        self.id = Base64URL.encode(id)
        self.transports = transports?.isEmpty == true ? nil : transports
    }
}

/// `UserVerificationRequirement`.
public enum UserVerification: String, Sendable, Codable {
    case required, preferred, discouraged
}

extension RelyingParty {
    /// Creation options with DESIGN.md §2's defaults: a 32-byte challenge, ES256/EdDSA/RS256,
    /// a discoverable credential, user verification required, attestation `none`, 60 s.
    public func creationOptions(
        challenge: [UInt8],
        userID: [UInt8],
        userName: String,
        displayName: String? = nil,
        algorithms: [COSEAlgorithm] = COSEAlgorithm.serverDefaults,
        excludeCredentials: [CredentialDescriptor] = [],
        userVerification: UserVerification = .required,
        attestation: String = "none",
        timeoutSeconds: Int = 60,
        prf: PRFInputs? = nil
    ) -> CreationOptions {
        CreationOptions(
            rp: .init(name: name, id: id),
            user: .init(id: Base64URL.encode(userID), name: userName, displayName: displayName ?? userName),
            challenge: Base64URL.encode(challenge),
            pubKeyCredParams: algorithms.map { .init(alg: $0.rawValue) },
            timeout: timeoutSeconds * 1000,
            excludeCredentials: excludeCredentials,
            authenticatorSelection: .init(
                residentKey: "required", requireResidentKey: true,
                userVerification: userVerification.rawValue),
            attestation: attestation,
            extensions: .init(credProps: true, prf: prf))
    }

    /// Request options; an empty `allowCredentials` asks for a discoverable credential.
    public func requestOptions(
        challenge: [UInt8],
        allowCredentials: [CredentialDescriptor] = [],
        userVerification: UserVerification = .required,
        timeoutSeconds: Int = 60,
        prf: PRFInputs? = nil
    ) -> RequestOptions {
        RequestOptions(
            challenge: Base64URL.encode(challenge), timeout: timeoutSeconds * 1000, rpId: id,
            allowCredentials: allowCredentials, userVerification: userVerification.rawValue,
            extensions: prf.map { RequestExtensions(prf: $0) })
    }
}

/// Where challenges come from; tests swap in a fixed one.
public struct ChallengeGenerator: Sendable {
    public var generate: @Sendable () -> [UInt8]
    public init(generate: @escaping @Sendable () -> [UInt8]) { self.generate = generate }
    /// 32 bytes from OpenSSL's CSPRNG (the spec asks for at least 16; we double it).
    public static let live = ChallengeGenerator { randomBytes(32) }
}
