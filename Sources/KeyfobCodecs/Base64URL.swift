import Foundation

/// base64url (RFC 4648 §5) as WebAuthn's JSON forms use it: no padding on output.
/// Input may be padded and may use the standard alphabet's `+` and `/` (some
/// clients send plain base64); any other character is refused.
public enum Base64URL {
    /// Unpadded base64url in one pass into the string's own buffer (the Foundation route — base64
    /// then two `replacingOccurrences` — was a visible share of every sign-in's profile).
    @inlinable
    public static func encode<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        let count = bytes.count
        let length = count / 3 * 4 + [0, 2, 3][count % 3]
        return String(unsafeUninitializedCapacity: length) { out in
            var o = 0
            var accumulator: UInt32 = 0
            var bits = 0
            for byte in bytes {
                accumulator = accumulator << 8 | UInt32(byte)
                bits += 8
                while bits >= 6 {
                    bits -= 6
                    out[o] = encodeTable[Int(accumulator >> UInt32(bits) & 0x3f)]
                    o += 1
                }
            }
            if bits > 0 {
                out[o] = encodeTable[Int(accumulator << UInt32(6 - bits) & 0x3f)]
                o += 1
            }
            return o
        }
    }

    @usableFromInline
    static let encodeTable: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Decodes base64url; returns nil for anything that is not base64url.
    /// One pass, one allocation: this runs on every assertion.
    @inlinable
    public static func decode(_ string: String) -> [UInt8]? {
        var string = string
        return string.withUTF8 { input -> [UInt8]? in
            var length = input.count
            while length > 0 && input[length - 1] == UInt8(ascii: "=") { length -= 1 }
            guard length % 4 != 1 else { return nil }
            var out = [UInt8]()
            out.reserveCapacity(length * 3 / 4)
            var accumulator: UInt32 = 0
            var bits = 0
            for i in 0..<length {
                let value = decodeTable[Int(input[i])]
                guard value != 0xff else { return nil }
                accumulator = accumulator << 6 | UInt32(value)
                bits += 6
                if bits >= 8 {
                    bits -= 8
                    out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                }
            }
            return out
        }
    }

    /// Sextet value of each byte; 0xff for bytes outside both alphabets.
    @usableFromInline
    static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xff, count: 256)
        for (i, c) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8.enumerated() { table[Int(c)] = UInt8(i) }
        table[Int(UInt8(ascii: "-"))] = 62
        table[Int(UInt8(ascii: "+"))] = 62
        table[Int(UInt8(ascii: "_"))] = 63
        table[Int(UInt8(ascii: "/"))] = 63
        return table
    }()
}
