import KeyfobCodecs

/// A registration response in the WebAuthn JSON form (`RegistrationResponseJSON`).
public struct RegistrationCredential: Sendable, Codable {
    public struct Response: Sendable, Codable {
        public var clientDataJSON: String
        public var attestationObject: String
        public var transports: [String]?
        public init(clientDataJSON: String, attestationObject: String, transports: [String]? = nil) {
            self.clientDataJSON = clientDataJSON
            self.attestationObject = attestationObject
            self.transports = transports
        }
    }
    public var id: String
    public var rawId: String
    public var type: String
    public var response: Response
    public var authenticatorAttachment: String?
    public var clientExtensionResults: ClientExtensionResults?

    public init(
        id: String, rawId: String, type: String = "public-key", response: Response,
        authenticatorAttachment: String? = nil, clientExtensionResults: ClientExtensionResults? = nil
    ) {
        self.id = id
        self.rawId = rawId
        self.type = type
        self.response = response
        self.authenticatorAttachment = authenticatorAttachment
        self.clientExtensionResults = clientExtensionResults
    }
}

/// The parts of `AuthenticationExtensionsClientOutputsJSON` Keyfob reads. They come from the
/// client, not from the authenticator's signed data: a value of the wrong shape is ignored
/// rather than failing the ceremony.
public struct ClientExtensionResults: Sendable, Codable, Equatable {
    public struct PRF: Sendable, Codable, Equatable {
        /// At creation: whether the authenticator enabled PRF for this credential.
        public var enabled: Bool?
        public var results: PRFValues?
        public init(enabled: Bool? = nil, results: PRFValues? = nil) {
            self.enabled = enabled
            self.results = results
        }
        public init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            enabled = try? c.decodeIfPresent(Bool.self, forKey: .enabled)
            results = try? c.decodeIfPresent(PRFValues.self, forKey: .results)
        }
    }
    public var prf: PRF?

    public init(prf: PRF? = nil) { self.prf = prf }
    public init(from decoder: Decoder) throws {
        let c = try? decoder.container(keyedBy: CodingKeys.self)
        prf = try? c?.decodeIfPresent(PRF.self, forKey: .prf)
    }

    /// The first PRF output, decoded, when it is a plausible one (32 bytes, as hmac-secret gives).
    public var prfFirst: [UInt8]? { Self.prfOutput(prf?.results?.first) }
    /// The second PRF output (when the options gave a `second` input), likewise.
    public var prfSecond: [UInt8]? { Self.prfOutput(prf?.results?.second) }

    static func prfOutput(_ text: String?) -> [UInt8]? {
        guard let text, text.utf8.count <= 64, let bytes = Base64URL.decode(text), bytes.count == 32 else { return nil }
        return bytes
    }
}

/// An authentication response in the WebAuthn JSON form (`AuthenticationResponseJSON`).
public struct AuthenticationCredential: Sendable, Codable, Equatable {
    public struct Response: Sendable, Codable, Equatable {
        public var clientDataJSON: String
        public var authenticatorData: String
        public var signature: String
        public var userHandle: String?
        public init(clientDataJSON: String, authenticatorData: String, signature: String, userHandle: String? = nil) {
            self.clientDataJSON = clientDataJSON
            self.authenticatorData = authenticatorData
            self.signature = signature
            self.userHandle = userHandle
        }
    }
    public var id: String
    public var rawId: String
    public var type: String
    public var response: Response
    public var clientExtensionResults: ClientExtensionResults?

    public init(
        id: String, rawId: String, type: String = "public-key", response: Response,
        clientExtensionResults: ClientExtensionResults? = nil
    ) {
        self.id = id
        self.rawId = rawId
        self.type = type
        self.response = response
        self.clientExtensionResults = clientExtensionResults
    }
}

extension AuthenticationCredential {
    /// The value JSONDecoder gives for `plain`, or nil when a field is missing or of a shape this
    /// does not read (PRF results among the extensions): the caller then uses JSONDecoder.
    public init?(plain: PlainJSON) {
        guard let id = plain.string("id"), let rawId = plain.string("rawId"), let type = plain.string("type"),
            let response = plain.object("response"), let clientDataJSON = response.string("clientDataJSON"),
            let authenticatorData = response.string("authenticatorData"), let signature = response.string("signature"),
            let userHandle = response.optionalString("userHandle")
        else { return nil }
        let extensions: ClientExtensionResults?
        switch plain["clientExtensionResults"] {
        case nil, .null?: extensions = nil
        case .object(let results)? where results["prf"] == nil: extensions = ClientExtensionResults()
        default: return nil
        }
        self.init(
            id: id, rawId: rawId, type: type,
            response: Response(
                clientDataJSON: clientDataJSON, authenticatorData: authenticatorData, signature: signature,
                userHandle: userHandle),
            clientExtensionResults: extensions)
    }
}

/// What a relying party stored about a credential at registration.
public struct StoredCredential: Sendable {
    public var id: [UInt8]
    public var publicKey: CredentialPublicKey
    public var signCount: UInt32
    /// The user handle (`user.id`) the credential was created for.
    public var userHandle: [UInt8]?
    /// BE at registration; nil when unknown. BE may never change afterwards.
    public var backupEligible: Bool?

    public init(
        id: [UInt8], publicKey: CredentialPublicKey, signCount: UInt32,
        userHandle: [UInt8]? = nil, backupEligible: Bool? = nil
    ) {
        self.id = id
        self.publicKey = publicKey
        self.signCount = signCount
        self.userHandle = userHandle
        self.backupEligible = backupEligible
    }
}

/// How an attestation statement was made (WebAuthn §6.5.4).
public enum AttestationType: String, Sendable, Codable {
    case none, `self`, basic, attCA = "attca", anonCA = "anonca"
}

/// Whether the attestation chain reached a trust anchor.
public enum TrustStatus: String, Sendable, Codable {
    /// No chain to judge (`none`, self attestation).
    case notApplicable = "not_applicable"
    /// A chain was presented but no anchors were configured.
    case notEstablished = "not_established"
    /// The chain reached a configured anchor.
    case trusted
}

/// The outcome of checking an attestation statement.
public struct AttestationResult: Sendable, Equatable {
    public let format: String
    public let type: AttestationType
    public let trust: TrustStatus
    /// DER certificates of the statement, leaf first.
    public let certificateChain: [[UInt8]]
}

/// A registration that passed every check; the caller stores it.
public struct VerifiedRegistration: Sendable {
    public let credentialID: [UInt8]
    public let publicKey: CredentialPublicKey
    public let signCount: UInt32
    public let flags: AuthenticatorData.Flags
    public let aaguid: [UInt8]
    public let attestation: AttestationResult
    public let extensions: CBOR?

    public var userVerified: Bool { flags.contains(.userVerified) }
    public var backupEligible: Bool { flags.contains(.backupEligible) }
    public var backupState: Bool { flags.contains(.backupState) }
}

/// An authentication that passed every check; the caller updates the counter.
public struct VerifiedAuthentication: Sendable {
    public let credentialID: [UInt8]
    public let newSignCount: UInt32
    public let flags: AuthenticatorData.Flags
    public let extensions: CBOR?

    public var userVerified: Bool { flags.contains(.userVerified) }
    public var backupEligible: Bool { flags.contains(.backupEligible) }
    public var backupState: Bool { flags.contains(.backupState) }
}
