/// NIP-19 bech32 entities: npub, nsec, note, nprofile, nevent.
public enum NIP19 {
    public enum Entity: Sendable, Equatable {
        case npub(PublicKey)
        /// The secret key's 32 bytes (wrap in `SecretKey` to use them).
        case nsec([UInt8])
        case note(eventID: [UInt8])
        case nprofile(pubkey: PublicKey, relays: [String])
        case nevent(eventID: [UInt8], relays: [String], author: PublicKey?, kind: UInt32?)
    }

    public static func npub(_ key: PublicKey) -> String { Bech32.encode(hrp: "npub", data: key.bytes) }
    public static func nsec(_ key: SecretKey) -> String { key.withUnsafeSecretBytes { Bech32.encode(hrp: "nsec", data: $0) } }
    public static func note(_ id: [UInt8]) -> String { Bech32.encode(hrp: "note", data: id) }

    public static func nprofile(_ key: PublicKey, relays: [String] = []) -> String {
        Bech32.encode(hrp: "nprofile", data: tlv(0, key.bytes) + relays.flatMap { tlv(1, Array($0.utf8)) })
    }

    public static func nevent(_ id: [UInt8], relays: [String] = [], author: PublicKey? = nil, kind: UInt32? = nil) -> String {
        var data = tlv(0, id) + relays.flatMap { tlv(1, Array($0.utf8)) }
        if let author { data += tlv(2, author.bytes) }
        if let kind { data += tlv(3, [UInt8(kind >> 24), UInt8(kind >> 16 & 0xff), UInt8(kind >> 8 & 0xff), UInt8(kind & 0xff)]) }
        return Bech32.encode(hrp: "nevent", data: data)
    }

    private static func tlv(_ type: UInt8, _ value: [UInt8]) -> [UInt8] { [type, UInt8(min(value.count, 255))] + value.prefix(255) }

    private static func parseTLV(_ data: [UInt8]) throws(NostrError) -> [(UInt8, [UInt8])] {
        var out: [(UInt8, [UInt8])] = []
        var i = 0
        while i < data.count {
            guard i + 2 <= data.count else { throw .content("NIP-19 TLV is truncated") }
            let type = data[i], length = Int(data[i + 1])
            guard i + 2 + length <= data.count else { throw .content("NIP-19 TLV is truncated") }
            out.append((type, Array(data[(i + 2)..<(i + 2 + length)])))
            i += 2 + length
        }
        return out
    }

    public static func decode(_ text: String) throws(NostrError) -> Entity {
        guard let (hrp, data) = Bech32.decode(text) else { throw .content("not a valid bech32 string") }
        switch hrp {
        case "npub":
            guard data.count == 32 else { throw .init(.invalidPubkey, "npub must hold 32 bytes") }
            return .npub(try PublicKey(bytes: data))
        case "nsec":
            guard data.count == 32 else { throw .content("nsec must hold 32 bytes") }
            return .nsec(data)
        case "note":
            guard data.count == 32 else { throw .content("note must hold 32 bytes") }
            return .note(eventID: data)
        case "nprofile":
            let items = try parseTLV(data)
            guard let special = items.first(where: { $0.0 == 0 })?.1, special.count == 32 else {
                throw .content("nprofile lacks its 32-byte pubkey")
            }
            return .nprofile(
                pubkey: try PublicKey(bytes: special),
                relays: items.filter { $0.0 == 1 }.map { String(decoding: $0.1, as: UTF8.self) })
        case "nevent":
            let items = try parseTLV(data)
            guard let id = items.first(where: { $0.0 == 0 })?.1, id.count == 32 else { throw .content("nevent lacks its 32-byte id") }
            var author: PublicKey?
            if let a = items.first(where: { $0.0 == 2 })?.1 { author = try PublicKey(bytes: a) }
            var kind: UInt32?
            if let k = items.first(where: { $0.0 == 3 })?.1 {
                guard k.count == 4 else { throw .content("nevent kind must be 4 bytes") }
                kind = k.reduce(0) { $0 << 8 | UInt32($1) }
            }
            return .nevent(
                eventID: id, relays: items.filter { $0.0 == 1 }.map { String(decoding: $0.1, as: UTF8.self) },
                author: author, kind: kind)
        default:
            throw .content("NIP-19 prefix \"\(hrp)\" is not supported")
        }
    }
}
