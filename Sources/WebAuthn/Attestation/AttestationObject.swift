import Foundation

/// The CBOR attestation object (§6.5): `{fmt, attStmt, authData}`.
public struct AttestationObject: Sendable {
    public let format: String
    public let statement: CBOR
    public let authenticatorData: AuthenticatorData

    public init(bytes: [UInt8]) throws(WebAuthnError) {
        let cbor = try CBORDecoder.decode(bytes)
        guard cbor.mapPairs != nil else { throw .malformed("attestationObject is not a CBOR map") }
        guard let fmt = cbor[text: "fmt"]?.text else { throw .malformed("attestationObject has no fmt") }
        guard let statement = cbor[text: "attStmt"], statement.mapPairs != nil else {
            throw .malformed("attestationObject has no attStmt map")
        }
        guard let authData = cbor[text: "authData"]?.bytes else { throw .malformed("attestationObject has no authData") }
        format = fmt
        self.statement = statement
        authenticatorData = try AuthenticatorData(bytes: authData)
    }
}

/// Everything a format's verification procedure may look at (§8).
struct AttestationInput {
    let statement: CBOR
    let authenticatorData: AuthenticatorData
    let clientDataHash: [UInt8]
    let credentialKey: CredentialPublicKey
    let policy: AttestationPolicy
    let now: Date

    var aaguid: [UInt8] { authenticatorData.attestedCredentialData?.aaguid ?? [] }
    /// authenticatorData || clientDataHash: what most formats sign.
    var signedData: [UInt8] { authenticatorData.bytes + clientDataHash }
}

/// One attestation statement format (§8.x), one file each.
protocol AttestationFormat {
    static var name: String { get }
    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationResult
}

private let formats: [any AttestationFormat.Type] = [
    NoneAttestation.self, PackedAttestation.self, FIDOU2FAttestation.self, TPMAttestation.self,
    AndroidKeyAttestation.self, AndroidSafetyNetAttestation.self, AppleAttestation.self,
]

/// §7.1 steps 19-22: dispatch on `fmt`; an unknown format fails.
func verifyAttestation(format: String, _ input: AttestationInput) throws(WebAuthnError) -> AttestationResult {
    guard let verifier = formats.first(where: { $0.name == format }) else {
        throw .init(.attestationInvalid, "attestation format \"\(format)\" is not supported")
    }
    return try verifier.verify(input)
}

// MARK: - Helpers the formats share

extension AttestationInput {
    func algorithm(_ format: String) throws(WebAuthnError) -> COSEAlgorithm {
        guard let value = statement[text: "alg"]?.int else { throw .attestation(format, "attStmt.alg is missing") }
        guard let alg = COSEAlgorithm(rawValue: Int(value)) else {
            throw .init(.unsupportedAlgorithm, "attestation algorithm \(value) is not supported (\(format))")
        }
        guard alg != .rs1 || policy.allowLegacyAlgorithms else {
            throw .init(.unsupportedAlgorithm, "attestation algorithm RS1 (SHA-1) is a legacy algorithm and not allowed (\(format))")
        }
        return alg
    }

    func signature(_ format: String) throws(WebAuthnError) -> [UInt8] {
        guard let sig = statement[text: "sig"]?.bytes else { throw .attestation(format, "attStmt.sig is missing") }
        return sig
    }

    /// attStmt.x5c as parsed certificates, leaf first; nil when absent.
    func certificates(_ format: String) throws(WebAuthnError) -> [Certificate]? {
        guard let x5c = statement[text: "x5c"] else { return nil }
        guard let items = x5c.array, !items.isEmpty, items.count <= 8 else {
            throw .attestation(format, "attStmt.x5c must be a non-empty array of certificates")
        }
        var certs: [Certificate] = []
        for item in items {
            guard let der = item.bytes, let cert = Certificate(der: der) else {
                throw .attestation(format, "attStmt.x5c holds something that is not an X.509 certificate")
            }
            try checkKeySize(cert, format)
            certs.append(cert)
        }
        return certs
    }

    /// RSA certificate keys within the library's limits (see `PublicKeyHandle.checkRSASize`).
    func checkKeySize(_ cert: Certificate, _ format: String) throws(WebAuthnError) {
        if let key = cert.publicKey, let problem = key.checkRSASize(allowLegacy: policy.allowLegacyAlgorithms) {
            throw .attestation(format, "certificate key: \(problem)")
        }
    }

    /// §7.1 steps 21-22: judge the chain against the configured anchors.
    func trust(of chain: [Certificate], _ format: String) throws(WebAuthnError) -> TrustStatus {
        guard let configured = policy.trustAnchors[format], !configured.isEmpty else { return .notEstablished }
        var anchors: [Certificate] = []
        for der in configured {
            guard let cert = Certificate(der: der) else { throw .attestation(format, "a configured trust anchor is not a certificate") }
            anchors.append(cert)
        }
        guard validateChain(chain, anchors: anchors, at: now) else {
            throw .attestation(format, "certificate chain does not reach a trusted root")
        }
        return .trusted
    }

    /// The FIDO AAGUID extension (id-fido-gen-ce-aaguid), when present, must match authData.
    func checkAAGUIDExtension(_ cert: Certificate, _ format: String) throws(WebAuthnError) {
        guard let ext = cert.extensionValue(oid: "1.3.6.1.4.1.45724.1.1.4") else { return }
        guard !ext.critical else { throw .attestation(format, "id-fido-gen-ce-aaguid must not be critical") }
        guard let inner = try? DER.parse(ext.value[...]), inner.tag == DER.octetString,
            Array(inner.value) == aaguid
        else {
            throw .attestation(format, "certificate AAGUID extension (1.3.6.1.4.1.45724.1.1.4) does not match authenticator data")
        }
    }

    func result(_ format: String, _ type: AttestationType, _ chain: [Certificate] = [], trust: TrustStatus) -> AttestationResult {
        AttestationResult(format: format, type: type, trust: trust, certificateChain: chain.map(\.der))
    }
}
