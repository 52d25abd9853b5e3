import Foundation

/// Who the relying party is and which clients may talk to it.
public struct RelyingParty: Sendable {
    /// The RP ID credentials are scoped to, e.g. `example.com`.
    public var id: String
    /// A human-readable name shown by authenticators.
    public var name: String
    /// Origins allowed in client data, exactly as browsers send them
    /// (`https://example.com`, `https://login.example.com`, `android:apk-key-hash:...`).
    public var origins: [String]
    /// RP IDs whose hash authenticator data may carry. Usually just `[id]`.
    public var acceptedIDs: [String]
    /// Accept `crossOrigin: true` (an iframe on another site). Off by default.
    public var allowCrossOrigin: Bool
    /// Top-level origins accepted in `topOrigin`; empty refuses any `topOrigin`.
    public var allowedTopOrigins: [String]

    public init(
        id: String, name: String, origins: [String], acceptedIDs: [String]? = nil,
        allowCrossOrigin: Bool = false, allowedTopOrigins: [String] = []
    ) {
        self.id = id
        self.name = name
        self.origins = origins
        self.acceptedIDs = acceptedIDs ?? [id]
        self.allowCrossOrigin = allowCrossOrigin
        self.allowedTopOrigins = allowedTopOrigins
    }

    /// Whether `origin`'s host is the RP ID or one of its subdomains (DESIGN.md §2);
    /// Android app origins (`android:apk-key-hash:`) are accepted as configured.
    public static func origin(_ origin: String, fitsRPID rpID: String) -> Bool {
        if origin.hasPrefix("android:apk-key-hash:") { return true }
        guard let url = URL(string: origin), let scheme = url.scheme, let host = url.host?.lowercased(),
            scheme == "https" || scheme == "http", url.path.isEmpty || url.path == "/"
        else { return false }
        let rp = rpID.lowercased()
        return host == rp || host.hasSuffix("." + rp)
    }
}

/// What to do with attestation statements.
public struct AttestationPolicy: Sendable {
    /// DER certificates an attestation chain must reach, by attestation format
    /// (`"packed"`, `"tpm"`, ...). A format with no anchors: its chains are not judged and
    /// the result says "trust not established" (a `none`-policy registration still passes).
    public var trustAnchors: [String: [[UInt8]]]
    /// SafetyNet: require `ctsProfileMatch` (on by default).
    public var safetyNetRequireCTSProfileMatch: Bool
    /// SafetyNet: require the JWS timestamp to be within a minute of the clock (on by default).
    public var safetyNetCheckTimestamp: Bool
    /// Accept RS1 (RSASSA-PKCS1-v1_5 with SHA-1) and RSA keys under 2048 bits, in credentials,
    /// attestation statements and attestation certificates. Off by default: old TPMs need it.
    public var allowLegacyAlgorithms: Bool

    public init(
        trustAnchors: [String: [[UInt8]]] = [:], safetyNetRequireCTSProfileMatch: Bool = true,
        safetyNetCheckTimestamp: Bool = true, allowLegacyAlgorithms: Bool = false
    ) {
        self.trustAnchors = trustAnchors
        self.safetyNetRequireCTSProfileMatch = safetyNetRequireCTSProfileMatch
        self.safetyNetCheckTimestamp = safetyNetCheckTimestamp
        self.allowLegacyAlgorithms = allowLegacyAlgorithms
    }
}
