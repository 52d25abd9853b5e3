import COpenSSL
import Foundation
import KeyfobCodecs
import KeyfobCrypto
import WebAuthn

/// A private key held by OpenSSL, for the software authenticator.
public final class TestPrivateKey: @unchecked Sendable {
    public enum Kind: Sendable, CaseIterable { case es256, es384, es512, rs256, ps256, eddsa }
    let pkey: OpaquePointer
    public let kind: Kind
    /// RSA only: sign with SHA-1 and call the algorithm RS1 (legacy TPMs).
    public let sha1: Bool

    /// `rsaBits` and `sha1` make legacy RSA keys (for the tests that refuse them).
    public init(_ kind: Kind, rsaBits: Int32 = 2048, sha1: Bool = false) {
        self.kind = kind
        self.sha1 = sha1
        let ctx: OpaquePointer
        switch kind {
        case .es256, .es384, .es512:
            ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil)!
            EVP_PKEY_keygen_init(ctx)
            EVP_PKEY_CTX_set_group_name(ctx, kind == .es256 ? "P-256" : kind == .es384 ? "P-384" : "P-521")
        case .rs256, .ps256:
            ctx = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil)!
            EVP_PKEY_keygen_init(ctx)
            EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, rsaBits)
        case .eddsa:
            ctx = EVP_PKEY_CTX_new_from_name(nil, "ED25519", nil)!
            EVP_PKEY_keygen_init(ctx)
        }
        var key: OpaquePointer?
        precondition(EVP_PKEY_generate(ctx, &key) == 1)
        EVP_PKEY_CTX_free(ctx)
        pkey = key!
    }
    deinit { EVP_PKEY_free(pkey) }

    public var algorithm: COSEAlgorithm {
        switch kind {
        case .es256: return .es256
        case .es384: return .es384
        case .es512: return .es512
        case .rs256: return sha1 ? .rs1 : .rs256
        case .ps256: return .ps256
        case .eddsa: return .eddsa
        }
    }

    public func sign(_ message: [UInt8]) -> [UInt8] {
        let ctx = EVP_MD_CTX_new()!
        defer { EVP_MD_CTX_free(ctx) }
        let md: OpaquePointer? =
            switch kind {
            case .eddsa: nil
            case .es384: EVP_sha384()
            case .es512: EVP_sha512()
            default: sha1 ? EVP_sha1() : EVP_sha256()
            }
        var pctx: OpaquePointer?
        precondition(EVP_DigestSignInit(ctx, &pctx, md, nil, pkey) == 1)
        if kind == .ps256 {
            EVP_PKEY_CTX_set_rsa_padding(pctx, KF_RSA_PKCS1_PSS_PADDING)
            EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, KF_RSA_PSS_SALTLEN_DIGEST)
        }
        var length = 0
        EVP_DigestSign(ctx, nil, &length, message, message.count)
        var sig = [UInt8](repeating: 0, count: length)
        precondition(EVP_DigestSign(ctx, &sig, &length, message, message.count) == 1)
        return Array(sig.prefix(length))
    }

    private func bigParam(_ name: String) -> [UInt8] {
        var bn: OpaquePointer?
        EVP_PKEY_get_bn_param(pkey, name, &bn)
        defer { BN_free(bn) }
        var out = [UInt8](repeating: 0, count: Int((BN_num_bits(bn) + 7) / 8))
        BN_bn2bin(bn, &out)
        return out
    }

    /// The public key as a COSE_Key.
    public var coseKey: [UInt8] {
        switch kind {
        case .es256, .es384, .es512:
            let size = kind == .es256 ? 32 : kind == .es384 ? 48 : 66
            var point = [UInt8](repeating: 0, count: 1 + 2 * size)
            var length = 0
            EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, &point, point.count, &length)
            let curve = kind == .es256 ? 1 : kind == .es384 ? 2 : 3
            return encodeCBOR(
                .map([
                    (.int(1), .int(2)), (.int(3), .int(algorithm.rawValue)), (.int(-1), .int(curve)),
                    (.int(-2), .bytes(Array(point[1...size]))), (.int(-3), .bytes(Array(point[(size + 1)...(2 * size)]))),
                ]))
        case .rs256, .ps256:
            return encodeCBOR(
                .map([
                    (.int(1), .int(3)), (.int(3), .int(algorithm.rawValue)),
                    (.int(-1), .bytes(bigParam("n"))), (.int(-2), .bytes(bigParam("e"))),
                ]))
        case .eddsa:
            var raw = [UInt8](repeating: 0, count: 32)
            var length = 32
            EVP_PKEY_get_raw_public_key(pkey, &raw, &length)
            return encodeCBOR(.map([(.int(1), .int(1)), (.int(3), .int(-8)), (.int(-1), .int(6)), (.int(-2), .bytes(raw))]))
        }
    }
}

/// A software WebAuthn authenticator whose every output field can be overridden,
/// so a test can corrupt exactly one thing.
public struct SoftwareAuthenticator: Sendable {
    public enum Attestation: Sendable { case none, packedSelf }

    public let key: TestPrivateKey
    public var credentialID: [UInt8]
    public var userHandle: [UInt8]?
    public var signCount: UInt32
    public var aaguid = [UInt8](repeating: 0, count: 16)
    /// hmac-secret's per-credential secret: set, the authenticator supports PRF.
    public var prfSecret: [UInt8]?

    /// The PRF output for `salt` as a browser reports it: HMAC-SHA256 of the credential's secret
    /// over SHA-256("WebAuthn PRF" ‖ 0x00 ‖ salt) (WebAuthn Level 3 §10.1.4, CTAP2 hmac-secret).
    public func prf(_ salt: [UInt8]) -> [UInt8]? {
        guard let prfSecret else { return nil }
        let input = sha256(Array("WebAuthn PRF".utf8) + [0] + salt)
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        _ = HMAC(EVP_sha256(), prfSecret, Int32(prfSecret.count), input, input.count, &out, &length)
        return out
    }

    public init(_ kind: TestPrivateKey.Kind = .es256, credentialID: [UInt8]? = nil, signCount: UInt32 = 0) {
        self.init(key: TestPrivateKey(kind), credentialID: credentialID, signCount: signCount)
    }

    public init(key: TestPrivateKey, credentialID: [UInt8]? = nil, signCount: UInt32 = 0) {
        self.key = key
        self.credentialID = credentialID ?? (0..<32).map { _ in UInt8.random(in: 0...255) }
        self.signCount = signCount
    }

    /// The parts of one response, editable before they are encoded.
    public struct Fields: Sendable {
        public var type: String
        public var challenge: String
        public var origin: String
        public var crossOrigin: Bool? = nil
        public var topOrigin: String? = nil
        public var rpID: String
        public var flags: UInt8
        public var signCount: UInt32
        public var attestation: Attestation = .none
        public var algorithmInStatement: COSEAlgorithm? = nil
        public var id: String? = nil
        public var rawId: String? = nil
        public var userHandle: String? = nil
        public var corruptSignature = false
        /// Replaces the client data JSON bytes entirely.
        public var clientDataJSON: [UInt8]? = nil
        /// Edits the authenticator data bytes after they are built (before signing).
        public var editAuthenticatorData: (@Sendable ([UInt8]) -> [UInt8])? = nil
        /// The options' PRF input (`extensions.prf.eval.first`): with a `prfSecret`, the response
        /// carries `clientExtensionResults.prf.results.first`.
        public var prfSalt: [UInt8]? = nil
        /// The options' second PRF input, when they give one: the response carries `results.second` too.
        public var prfSecondSalt: [UInt8]? = nil
    }

    func extensionResults(_ f: Fields, creating: Bool) -> ClientExtensionResults? {
        guard let salt = f.prfSalt else { return nil }
        guard let output = prf(salt) else { return creating ? ClientExtensionResults(prf: .init(enabled: false)) : nil }
        let second = f.prfSecondSalt.flatMap(prf).map(Base64URL.encode)
        return ClientExtensionResults(
            prf: .init(
                enabled: creating ? true : nil,
                results: PRFValues(first: Base64URL.encode(output), second: second)))
    }

    func clientData(_ f: Fields) -> [UInt8] {
        if let raw = f.clientDataJSON { return raw }
        var object: [String: Any] = ["type": f.type, "challenge": f.challenge, "origin": f.origin]
        if let c = f.crossOrigin { object["crossOrigin"] = c }
        if let t = f.topOrigin { object["topOrigin"] = t }
        return [UInt8](try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]))
    }

    func authenticatorData(_ f: Fields, attested: Bool) -> [UInt8] {
        var data = sha256(Array(f.rpID.utf8))
        data.append(f.flags | (attested ? 0x40 : 0))
        data += [24, 16, 8, 0].map { UInt8(f.signCount >> UInt32($0) & 0xff) }
        if attested {
            data += aaguid + [UInt8(credentialID.count >> 8), UInt8(credentialID.count & 0xff)] + credentialID + key.coseKey
        }
        return f.editAuthenticatorData?(data) ?? data
    }

    /// Default fields for a registration.
    public func registrationFields(challenge: [UInt8], rpID: String, origin: String) -> Fields {
        Fields(
            type: "webauthn.create", challenge: Base64URL.encode(challenge), origin: origin, rpID: rpID,
            flags: 0x05, signCount: signCount)
    }

    /// Default fields for an authentication; the counter moves forward by one.
    public func authenticationFields(challenge: [UInt8], rpID: String, origin: String) -> Fields {
        Fields(
            type: "webauthn.get", challenge: Base64URL.encode(challenge), origin: origin, rpID: rpID,
            flags: 0x05, signCount: signCount + 1, userHandle: userHandle.map(Base64URL.encode))
    }

    public func register(_ f: Fields) -> RegistrationCredential {
        let cdj = clientData(f)
        let authData = authenticatorData(f, attested: true)
        var statement: [(CBOR, CBOR)] = []
        if f.attestation == .packedSelf {
            var sig = key.sign(authData + sha256(cdj))
            if f.corruptSignature { sig[sig.count / 2] ^= 0x01 }
            statement = [(.text("alg"), .int((f.algorithmInStatement ?? key.algorithm).rawValue)), (.text("sig"), .bytes(sig))]
        }
        let object = encodeCBOR(
            .map([
                (.text("fmt"), .text(f.attestation == .none ? "none" : "packed")),
                (.text("attStmt"), .map(statement)), (.text("authData"), .bytes(authData)),
            ]))
        let id = Base64URL.encode(credentialID)
        return RegistrationCredential(
            id: f.id ?? id, rawId: f.rawId ?? id,
            response: .init(
                clientDataJSON: Base64URL.encode(cdj), attestationObject: Base64URL.encode(object),
                transports: ["internal"]),
            clientExtensionResults: extensionResults(f, creating: true))
    }

    public mutating func register(
        challenge: [UInt8], rpID: String, origin: String,
        attestation: Attestation = .none
    ) -> RegistrationCredential {
        var f = registrationFields(challenge: challenge, rpID: rpID, origin: origin)
        f.attestation = attestation
        return register(f)
    }

    public func authenticate(_ f: Fields) -> AuthenticationCredential {
        let cdj = clientData(f)
        let authData = authenticatorData(f, attested: false)
        var sig = key.sign(authData + sha256(cdj))
        if f.corruptSignature { sig[sig.count / 2] ^= 0x01 }
        let id = Base64URL.encode(credentialID)
        return AuthenticationCredential(
            id: f.id ?? id, rawId: f.rawId ?? id,
            response: .init(
                clientDataJSON: Base64URL.encode(cdj), authenticatorData: Base64URL.encode(authData),
                signature: Base64URL.encode(sig), userHandle: f.userHandle),
            clientExtensionResults: extensionResults(f, creating: false))
    }

    /// A normal assertion; advances the counter.
    public mutating func authenticate(challenge: [UInt8], rpID: String, origin: String) -> AuthenticationCredential {
        let f = authenticationFields(challenge: challenge, rpID: rpID, origin: origin)
        signCount = f.signCount
        return authenticate(f)
    }
}
