/// A minimal DER reader for the few ASN.1 structures attestation formats embed
/// in certificate extensions (Android key description, TPM subject alternative
/// names, Apple nonce, FIDO AAGUID). Certificates themselves are parsed by OpenSSL.
struct DER: Sendable, Equatable {
    /// The first identifier byte (class, constructed bit, low tag number).
    let tag: UInt8
    /// The full tag number, also for the high-tag-number form (e.g. 600 for Android's allApplications).
    let tagNumber: Int
    let value: ArraySlice<UInt8>

    static let sequence: UInt8 = 0x30
    static let set: UInt8 = 0x31
    static let octetString: UInt8 = 0x04
    static let integer: UInt8 = 0x02
    static let oid: UInt8 = 0x06
    static let enumerated: UInt8 = 0x0a
    static let boolean: UInt8 = 0x01
    static let null: UInt8 = 0x05

    struct Error: Swift.Error {}

    /// Parses every element of `bytes` in order; fails on truncation or leftovers.
    static func parseAll(_ bytes: ArraySlice<UInt8>) throws(Error) -> [DER] {
        var out: [DER] = []
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let (element, next) = try parseOne(bytes, at: i)
            out.append(element)
            i = next
        }
        return out
    }

    /// Parses exactly one element filling `bytes`.
    static func parse(_ bytes: ArraySlice<UInt8>) throws(Error) -> DER {
        let (element, next) = try parseOne(bytes, at: bytes.startIndex)
        guard next == bytes.endIndex else { throw Error() }
        return element
    }

    private static func parseOne(_ b: ArraySlice<UInt8>, at start: Int) throws(Error) -> (DER, Int) {
        var i = start
        guard i < b.endIndex else { throw Error() }
        let tag = b[i]; i += 1
        var number = Int(tag & 0x1f)
        // High-tag-number form (tag number ≥ 31) appears in Android's AuthorizationList.
        if number == 0x1f {
            number = 0
            var n = 0
            repeat {
                guard i < b.endIndex, n < 4 else { throw Error() }
                number = number << 7 | Int(b[i] & 0x7f)
                n += 1; i += 1
            } while b[i - 1] & 0x80 != 0
        }
        guard i < b.endIndex else { throw Error() }
        var length = Int(b[i]); i += 1
        if length & 0x80 != 0 {
            let count = length & 0x7f
            guard count >= 1, count <= 3, b.endIndex - i >= count else { throw Error() }
            length = 0
            for _ in 0..<count { length = length << 8 | Int(b[i]); i += 1 }
        }
        guard length <= b.endIndex - i else { throw Error() }
        return (DER(tag: tag, tagNumber: number, value: b[i..<(i + length)]), i + length)
    }

    /// The elements inside a constructed value (SEQUENCE, SET, explicit tag); empty when malformed.
    var children: [DER] { (try? DER.parseAll(value)) ?? [] }

    /// Dotted-decimal text of an OBJECT IDENTIFIER value.
    var oidString: String? {
        guard tag == DER.oid, !value.isEmpty else { return nil }
        var parts: [UInt64] = []
        var acc: UInt64 = 0
        for byte in value {
            guard acc < (1 << 56) else { return nil }
            acc = acc << 7 | UInt64(byte & 0x7f)
            if byte & 0x80 == 0 { parts.append(acc); acc = 0 }
        }
        guard value.last! & 0x80 == 0, let first = parts.first else { return nil }
        let head: [UInt64] = first < 80 ? [first / 40, first % 40] : [2, first - 80]
        return (head + parts.dropFirst()).map(String.init).joined(separator: ".")
    }

    /// Small non-negative INTEGER or ENUMERATED values.
    var intValue: Int? {
        guard tag == DER.integer || tag == DER.enumerated, !value.isEmpty, value.count <= 8 else { return nil }
        guard value.first! & 0x80 == 0 else { return nil }
        return value.reduce(0) { $0 << 8 | Int($1) }
    }
}

/// Android's AuthorizationList uses context tags with numbers above 30 (e.g. [600]).
/// Returns (tagNumber, element) pairs for such a SEQUENCE's contents; nil when malformed.
func contextTaggedElements(_ bytes: ArraySlice<UInt8>) -> [(Int, DER)]? {
    (try? DER.parseAll(bytes))?.map { ($0.tagNumber, $0) }
}
