import Benchmark
import Foundation
import KeyfobCodecs
import WebAuthn

// Hot paths of the WebAuthn core, on real authenticator responses from
// shared/vectors/webauthn. `compare.sh` sets them beside `openssl speed`.

private let vectors = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/vectors/webauthn")

private func load(_ name: String) -> [String: Any] {
    let data = try! Data(contentsOf: vectors.appendingPathComponent(name))
    return try! JSONSerialization.jsonObject(with: data) as! [String: Any]
}

private struct Assertion {
    let rp: RelyingParty
    let challenge: [UInt8]
    let credential: AuthenticationCredential
    let stored: StoredCredential
    let coseKey: [UInt8]

    init(_ name: String) {
        let v = load(name)
        rp = RelyingParty(id: v["rp_id"] as! String, name: "bench", origins: [v["expected_origin"] as! String])
        challenge = Base64URL.decode(v["expected_challenge_b64url"] as! String)!
        credential = try! JSONDecoder().decode(
            AuthenticationCredential.self, from: JSONSerialization.data(withJSONObject: v["credential"]!))
        coseKey = Base64URL.decode(v["credential_public_key_b64url"] as! String)!
        stored = StoredCredential(id: Base64URL.decode(credential.rawId)!, publicKey: try! CredentialPublicKey(cose: coseKey),
                                  signCount: UInt32(v["prior_sign_count"] as! Int))
    }

    func verify() -> VerifiedAuthentication {
        try! rp.verifyAuthentication(credential, challenge: challenge, stored: stored, requireUserVerification: false)
    }
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal], maxDuration: .seconds(3), maxIterations: 1_000_000)

    let es256 = Assertion("pyw-auth-authentication-response-with-EC2-public-key.json")
    let rs256 = Assertion("pyw-auth-authentication-response-with-RSA-public-key.json")
    let eddsa = Assertion("pyw-auth-authentication-response-with-OKP-public-key.json")

    // End to end: decode base64url, parse client data and authenticator data,
    // check every §7.2 rule, hash, verify with the credential's (cached) key.
    Benchmark("ES256 assertion verify (end to end)") { b in for _ in b.scaledIterations { blackHole(es256.verify()) } }
    Benchmark("RS256 assertion verify (end to end)") { b in for _ in b.scaledIterations { blackHole(rs256.verify()) } }
    Benchmark("EdDSA assertion verify (end to end)") { b in for _ in b.scaledIterations { blackHole(eddsa.verify()) } }

    // The same, building the OpenSSL key from the stored COSE bytes each time (no key cache).
    Benchmark("ES256 assertion verify incl. COSE key decode") { b in
        for _ in b.scaledIterations {
            var stored = es256.stored
            stored.publicKey = try! CredentialPublicKey(cose: es256.coseKey)
            blackHole(try! es256.rp.verifyAuthentication(es256.credential, challenge: es256.challenge, stored: stored,
                                                         requireUserVerification: false))
        }
    }

    // Signature check alone through the wrapper: the floor the end-to-end figure sits on.
    let message = Base64URL.decode(es256.credential.response.authenticatorData)!
        + sha256(Base64URL.decode(es256.credential.response.clientDataJSON)!)
    let signature = Base64URL.decode(es256.credential.response.signature)!
    Benchmark("ES256 signature verify only (cached key)") { b in
        for _ in b.scaledIterations { blackHole(es256.stored.publicKey.isValidSignature(signature, for: message)) }
    }

    for name in ["swa-reg-verify-packed-x5c-attestation-canonical-id.json", "pyw-reg-tpm-dell-xps-13.json"] {
        let v = load(name)
        let credential = v["credential"] as! [String: Any]
        let object = Base64URL.decode((credential["response"] as! [String: Any])["attestationObject"] as! String)!
        Benchmark("parse attestation object (\(name.hasPrefix("swa") ? "packed x5c" : "tpm"), \(object.count) B)") { b in
            for _ in b.scaledIterations { blackHole(try! AttestationObject(bytes: object)) }
        }
    }
}
