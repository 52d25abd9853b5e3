/// §8.4 Android Key: a Keystore certificate whose key is the credential key and
/// whose key description binds it to this ceremony.
enum AndroidKeyAttestation: AttestationFormat {
    static let name = "android-key"

    /// Keymaster tags (AuthorizationList fields) the checks use.
    private enum Tag {
        static let purpose = 1
        static let allApplications = 600
        static let origin = 702
    }
    private static let purposeSign = 2
    private static let originGenerated = 0

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationResult {
        let alg = try input.algorithm(name)
        let sig = try input.signature(name)
        guard let chain = try input.certificates(name) else { throw .attestation(name, "x5c is missing") }
        let leaf = chain[0]
        guard let key = leaf.publicKey, alg.verify(signature: sig, message: input.signedData, key: key) else {
            throw .attestation(name, "attestation signature invalid")
        }
        guard key.isSameKey(as: input.credentialKey.handle) else {
            throw .attestation(name, "credential public key differs from the certificate's")
        }

        // KeyDescription ::= SEQUENCE { attestationVersion, attestationSecurityLevel, keymasterVersion,
        //   keymasterSecurityLevel, attestationChallenge OCTET STRING, uniqueId, softwareEnforced, teeEnforced }
        guard let ext = leaf.extensionValue(oid: "1.3.6.1.4.1.11129.2.1.17"),
            let description = try? DER.parse(ext.value[...]), description.tag == DER.sequence
        else {
            throw .attestation(name, "certificate lacks the Android key description extension")
        }
        let fields = description.children
        guard fields.count >= 8, fields[4].tag == DER.octetString,
            fields[6].tag == DER.sequence, fields[7].tag == DER.sequence,
            let software = contextTaggedElements(fields[6].value),
            let tee = contextTaggedElements(fields[7].value)
        else {
            throw .attestation(name, "Android key description is malformed")
        }
        guard Array(fields[4].value) == input.clientDataHash else {
            throw .attestation(name, "attestationChallenge is not the client data hash")
        }
        let all = software + tee
        // The key must be scoped to this RP, not to every application.
        guard !all.contains(where: { $0.0 == Tag.allApplications }) else {
            throw .attestation(name, "key is valid for all applications")
        }
        // origin = KM_ORIGIN_GENERATED and purpose ∋ KM_PURPOSE_SIGN (teeEnforced ∪ softwareEnforced).
        let origins = all.filter { $0.0 == Tag.origin }.compactMap { $0.1.children.first?.intValue }
        guard !origins.isEmpty, origins.allSatisfy({ $0 == originGenerated }) else {
            throw .attestation(name, "key was not generated in the keystore")
        }
        let purposes = all.filter { $0.0 == Tag.purpose }
            .flatMap { $0.1.children.first?.children.compactMap(\.intValue) ?? [] }
        guard purposes.contains(purposeSign) else { throw .attestation(name, "key purpose is not signing") }

        return input.result(name, .basic, chain, trust: try input.trust(of: chain, name))
    }
}
