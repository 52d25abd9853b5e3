import KeyfobCrypto

/// SS58 addresses (docs.substrate.io "SS58 address format"): base58 of the network prefix, the
/// 32-byte account id and the first two bytes of BLAKE2b-512("SS58PRE" ‖ prefix ‖ id).
public enum SS58 {
    /// Networks Keyfob names: Polkadot, Kusama and the generic Substrate prefix.
    public static let polkadot: UInt16 = 0
    public static let kusama: UInt16 = 2
    public static let generic: UInt16 = 42

    public static func encode(accountId: [UInt8], prefix: UInt16) -> String {
        precondition(accountId.count == 32 && prefix < 16384 && prefix != 46 && prefix != 47)
        let payload = prefixBytes(prefix) + accountId
        return Base58.encode(payload + checksum(payload))
    }

    /// The account id and prefix an address names; nil for anything malformed (bad base58, length,
    /// checksum, or a reserved prefix).
    public static func decode(_ address: String) -> (accountId: [UInt8], prefix: UInt16)? {
        guard address.utf8.count <= 64, let bytes = Base58.decode(address), bytes.count >= 35 else { return nil }
        let prefixLength: Int
        let prefix: UInt16
        if bytes[0] < 64 {
            prefixLength = 1
            prefix = UInt16(bytes[0])
        } else if bytes[0] < 128 {
            prefixLength = 2
            let lower = (UInt16(bytes[0]) << 2) | (UInt16(bytes[1]) >> 6)
            prefix = (lower & 0xff) | (UInt16(bytes[1] & 0x3f) << 8)
        } else {
            return nil
        }
        guard bytes.count == prefixLength + 32 + 2, prefix != 46, prefix != 47 else { return nil }
        let payload = Array(bytes[0..<(prefixLength + 32)])
        guard Array(bytes[(prefixLength + 32)...]) == checksum(payload) else { return nil }
        return (Array(payload[prefixLength...]), prefix)
    }

    private static func prefixBytes(_ prefix: UInt16) -> [UInt8] {
        if prefix < 64 { return [UInt8(prefix)] }
        return [UInt8(((prefix & 0xfc) >> 2) | 0x40), UInt8((prefix >> 8) | ((prefix & 0x03) << 6))]
    }

    private static func checksum(_ payload: [UInt8]) -> [UInt8] {
        Array(Sodium.blake2b(Array("SS58PRE".utf8) + payload, length: 64)[0..<2])
    }
}

/// Base58 with Bitcoin's alphabet, for SS58 (inputs are tens of bytes: the quadratic loop is fine).
enum Base58 {
    private static let alphabet = Array("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz".utf8)
    private static let indexes: [Int8] = {
        var table = [Int8](repeating: -1, count: 128)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = Int8(i) }
        return table
    }()

    static func encode(_ bytes: [UInt8]) -> String {
        let zeros = bytes.prefix { $0 == 0 }.count
        var digits: [UInt8] = []
        for byte in bytes {
            var carry = Int(byte)
            for i in digits.indices {
                carry += Int(digits[i]) << 8
                digits[i] = UInt8(carry % 58)
                carry /= 58
            }
            while carry > 0 {
                digits.append(UInt8(carry % 58))
                carry /= 58
            }
        }
        let text = [UInt8](repeating: alphabet[0], count: zeros) + digits.reversed().map { alphabet[Int($0)] }
        return String(decoding: text, as: UTF8.self)
    }

    static func decode(_ string: String) -> [UInt8]? {
        let chars = Array(string.utf8)
        let zeros = chars.prefix { $0 == alphabet[0] }.count
        var bytes: [UInt8] = []
        for c in chars {
            guard c < 128, indexes[Int(c)] >= 0 else { return nil }
            var carry = Int(indexes[Int(c)])
            for i in bytes.indices {
                carry += Int(bytes[i]) * 58
                bytes[i] = UInt8(carry & 0xff)
                carry >>= 8
            }
            while carry > 0 {
                bytes.append(UInt8(carry & 0xff))
                carry >>= 8
            }
        }
        return [UInt8](repeating: 0, count: zeros) + bytes.reversed()
    }
}
