/// §8.2 Packed: either a certificate chain (basic/AttCA) or self attestation.
enum PackedAttestation: AttestationFormat {
    static let name = "packed"

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationResult {
        let alg = try input.algorithm(name)
        let sig = try input.signature(name)

        if let chain = try input.certificates(name) {
            let leaf = chain[0]
            // The signature over authData || clientDataHash verifies with attestnCert's key.
            guard let key = leaf.publicKey, alg.verify(signature: sig, message: input.signedData, key: key) else {
                throw .attestation(name, "attestation signature invalid")
            }
            try checkCertificate(leaf)
            try input.checkAAGUIDExtension(leaf, name)
            return input.result(name, .basic, chain, trust: try input.trust(of: chain, name))
        }

        // Self attestation: alg is the credential's, and the credential key signed.
        guard alg == input.credentialKey.algorithm else {
            throw .attestation(name, "self attestation alg \(alg.rawValue) differs from the credential's")
        }
        guard input.credentialKey.isValidSignature(sig, for: input.signedData) else {
            throw .attestation(name, "attestation signature invalid")
        }
        return input.result(name, .self, trust: .notApplicable)
    }

    /// §8.2.1 Packed attestation statement certificate requirements.
    private static func checkCertificate(_ cert: Certificate) throws(WebAuthnError) {
        guard cert.version == 3 else { throw .attestation(name, "attestation certificate is not X.509 v3") }
        guard !cert.subject(.country).isEmpty, !cert.subject(.organization).isEmpty,
            !cert.subject(.commonName).isEmpty,
            cert.subject(.organizationalUnit) == ["Authenticator Attestation"]
        else {
            throw .attestation(name, "attestation certificate subject lacks C, O, OU=\"Authenticator Attestation\" or CN")
        }
        guard !cert.isCA else { throw .attestation(name, "attestation certificate must not be a CA") }
    }
}
