/// §8.7 None: the statement is an empty map; nothing is attested.
enum NoneAttestation: AttestationFormat {
    static let name = "none"
    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationResult {
        guard input.statement.mapPairs?.isEmpty == true else { throw .attestation(name, "attStmt must be empty") }
        return input.result(name, .none, trust: .notApplicable)
    }
}
