import Foundation

/// base64url (RFC 4648 §5) as WebAuthn's JSON forms use it: no padding on output.
/// Input may be padded and may use the standard alphabet's `+` and `/` (some
/// clients send plain base64); any other character is refused.
public enum Base64URL {
    public static func encode<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        var s = Data(bytes).base64EncodedString()
        s = s.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while s.hasSuffix("=") { s.removeLast() }
        return s
    }

    /// Decodes base64url; returns nil for anything that is not base64url.
    public static func decode(_ string: String) -> [UInt8]? {
        var utf8 = Array(string.utf8)
        while utf8.last == UInt8(ascii: "=") { utf8.removeLast() }
        guard utf8.count % 4 != 1 else { return nil }
        for i in utf8.indices {
            switch utf8[i] {
            case UInt8(ascii: "-"): utf8[i] = UInt8(ascii: "+")
            case UInt8(ascii: "_"): utf8[i] = UInt8(ascii: "/")
            case UInt8(ascii: "+"), UInt8(ascii: "/"),
                 UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"):
                break
            default: return nil
            }
        }
        while utf8.count % 4 != 0 { utf8.append(UInt8(ascii: "=")) }
        guard let data = Data(base64Encoded: Data(utf8)) else { return nil }
        return [UInt8](data)
    }

    /// Decodes a required field, naming it in the error.
    static func decode(_ string: String, field: String) throws(WebAuthnError) -> [UInt8] {
        guard let bytes = decode(string) else { throw .malformed("\(field) is not valid base64url") }
        return bytes
    }
}
