import Crypto

/// COSE algorithm identifiers (IANA "COSE Algorithms") that WebAuthn credentials use.
public enum COSEAlgorithm: Int, Sendable, Codable, CaseIterable {
    case es256 = -7
    case es384 = -35
    case es512 = -36
    case eddsa = -8
    case rs256 = -257
    case rs384 = -258
    case rs512 = -259
    case ps256 = -37
    case ps384 = -38
    case ps512 = -39
    /// RSASSA-PKCS1-v1_5 with SHA-1: only some TPM attestations still use it.
    case rs1 = -65535

    /// What the server offers by default: ES256, EdDSA, RS256 (DESIGN.md §2).
    public static let serverDefaults: [COSEAlgorithm] = [.es256, .eddsa, .rs256]

    var digest: DigestAlgorithm? {
        switch self {
        case .es256, .rs256, .ps256: return .sha256
        case .es384, .rs384, .ps384: return .sha384
        case .es512, .rs512, .ps512: return .sha512
        case .rs1: return .sha1
        case .eddsa: return nil
        }
    }

    var isPSS: Bool { self == .ps256 || self == .ps384 || self == .ps512 }

    var keyKind: PublicKeyHandle.Kind {
        switch self {
        case .es256, .es384, .es512: return .ec
        case .eddsa: return .ed25519
        default: return .rsa
        }
    }

    /// Verifies with any key of the right family (attestation certificates may
    /// pair, say, a P-384 key with ES256).
    func verify(signature: [UInt8], message: [UInt8], key: PublicKeyHandle) -> Bool {
        guard key.kind == keyKind else { return false }
        return key.verify(signature: signature, message: message, digest: digest, pss: isPSS)
    }
}

/// A credential public key decoded from its COSE_Key form (RFC 9052 §7, RFC 9053),
/// ready to verify signatures. Build it once per stored credential and reuse it:
/// building the OpenSSL key is the costly part.
public struct CredentialPublicKey: Sendable {
    public enum KeyType: Sendable, Equatable {
        case ec2(curve: Int, x: [UInt8], y: [UInt8])
        case rsa(n: [UInt8], e: [UInt8])
        case okp(curve: Int, x: [UInt8])
    }

    public let algorithm: COSEAlgorithm
    public let keyType: KeyType
    /// The COSE_Key bytes exactly as the authenticator produced them (what a store keeps).
    public let cose: [UInt8]
    let handle: PublicKeyHandle
    /// ES256 on P-256 (nearly every passkey) is checked with swift-crypto's BoringSSL: a quarter
    /// less CPU a verify than OpenSSL 3.0's provider path (BENCHMARKS.md, #46). Nil for other keys.
    let p256: P256Key?

    /// Decodes and checks a COSE_Key.
    public init(cose bytes: [UInt8]) throws(WebAuthnError) {
        try self.init(cbor: CBORDecoder.decode(bytes), bytes: bytes)
    }

    init(cbor: CBOR, bytes: [UInt8]) throws(WebAuthnError) {
        guard cbor.mapPairs != nil else { throw .malformed("credential public key is not a COSE_Key map") }
        guard let kty = cbor[int: 1]?.int else { throw .malformed("COSE_Key has no kty") }
        guard let algValue = cbor[int: 3]?.int else { throw .malformed("COSE_Key has no alg") }
        guard let alg = COSEAlgorithm(rawValue: Int(algValue)) else {
            throw .init(.unsupportedAlgorithm, "COSE algorithm \(algValue) is not supported")
        }
        self.algorithm = alg
        self.cose = bytes
        var p256: P256Key?
        switch kty {
        case 2:  // EC2
            guard let crv = cbor[int: -1]?.int, let x = cbor[int: -2]?.bytes, let y = cbor[int: -3]?.bytes else {
                throw .malformed("EC2 COSE_Key lacks crv, x or y")
            }
            let (group, size, expected): (String, Int, COSEAlgorithm)
            switch crv {
            case 1: (group, size, expected) = ("prime256v1", 32, .es256)
            case 2: (group, size, expected) = ("secp384r1", 48, .es384)
            case 3: (group, size, expected) = ("secp521r1", 66, .es512)
            default: throw .init(.unsupportedAlgorithm, "EC2 curve \(crv) is not supported")
            }
            guard alg == expected else { throw .init(.unsupportedAlgorithm, "alg \(alg.rawValue) does not fit curve \(crv)") }
            guard x.count == size, y.count == size else { throw .malformed("EC2 coordinates have the wrong length") }
            guard let handle = PublicKeyHandle.ec(group: group, x: x, y: y) else {
                throw .malformed("EC2 public key is not a point on its curve")
            }
            self.keyType = .ec2(curve: Int(crv), x: x, y: y)
            self.handle = handle
            // OpenSSL accepted the point; BoringSSL checks it again (a refusal keeps OpenSSL's path).
            if alg == .es256, let key = try? P256.Signing.PublicKey(x963Representation: [0x04] + x + y) { p256 = P256Key(key) }
        case 3:  // RSA
            guard let n = cbor[int: -1]?.bytes, let e = cbor[int: -2]?.bytes else { throw .malformed("RSA COSE_Key lacks n or e") }
            guard alg.keyKind == .rsa else { throw .init(.unsupportedAlgorithm, "alg \(alg.rawValue) is not an RSA algorithm") }
            // At most 8192 bits and an exponent below 2^32: bigger keys only make verification slow.
            guard n.count >= 128, n.count <= 1024, e.drop(while: { $0 == 0 }).count <= 4 else {
                throw .init(.unsupportedAlgorithm, "RSA key size is out of range (1024 to 8192 bits, exponent below 2^32)")
            }
            guard let handle = PublicKeyHandle.rsa(n: n, e: e) else { throw .malformed("RSA public key is invalid") }
            self.keyType = .rsa(n: n, e: e)
            self.handle = handle
        case 1:  // OKP
            guard let crv = cbor[int: -1]?.int, let x = cbor[int: -2]?.bytes else { throw .malformed("OKP COSE_Key lacks crv or x") }
            guard crv == 6, alg == .eddsa else { throw .init(.unsupportedAlgorithm, "OKP curve \(crv) is not supported") }
            guard let handle = PublicKeyHandle.ed25519(x) else { throw .malformed("Ed25519 public key is invalid") }
            self.keyType = .okp(curve: 6, x: x)
            self.handle = handle
        default:
            // kty 7 (AKP) carries ML-DSA, which OpenSSL 3.0 cannot verify.
            throw .init(.unsupportedAlgorithm, "COSE key type \(kty) is not supported")
        }
        self.p256 = p256
    }

    /// Checks a signature made with this credential's private key.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        if let p256 {
            // Strict DER, as OpenSSL's check (which re-encodes and compares) is.
            guard let signature = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return p256.key.isValidSignature(signature, for: SHA256.hash(data: message))
        }
        return algorithm.verify(signature: signature, message: message, key: handle)
    }
}

/// swift-crypto's P-256 key, which it does not mark `Sendable`: it is an immutable BoringSSL key
/// that verification only reads (as `PublicKeyHandle` is for OpenSSL's).
final class P256Key: @unchecked Sendable {
    let key: P256.Signing.PublicKey
    init(_ key: P256.Signing.PublicKey) { self.key = key }
}
