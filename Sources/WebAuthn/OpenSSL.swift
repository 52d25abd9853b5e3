import COpenSSL
import Foundation
import KeyfobCrypto

// The only file of the WebAuthn module that calls OpenSSL: hashing, public keys,
// signature checks and X.509. Every handle is owned by a Swift object that frees it.

/// Hash functions WebAuthn algorithms use.
public enum DigestAlgorithm: Sendable {
    case sha1, sha256, sha384, sha512

    var md: OpaquePointer {
        switch self {
        case .sha1: return FetchedDigest.sha1
        case .sha256: return FetchedDigest.sha256
        case .sha384: return FetchedDigest.sha384
        case .sha512: return FetchedDigest.sha512
        }
    }

    public var length: Int {
        switch self {
        case .sha1: return 20
        case .sha256: return 32
        case .sha384: return 48
        case .sha512: return 64
        }
    }

    /// One-shot digest of the concatenation of `parts`.
    public func hash(_ parts: [UInt8]...) -> [UInt8] { hash(parts: parts) }

    func hash(parts: [[UInt8]]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: length)
        guard let ctx = EVP_MD_CTX_new() else { return out }
        defer { EVP_MD_CTX_free(ctx) }
        EVP_DigestInit_ex(ctx, md, nil)
        for part in parts { part.withUnsafeBytes { _ = EVP_DigestUpdate(ctx, $0.baseAddress, $0.count) } }
        EVP_DigestFinal_ex(ctx, &out, nil)
        return out
    }
}

/// Names OpenSSL reads by pointer until `OSSL_PARAM_BLD_to_param`: static storage only.
private enum ParamKey {
    static let group: StaticString = "group"
    static let pub: StaticString = "pub"
    static let rsaN: StaticString = "n"
    static let rsaE: StaticString = "e"
}

extension StaticString {
    fileprivate var cString: UnsafePointer<CChar> {
        UnsafeRawPointer(utf8Start).assumingMemoryBound(to: CChar.self)
    }
}

/// An OpenSSL public key (`EVP_PKEY`). Verification only reads it, so one value
/// may be shared across threads; build it once per credential and keep it.
public final class PublicKeyHandle: @unchecked Sendable {
    enum Kind { case ec, rsa, ed25519, other }

    let pkey: OpaquePointer

    init(owning pkey: OpaquePointer) { self.pkey = pkey }
    deinit { EVP_PKEY_free(pkey) }

    var kind: Kind {
        switch EVP_PKEY_get_base_id(pkey) {
        case KF_EVP_PKEY_EC: return .ec
        case KF_EVP_PKEY_RSA, KF_EVP_PKEY_RSA_PSS: return .rsa
        case KF_EVP_PKEY_ED25519: return .ed25519
        default: return .other
        }
    }

    /// An RSA key's modulus and public exponent sizes in bits; nil for other keys.
    var rsaSize: (modulusBits: Int, exponentBits: Int)? {
        guard kind == .rsa else { return nil }
        var e: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pkey, ParamKey.rsaE.cString, &e) == 1, let e else { ERR_clear_error(); return nil }
        defer { BN_free(e) }
        return (Int(EVP_PKEY_get_bits(pkey)), Int(BN_num_bits(e)))
    }

    /// RSA keys the library accepts, in credentials and attestation certificates: at most
    /// 8192 bits with an exponent below 2^32 (bigger ones only cost verification time), and
    /// under 2048 bits only when the caller allows legacy algorithms.
    func checkRSASize(allowLegacy: Bool) -> String? {
        guard let (bits, exponentBits) = rsaSize else { return kind == .rsa ? "RSA key parameters are unreadable" : nil }
        if bits > 8192 { return "RSA key of \(bits) bits is over the 8192-bit limit" }
        if exponentBits > 32 { return "RSA public exponent is over 2^32" }
        if bits < 2048 && !allowLegacy { return "RSA key of \(bits) bits is under 2048 bits (legacy algorithms are not allowed)" }
        return nil
    }

    /// An EC public key from affine coordinates; OpenSSL checks the point is on the curve.
    static func ec(group: String, x: [UInt8], y: [UInt8]) -> PublicKeyHandle? {
        let point = [0x04] + x + y
        guard let bld = OSSL_PARAM_BLD_new() else { return nil }
        defer { OSSL_PARAM_BLD_free(bld) }
        let params = group.withCString { g in
            point.withUnsafeBytes { pt -> UnsafeMutablePointer<OSSL_PARAM>? in
                guard OSSL_PARAM_BLD_push_utf8_string(bld, ParamKey.group.cString, g, 0) == 1,
                    OSSL_PARAM_BLD_push_octet_string(bld, ParamKey.pub.cString, pt.baseAddress, pt.count) == 1
                else { return nil }
                return OSSL_PARAM_BLD_to_param(bld)
            }
        }
        guard let params else { return nil }
        defer { OSSL_PARAM_free(params) }
        return fromData(type: "EC", params: params)
    }

    /// An RSA public key from modulus and exponent (big-endian bytes).
    static func rsa(n: [UInt8], e: [UInt8]) -> PublicKeyHandle? {
        guard !n.isEmpty, !e.isEmpty, let bld = OSSL_PARAM_BLD_new() else { return nil }
        defer { OSSL_PARAM_BLD_free(bld) }
        let bnN = n.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        let bnE = e.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, Int32($0.count), nil) }
        defer { BN_free(bnN); BN_free(bnE) }
        guard let bnN, let bnE,
            OSSL_PARAM_BLD_push_BN(bld, ParamKey.rsaN.cString, bnN) == 1,
            OSSL_PARAM_BLD_push_BN(bld, ParamKey.rsaE.cString, bnE) == 1,
            let params = OSSL_PARAM_BLD_to_param(bld)
        else { return nil }
        defer { OSSL_PARAM_free(params) }
        return fromData(type: "RSA", params: params)
    }

    static func ed25519(_ raw: [UInt8]) -> PublicKeyHandle? {
        guard raw.count == 32 else { return nil }
        let key = raw.withUnsafeBufferPointer {
            EVP_PKEY_new_raw_public_key(KF_EVP_PKEY_ED25519, nil, $0.baseAddress, $0.count)
        }
        guard let key else { ERR_clear_error(); return nil }
        return PublicKeyHandle(owning: key)
    }

    private static func fromData(type: String, params: UnsafeMutablePointer<OSSL_PARAM>) -> PublicKeyHandle? {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, type, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(ctx) }
        var key: OpaquePointer?
        guard EVP_PKEY_fromdata_init(ctx) == 1,
            EVP_PKEY_fromdata(ctx, &key, KF_EVP_PKEY_PUBLIC_KEY, params) == 1,
            let key
        else { ERR_clear_error(); return nil }
        return PublicKeyHandle(owning: key)
    }

    /// Checks `signature` over `message`. `digest` nil means a pure scheme (Ed25519);
    /// `pss` selects RSASSA-PSS with a salt as long as the digest.
    func verify(signature: [UInt8], message: [UInt8], digest: DigestAlgorithm?, pss: Bool = false) -> Bool {
        if let digest, !pss { return verifyPrehashed(signature: signature, message: message, digest: digest) }
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        var pctx: OpaquePointer?
        guard EVP_DigestVerifyInit(ctx, &pctx, digest?.md, nil, pkey) == 1 else { ERR_clear_error(); return false }
        if pss {
            guard EVP_PKEY_CTX_set_rsa_padding(pctx, KF_RSA_PKCS1_PSS_PADDING) == 1,
                EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, KF_RSA_PSS_SALTLEN_DIGEST) == 1
            else { ERR_clear_error(); return false }
        }
        let ok = signature.withUnsafeBufferPointer { sig in
            message.withUnsafeBufferPointer { msg in
                EVP_DigestVerify(ctx, sig.baseAddress, sig.count, msg.baseAddress, msg.count)
            }
        }
        if ok != 1 { ERR_clear_error() }
        return ok == 1
    }

    /// ECDSA and RSASSA-PKCS1-v1_5: hash once into a stack buffer, then `EVP_PKEY_verify`,
    /// which skips the digest-context set-up `EVP_DigestVerifyInit` does on every call.
    private func verifyPrehashed(signature: [UInt8], message: [UInt8], digest: DigestAlgorithm) -> Bool {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { hash in
            var hashLength: UInt32 = 0
            let hashed = message.withUnsafeBufferPointer {
                EVP_Digest($0.baseAddress, $0.count, hash.baseAddress, &hashLength, digest.md, nil)
            }
            guard hashed == 1, let ctx = EVP_PKEY_CTX_new_from_pkey(nil, pkey, nil) else { ERR_clear_error(); return false }
            defer { EVP_PKEY_CTX_free(ctx) }
            guard EVP_PKEY_verify_init(ctx) == 1, EVP_PKEY_CTX_set_signature_md(ctx, digest.md) == 1 else {
                ERR_clear_error(); return false
            }
            let ok = signature.withUnsafeBufferPointer {
                EVP_PKEY_verify(ctx, $0.baseAddress, $0.count, hash.baseAddress, Int(hashLength))
            }
            if ok != 1 { ERR_clear_error() }
            return ok == 1
        }
    }

    /// Whether two keys are the same public key.
    func isSameKey(as other: PublicKeyHandle) -> Bool {
        let r = EVP_PKEY_eq(pkey, other.pkey)
        if r != 1 { ERR_clear_error() }
        return r == 1
    }

    /// The elliptic-curve group name ("prime256v1", ...), for EC keys.
    var ecGroupName: String? {
        var buffer = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(pkey, &buffer, buffer.count, &length) == 1 else { ERR_clear_error(); return nil }
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The uncompressed EC point (0x04 || x || y), for EC keys.
    var ecPoint: [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 160)
        var length = 0
        guard EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, &buffer, buffer.count, &length) == 1
        else { ERR_clear_error(); return nil }
        return Array(buffer.prefix(length))
    }
}

/// An X.509 certificate parsed by OpenSSL.
final class Certificate: @unchecked Sendable {
    let x509: OpaquePointer
    let der: [UInt8]

    init?(der: [UInt8]) {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var p = buffer.baseAddress
            guard let cert = d2i_X509(nil, &p, buffer.count) else { return nil }
            // Trailing bytes after the certificate are not a certificate.
            guard p == buffer.baseAddress! + buffer.count else { X509_free(cert); return nil }
            return cert
        }
        guard let parsed else { ERR_clear_error(); return nil }
        x509 = parsed
        self.der = der
    }

    deinit { X509_free(x509) }

    var publicKey: PublicKeyHandle? {
        guard let key = X509_get_pubkey(x509) else { ERR_clear_error(); return nil }
        return PublicKeyHandle(owning: key)
    }

    /// 3 for an X.509 v3 certificate.
    var version: Int { Int(X509_get_version(x509)) + 1 }

    /// The raw value (the extnValue OCTET STRING's content) of an extension.
    func extensionValue(oid: String) -> (critical: Bool, value: [UInt8])? {
        guard let obj = OBJ_txt2obj(oid, 1) else { ERR_clear_error(); return nil }
        defer { ASN1_OBJECT_free(obj) }
        let index = X509_get_ext_by_OBJ(x509, obj, -1)
        guard index >= 0, let ext = X509_get_ext(x509, index), let data = X509_EXTENSION_get_data(ext) else { return nil }
        return (X509_EXTENSION_get_critical(ext) == 1, asn1Bytes(data))
    }

    /// Basic constraints say CA:TRUE.
    var isCA: Bool { X509_check_ca(x509) != 0 }

    /// The subject attributes attestation statements check (§8.2.1).
    enum SubjectField {
        case country, organization, organizationalUnit, commonName

        var nid: Int32 {
            switch self {
            case .country: NID_countryName
            case .organization: NID_organizationName
            case .organizationalUnit: NID_organizationalUnitName
            case .commonName: NID_commonName
            }
        }
    }

    /// Subject attribute values for one field.
    func subject(_ field: SubjectField) -> [String] {
        let nid = field.nid
        guard let name = X509_get_subject_name(x509) else { return [] }
        var out: [String] = []
        var index: Int32 = -1
        while true {
            index = X509_NAME_get_index_by_NID(name, nid, index)
            guard index >= 0, let entry = X509_NAME_get_entry(name, index),
                let data = X509_NAME_ENTRY_get_data(entry)
            else { break }
            out.append(String(decoding: asn1Bytes(data), as: UTF8.self))
        }
        return out
    }

    var subjectIsEmpty: Bool {
        guard let name = X509_get_subject_name(x509) else { return true }
        return X509_NAME_entry_count(name) == 0
    }

    /// Whether the certificate is issued for `host` (SAN dNSName or CN).
    func matches(host: String) -> Bool {
        let r = X509_check_host(x509, host, host.utf8.count, 0, nil)
        if r != 1 { ERR_clear_error() }
        return r == 1
    }

    private func asn1Bytes(_ string: UnsafePointer<ASN1_STRING>) -> [UInt8] {
        let length = Int(ASN1_STRING_length(string))
        guard length > 0, let p = ASN1_STRING_get0_data(string) else { return [] }
        return Array(UnsafeBufferPointer(start: p, count: length))
    }
}

/// Validates `chain` (leaf first, then intermediates) up to one of `anchors`
/// at `time`. An anchor may be an intermediate: partial chains are accepted.
func validateChain(_ chain: [Certificate], anchors: [Certificate], at time: Date) -> Bool {
    guard let leaf = chain.first, !anchors.isEmpty,
        let store = X509_STORE_new()
    else { return false }
    defer { X509_STORE_free(store) }
    for anchor in anchors { X509_STORE_add_cert(store, anchor.x509) }
    X509_STORE_set_flags(store, KF_X509_V_FLAG_PARTIAL_CHAIN)
    guard let untrusted = kf_sk_X509_new() else { return false }
    defer { kf_sk_X509_free(untrusted) }
    for cert in chain.dropFirst() { _ = kf_sk_X509_push(untrusted, cert.x509) }
    guard let ctx = X509_STORE_CTX_new() else { return false }
    defer { X509_STORE_CTX_free(ctx) }
    guard X509_STORE_CTX_init(ctx, store, leaf.x509, untrusted) == 1 else { ERR_clear_error(); return false }
    X509_STORE_CTX_set_time(ctx, 0, time_t(time.timeIntervalSince1970))
    let ok = X509_verify_cert(ctx)
    ERR_clear_error()
    return ok == 1
}
