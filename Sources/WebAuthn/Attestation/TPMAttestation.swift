/// §8.3 TPM: the TPM's attestation key (AIK) certifies the credential key it created.
enum TPMAttestation: AttestationFormat {
    static let name = "tpm"

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> AttestationResult {
        guard input.statement[text: "ver"]?.text == "2.0" else { throw .attestation(name, "ver must be \"2.0\"") }
        let alg = try input.algorithm(name)
        let sig = try input.signature(name)
        guard let certInfoBytes = input.statement[text: "certInfo"]?.bytes,
            let pubAreaBytes = input.statement[text: "pubArea"]?.bytes
        else {
            throw .attestation(name, "certInfo or pubArea is missing")
        }
        guard let chain = try input.certificates(name) else {
            throw .attestation(name, "x5c is missing (ECDAA is not supported)")
        }

        // The key in pubArea is the credential public key.
        let pubArea = try PublicArea(pubAreaBytes)
        try pubArea.check(matches: input.credentialKey)

        // certInfo: magic, type, extraData = hash(attToBeSigned), attested name = hash(pubArea).
        let certInfo = try CertifyInfo(certInfoBytes)
        guard certInfo.magic == 0xff54_4347 else { throw .attestation(name, "certInfo.magic is not TPM_GENERATED_VALUE") }
        guard certInfo.type == 0x8017 else { throw .attestation(name, "certInfo.type is not TPM_ST_ATTEST_CERTIFY") }
        guard let digest = alg.digest, certInfo.extraData == digest.hash(input.signedData) else {
            throw .attestation(name, "certInfo.extraData is not the hash of authenticatorData || clientDataHash")
        }
        guard let nameDigest = nameAlgorithm(pubArea.nameAlg),
            certInfo.attestedName == [UInt8(pubArea.nameAlg >> 8), UInt8(pubArea.nameAlg & 0xff)] + nameDigest.hash(pubAreaBytes)
        else {
            throw .attestation(name, "certInfo.attested.name is not the name of pubArea")
        }

        // The AIK signed certInfo.
        let aik = chain[0]
        guard let key = aik.publicKey, alg.verify(signature: sig, message: certInfoBytes, key: key) else {
            throw .attestation(name, "attestation signature invalid")
        }
        try checkAIKCertificate(aik)
        try input.checkAAGUIDExtension(aik, name)
        return input.result(name, .attCA, chain, trust: try input.trust(of: chain, name))
    }

    private static func nameAlgorithm(_ id: UInt16) -> DigestAlgorithm? {
        switch id {
        case 0x0004: return .sha1
        case 0x000b: return .sha256
        case 0x000c: return .sha384
        case 0x000d: return .sha512
        default: return nil
        }
    }

    /// §8.3.1 TPM attestation statement certificate requirements.
    private static func checkAIKCertificate(_ cert: Certificate) throws(WebAuthnError) {
        guard cert.version == 3 else { throw .attestation(name, "AIK certificate is not X.509 v3") }
        guard cert.subjectIsEmpty else { throw .attestation(name, "AIK certificate subject must be empty") }
        guard !cert.isCA else { throw .attestation(name, "AIK certificate must not be a CA") }
        // Extended key usage contains tcg-kp-AIKCertificate (2.23.133.8.3).
        guard let eku = cert.extensionValue(oid: "2.5.29.37"),
            let usages = try? DER.parse(eku.value[...]),
            usages.children.contains(where: { $0.oidString == "2.23.133.8.3" })
        else {
            throw .attestation(name, "AIK certificate lacks the tcg-kp-AIKCertificate key usage")
        }
        // Subject alternative name holds the TPM manufacturer, model and version.
        guard let san = cert.extensionValue(oid: "2.5.29.17") else {
            throw .attestation(name, "AIK certificate lacks a subject alternative name")
        }
        let attributes = tpmAttributes(inSAN: san.value)
        guard let manufacturer = attributes["2.23.133.2.1"], attributes["2.23.133.2.2"] != nil,
            attributes["2.23.133.2.3"] != nil
        else {
            throw .attestation(name, "AIK certificate SAN lacks TPM manufacturer, model or version")
        }
        let vendor = manufacturer.hasPrefix("id:") ? String(manufacturer.dropFirst(3)).uppercased() : manufacturer.uppercased()
        guard knownTPMVendors.contains(vendor) else {
            throw .attestation(name, "TPM manufacturer \(manufacturer) is not a known vendor")
        }
    }

    /// Collects OID → value of every attribute in the SAN's directoryName(s), in
    /// whichever RDN grouping the TPM vendor chose.
    private static func tpmAttributes(inSAN bytes: [UInt8]) -> [String: String] {
        var out: [String: String] = [:]
        func walk(_ element: DER, depth: Int) {
            guard depth < 8 else { return }
            let children = element.children
            if element.tag == DER.sequence, children.count == 2, let oid = children[0].oidString {
                out[oid] = String(decoding: children[1].value, as: UTF8.self)
                return
            }
            // Constructed: SEQUENCE, SET, [4] directoryName (explicit).
            if element.tag & 0x20 != 0 { for child in children { walk(child, depth: depth + 1) } }
        }
        if let root = try? DER.parse(bytes[...]) { walk(root, depth: 0) }
        return out
    }

    /// TCG vendor ids (TCG "TPM Vendor ID Registry"); FFFFF1D0 is the FIDO conformance tool.
    private static let knownTPMVendors: Set<String> = [
        "414D4400", "41544D4C", "4252434D", "4353434F", "464C5953", "48504500", "48495349", "49424D00",
        "49465800", "494E5443", "4C454E00", "4D534654", "4E534D20", "4E545A00", "4E544300", "51434F4D",
        "534D5343", "53544D20", "534D534E", "534E5300", "54584E00", "57454300", "524F4343", "474F4F47",
        "FFFFF1D0",
    ]
}

/// A big-endian cursor over TPM structures; every read checks the bounds.
private struct TPMReader {
    let bytes: [UInt8]
    var offset = 0

    mutating func take(_ n: Int) throws(WebAuthnError) -> [UInt8] {
        guard n >= 0, bytes.count - offset >= n else { throw .attestation(TPMAttestation.name, "TPM structure is truncated") }
        defer { offset += n }
        return Array(bytes[offset..<(offset + n)])
    }
    mutating func u16() throws(WebAuthnError) -> UInt16 { let b = try take(2); return UInt16(b[0]) << 8 | UInt16(b[1]) }
    mutating func u32() throws(WebAuthnError) -> UInt32 {
        let b = try take(4); return b.reduce(0) { $0 << 8 | UInt32($1) }
    }
    /// A TPM2B: a 16-bit size, then that many bytes.
    mutating func sized() throws(WebAuthnError) -> [UInt8] { try take(Int(try u16())) }
    var atEnd: Bool { offset == bytes.count }
}

/// TPMT_PUBLIC (TPM 2.0 Part 2 §12.2.4): the public area of the credential key.
private struct PublicArea {
    let type: UInt16
    let nameAlg: UInt16
    let rsaExponent: UInt32
    let curveID: UInt16
    let unique: [[UInt8]]

    init(_ bytes: [UInt8]) throws(WebAuthnError) {
        var r = TPMReader(bytes: bytes)
        type = try r.u16()
        nameAlg = try r.u16()
        _ = try r.u32()  // objectAttributes
        _ = try r.sized()  // authPolicy
        _ = try r.u16()  // symmetric
        _ = try r.u16()  // scheme
        switch type {
        case 0x0001:  // TPM_ALG_RSA
            _ = try r.u16()  // keyBits
            rsaExponent = try r.u32()
            curveID = 0
            unique = [try r.sized()]
        case 0x0023:  // TPM_ALG_ECC
            curveID = try r.u16()
            _ = try r.u16()  // kdf
            rsaExponent = 0
            unique = [try r.sized(), try r.sized()]
        default:
            throw .attestation(TPMAttestation.name, "pubArea type \(type) is not RSA or ECC")
        }
        guard r.atEnd else { throw .attestation(TPMAttestation.name, "pubArea has trailing bytes") }
    }

    func check(matches key: CredentialPublicKey) throws(WebAuthnError) {
        let ok: Bool
        switch key.keyType {
        case let .rsa(n, e):
            // An exponent of 0 in the TPM means the default 65537.
            let exponent = rsaExponent == 0 ? 65537 : rsaExponent
            let e32 = e.count <= 4 ? e.reduce(UInt32(0)) { $0 << 8 | UInt32($1) } : nil
            ok = type == 0x0001 && unique[0] == n && e32 == exponent
        case let .ec2(curve, x, y):
            let tpmCurve: [Int: UInt16] = [1: 0x0003, 2: 0x0004, 3: 0x0005]
            ok = type == 0x0023 && tpmCurve[curve] == curveID && unique[0] == x && unique[1] == y
        case .okp:
            ok = false
        }
        guard ok else { throw .attestation(TPMAttestation.name, "pubArea key differs from the credential public key") }
    }
}

/// TPMS_ATTEST with TPMS_CERTIFY_INFO (TPM 2.0 Part 2 §10.12.8).
private struct CertifyInfo {
    let magic: UInt32
    let type: UInt16
    let extraData: [UInt8]
    let attestedName: [UInt8]

    init(_ bytes: [UInt8]) throws(WebAuthnError) {
        var r = TPMReader(bytes: bytes)
        magic = try r.u32()
        type = try r.u16()
        _ = try r.sized()  // qualifiedSigner
        extraData = try r.sized()
        _ = try r.take(17)  // clockInfo: clock, resetCount, restartCount, safe
        _ = try r.take(8)  // firmwareVersion
        attestedName = try r.sized()
        _ = try r.sized()  // qualifiedName
        guard r.atEnd else { throw .attestation(TPMAttestation.name, "certInfo has trailing bytes") }
    }
}
