import WebAuthn

/// Encodes CBOR in CTAP2 canonical form, for building authenticator output in tests.
public func encodeCBOR(_ value: CBOR) -> [UInt8] {
    var out: [UInt8] = []
    func head(_ major: UInt8, _ n: UInt64) {
        switch n {
        case 0..<24: out.append(major << 5 | UInt8(n))
        case 24..<256: out += [major << 5 | 24, UInt8(n)]
        case 256..<65536: out += [major << 5 | 25, UInt8(n >> 8), UInt8(n & 0xff)]
        case 65536..<(1 << 32): out.append(major << 5 | 26); for s in [24, 16, 8, 0] { out.append(UInt8(n >> UInt64(s) & 0xff)) }
        default: out.append(major << 5 | 27); for s in stride(from: 56, through: 0, by: -8) { out.append(UInt8(n >> UInt64(s) & 0xff)) }
        }
    }
    func encode(_ v: CBOR) {
        switch v {
        case .unsigned(let n): head(0, n)
        case .negative(let n): head(1, n)
        case .bytes(let b): head(2, UInt64(b.count)); out += b
        case .text(let t): head(3, UInt64(t.utf8.count)); out += Array(t.utf8)
        case .array(let a): head(4, UInt64(a.count)); a.forEach(encode)
        case .map(let m): head(5, UInt64(m.count)); for (k, v) in m { encode(k); encode(v) }
        case .tagged(let t, let v): head(6, t); encode(v)
        case .bool(let b): out.append(b ? 0xf5 : 0xf4)
        case .null: out.append(0xf6)
        case .undefined: out.append(0xf7)
        case .float(let d):
            out.append(0xfb)
            let bits = d.bitPattern
            for s in stride(from: 56, through: 0, by: -8) { out.append(UInt8(bits >> UInt64(s) & 0xff)) }
        }
    }
    encode(value)
    return out
}

extension CBOR {
    /// A CBOR integer from a Swift one.
    public static func int(_ n: Int) -> CBOR { n >= 0 ? .unsigned(UInt64(n)) : .negative(UInt64(-1 - n)) }
}
