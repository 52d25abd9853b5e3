import Foundation
import KeyfobCodecs
import KeyfobCrypto

/// §8.5 Android SafetyNet: a JWS from Google's attestation service whose nonce
/// binds it to this ceremony.
enum AndroidSafetyNetAttestation: AttestationFormat {
    static let name = "android-safetynet"

    private struct Header: Decodable { let alg: String; let x5c: [String] }
    private struct Payload: Decodable {
        let nonce: String
        let timestampMs: Double
        let ctsProfileMatch: Bool?
        let basicIntegrity: Bool?
    }

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationResult {
        guard input.statement[text: "ver"]?.text?.isEmpty == false else { throw .attestation(name, "attStmt.ver is missing") }
        guard let response = input.statement[text: "response"]?.bytes else {
            throw .attestation(name, "attStmt.response is missing")
        }
        let parts = response.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Base64URL.decode(String(decoding: parts[0], as: UTF8.self)),
            let payloadBytes = Base64URL.decode(String(decoding: parts[1], as: UTF8.self)),
            let signature = Base64URL.decode(String(decoding: parts[2], as: UTF8.self)),
            let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)),
            let payload = try? JSONDecoder().decode(Payload.self, from: Data(payloadBytes))
        else {
            throw .attestation(name, "response is not a SafetyNet JWS")
        }

        // The nonce is base64(SHA-256(authenticatorData || clientDataHash)).
        guard payload.nonce == Data(sha256(input.signedData)).base64EncodedString() else {
            throw .attestation(name, "nonce does not match this ceremony")
        }
        guard payload.basicIntegrity != false else { throw .attestation(name, "device failed basicIntegrity") }
        if input.policy.safetyNetRequireCTSProfileMatch && payload.ctsProfileMatch != true {
            throw .attestation(name, "device failed the CTS profile match")
        }
        if input.policy.safetyNetCheckTimestamp {
            let now = input.now.timeIntervalSince1970 * 1000
            guard payload.timestampMs <= now + 60_000, now - payload.timestampMs <= 60_000 else {
                throw .attestation(name, "SafetyNet response is not fresh")
            }
        }

        var chain: [Certificate] = []
        for encoded in header.x5c {
            guard let der = Data(base64Encoded: encoded), let cert = Certificate(der: [UInt8](der)),
                (try? input.checkKeySize(cert, name)) != nil
            else {
                throw .attestation(name, "JWS x5c holds something that is not a certificate")
            }
            chain.append(cert)
        }
        guard let leaf = chain.first, leaf.matches(host: "attest.android.com") else {
            throw .attestation(name, "JWS is not signed by attest.android.com")
        }
        let algorithm: COSEAlgorithm
        switch header.alg {
        case "RS256": algorithm = .rs256
        case "RS384": algorithm = .rs384
        case "RS512": algorithm = .rs512
        default: throw .init(.unsupportedAlgorithm, "SafetyNet JWS alg \(header.alg) is not supported")
        }
        let signingInput = Array(response[..<(parts[1].endIndex)])
        guard let key = leaf.publicKey, algorithm.verify(signature: signature, message: signingInput, key: key) else {
            throw .attestation(name, "JWS signature invalid")
        }
        return input.result(name, .basic, chain, trust: try input.trust(of: chain, name))
    }
}
