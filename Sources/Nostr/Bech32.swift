/// Bech32 (BIP-173), as NIP-19 uses it. NIP-19 strings may exceed BIP-173's 90 characters
/// (nprofile, nevent, private-zap parts), so the length limit is a parameter.
public enum Bech32 {
    static let charset = Array("qpzry9x8gf2tvdw0s3jn54khce6mua7l".utf8)
    static let generator: [UInt32] = [0x3b6a_57b2, 0x2650_8e6d, 0x1ea1_19fa, 0x3d42_33dd, 0x2a14_62b3]

    static func polymod(_ values: [UInt8]) -> UInt32 {
        var chk: UInt32 = 1
        for v in values {
            let top = chk >> 25
            chk = (chk & 0x1ff_ffff) << 5 ^ UInt32(v)
            for i in 0..<5 where (top >> UInt32(i)) & 1 == 1 { chk ^= generator[i] }
        }
        return chk
    }

    static func expand(_ hrp: [UInt8]) -> [UInt8] { hrp.map { $0 >> 5 } + [0] + hrp.map { $0 & 31 } }

    /// Regroups bits (8 → 5 when encoding, 5 → 8 when decoding).
    static func convert(_ data: [UInt8], from: Int, to: Int, pad: Bool) -> [UInt8]? {
        var acc = 0, bits = 0
        var out: [UInt8] = []
        let maxv = (1 << to) - 1
        for value in data {
            guard Int(value) >> from == 0 else { return nil }
            acc = acc << from | Int(value)
            bits += from
            while bits >= to { bits -= to; out.append(UInt8(acc >> bits & maxv)) }
        }
        if pad {
            if bits > 0 { out.append(UInt8(acc << (to - bits) & maxv)) }
        } else if bits >= from || (acc << (to - bits)) & maxv != 0 {
            return nil
        }
        return out
    }

    public static func encode(hrp: String, data: [UInt8]) -> String {
        let h = Array(hrp.utf8)
        let values = convert(data, from: 8, to: 5, pad: true)!
        let mod = polymod(expand(h) + values + [0, 0, 0, 0, 0, 0]) ^ 1
        let checksum = (0..<6).map { UInt8(mod >> UInt32(5 * (5 - $0)) & 31) }
        return hrp + "1" + String(decoding: (values + checksum).map { charset[Int($0)] }, as: UTF8.self)
    }

    /// Decodes to (hrp, bytes); nil for anything that is not valid bech32.
    public static func decode(_ text: String, maxLength: Int = 5000) -> (hrp: String, data: [UInt8])? {
        let utf8 = Array(text.utf8)
        guard utf8.count <= maxLength, utf8.count >= 8 else { return nil }
        let lower = utf8.contains { $0 >= 97 && $0 <= 122 }, upper = utf8.contains { $0 >= 65 && $0 <= 90 }
        guard !(lower && upper), utf8.allSatisfy({ $0 >= 33 && $0 <= 126 }) else { return nil }
        let s = utf8.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        guard let separator = s.lastIndex(of: UInt8(ascii: "1")), separator >= 1, s.count - separator > 6 else { return nil }
        let hrp = Array(s[..<separator])
        var values: [UInt8] = []
        for c in s[(separator + 1)...] {
            guard let v = charset.firstIndex(of: c) else { return nil }
            values.append(UInt8(v))
        }
        guard polymod(expand(hrp) + values) == 1,
            let data = convert(Array(values.dropLast(6)), from: 5, to: 8, pad: false)
        else { return nil }
        return (String(decoding: hrp, as: UTF8.self), data)
    }
}
