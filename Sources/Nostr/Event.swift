import Foundation
import KeyfobCodecs
import KeyfobCrypto

/// An event before it is signed: what a client asks the signer to sign.
/// Any `id` or `pubkey` a client sends is ignored; the signer sets both.
public struct UnsignedEvent: Sendable, Equatable {
    public var createdAt: Int64
    public var kind: Int
    public var tags: [[String]]
    public var content: String

    public init(createdAt: Int64, kind: Int, tags: [[String]] = [], content: String) {
        self.createdAt = createdAt
        self.kind = kind
        self.tags = tags
        self.content = content
    }

    /// The event id for this author: SHA-256 of the canonical serialization.
    public func id(pubkey: PublicKey) -> [UInt8] {
        sha256(Event.serialize(pubkey: pubkey.hex, createdAt: createdAt, kind: kind, tags: tags, content: content))
    }

    /// Signs with `key`: computes the id, then a BIP-340 signature over it.
    public func sign(with key: SecretKey) -> Event {
        let id = id(pubkey: key.publicKey)
        return Event(
            id: id, pubkey: key.publicKey, createdAt: createdAt, kind: kind, tags: tags, content: content,
            sig: key.sign(id))
    }
}

/// A signed NIP-01 event.
public struct Event: Sendable, Equatable {
    public let id: [UInt8]
    public let pubkey: PublicKey
    public let createdAt: Int64
    public let kind: Int
    public let tags: [[String]]
    public let content: String
    public let sig: [UInt8]

    /// Kinds are 0...65535 (NIP-01).
    public static let kinds = 0...65535
    /// created_at must fit a JSON integer every client reads exactly (2^53 - 1).
    public static let maxTimestamp: Int64 = (1 << 53) - 1

    public var unsigned: UnsignedEvent { UnsignedEvent(createdAt: createdAt, kind: kind, tags: tags, content: content) }

    /// Whether the id is the hash of the serialization and the signature verifies over it.
    /// A client-supplied id is never trusted: it is recomputed.
    public var isValid: Bool {
        unsigned.id(pubkey: pubkey) == id && pubkey.isValidSignature(sig, for: id)
    }

    /// NIP-01's canonical serialization `[0,pubkey,created_at,kind,tags,content]` as UTF-8.
    public static func serialize(pubkey: String, createdAt: Int64, kind: Int, tags: [[String]], content: String) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(content.utf8.count + 128)
        out += Array("[0,\"".utf8)
        out += Array(pubkey.utf8)
        out += Array("\",\(createdAt),\(kind),[".utf8)
        appendTags(tags, to: &out)
        out += Array("],".utf8)
        appendJSONString(content, to: &out)
        out.append(UInt8(ascii: "]"))
        return out
    }

    /// The tags' contents (without the outer brackets), each item a NIP-01 string.
    static func appendTags(_ tags: [[String]], to out: inout [UInt8]) {
        for (i, tag) in tags.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "["))
            for (j, item) in tag.enumerated() {
                if j > 0 { out.append(UInt8(ascii: ",")) }
                appendJSONString(item, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }

    /// NIP-01 escaping: only `"` `\` and the five named controls are short-escaped; other
    /// C0 controls are `\u00xx`; everything else (including `/`, DEL, U+2028) is verbatim.
    static func appendJSONString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in s.utf8 {
            switch byte {
            case 0x22: out += [0x5c, 0x22]
            case 0x5c: out += [0x5c, 0x5c]
            case 0x0a: out += [0x5c, UInt8(ascii: "n")]
            case 0x0d: out += [0x5c, UInt8(ascii: "r")]
            case 0x09: out += [0x5c, UInt8(ascii: "t")]
            case 0x08: out += [0x5c, UInt8(ascii: "b")]
            case 0x0c: out += [0x5c, UInt8(ascii: "f")]
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0x0f)]]
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// The event as NIP-01 JSON (`id`, `pubkey`, `created_at`, `kind`, `tags`, `content`, `sig`).
    public var json: String {
        var out = Array("{\"id\":\"\(Hex.encode(id))\",\"pubkey\":\"\(pubkey.hex)\",\"created_at\":\(createdAt),\"kind\":\(kind),\"tags\":[".utf8)
        Event.appendTags(tags, to: &out)
        out += Array("],\"content\":".utf8)
        Event.appendJSONString(content, to: &out)
        out += Array(",\"sig\":\"\(Hex.encode(sig))\"}".utf8)
        return String(decoding: out, as: UTF8.self)
    }

    public init(id: [UInt8], pubkey: PublicKey, createdAt: Int64, kind: Int, tags: [[String]], content: String, sig: [UInt8]) {
        self.id = id
        self.pubkey = pubkey
        self.createdAt = createdAt
        self.kind = kind
        self.tags = tags
        self.content = content
        self.sig = sig
    }

    /// Parses a signed event from JSON, checking every field's type and range (not the signature).
    public static func parse(json: [UInt8]) throws(NostrError) -> Event {
        try parse(object: EventFields.object(json))
    }

    /// Parses a signed event from an already decoded JSON object (not the signature).
    public static func parse(object: [String: Any]) throws(NostrError) -> Event {
        let fields = try EventFields(object, requireSigned: true)
        guard let id = fields.id, let pubkey = fields.pubkey, let sig = fields.sig else {
            throw .content("a signed event needs id, pubkey and sig")
        }
        return Event(
            id: id, pubkey: pubkey, createdAt: fields.createdAt!, kind: fields.kind, tags: fields.tags,
            content: fields.content, sig: sig)
    }
}

extension UnsignedEvent {
    /// Parses what a client asks to sign: `kind` and `content` required, `tags` default `[]`,
    /// `created_at` default `now`; any `id`, `pubkey` or `sig` is ignored.
    public static func parse(json: [UInt8], now: Int64) throws(NostrError) -> UnsignedEvent {
        try parse(object: EventFields.object(json), now: now)
    }

    public static func parse(object: [String: Any], now: Int64) throws(NostrError) -> UnsignedEvent {
        let fields = try EventFields(object, requireSigned: false)
        return UnsignedEvent(createdAt: fields.createdAt ?? now, kind: fields.kind, tags: fields.tags, content: fields.content)
    }
}

/// Field-by-field validation shared by signed and unsigned events.
struct EventFields {
    var id: [UInt8]?
    var pubkey: PublicKey?
    var sig: [UInt8]?
    var createdAt: Int64?
    var kind: Int
    var tags: [[String]]
    var content: String

    static let maxJSONSize = 256 * 1024

    static func object(_ json: [UInt8]) throws(NostrError) -> [String: Any] {
        guard json.count <= maxJSONSize else { throw .init(.payloadTooLarge, "event JSON is over \(maxJSONSize) bytes") }
        guard let object = (try? JSONSerialization.jsonObject(with: Data(json))) as? [String: Any] else {
            throw .content("event is not a JSON object")
        }
        return object
    }

    /// An integer JSON number (not a bool, not a fraction). Foundation hands back NSNumber,
    /// which bridges to Bool and Int alike, so the stored type decides.
    static func integer(_ value: Any?) -> Int64? {
        guard let number = value as? NSNumber else { return nil }
        switch String(cString: number.objCType) {
        case "c", "B": return nil  // JSON true/false
        case "d", "f":
            let d = number.doubleValue
            guard d.rounded() == d, abs(d) < 9.007e15 else { return nil }
            return Int64(d)
        default: return number.int64Value
        }
    }

    init(_ o: [String: Any], requireSigned: Bool) throws(NostrError) {
        guard let kind = Self.integer(o["kind"]), Event.kinds.contains(Int(clamping: kind)) else {
            throw .content("kind must be an integer from 0 to 65535")
        }
        self.kind = Int(kind)
        guard let content = o["content"] as? String else { throw .content("content must be a string") }
        self.content = content
        if let raw = o["tags"], !(raw is NSNull) {
            guard let list = raw as? [Any] else { throw .content("tags must be an array of arrays of strings") }
            var tags: [[String]] = []
            for item in list {
                guard let tag = item as? [Any], let strings = tag as? [String], strings.count == tag.count else {
                    throw .content("tags must be an array of arrays of strings")
                }
                tags.append(strings)
            }
            self.tags = tags
        } else if requireSigned {
            throw .content("tags is missing")
        } else {
            tags = []
        }
        if let raw = o["created_at"], !(raw is NSNull) {
            guard let t = Self.integer(raw), t >= 0, t <= Event.maxTimestamp else {
                throw .content("created_at must be a non-negative integer")
            }
            createdAt = t
        } else if requireSigned {
            throw .content("created_at is missing")
        }
        guard requireSigned else { return }
        guard let idHex = o["id"] as? String, idHex.utf8.count == 64, let id = Hex.decode(idHex) else {
            throw .content("id must be 64 hex characters")
        }
        guard let pubHex = o["pubkey"] as? String else { throw .init(.invalidPubkey, "pubkey is missing") }
        guard let sigHex = o["sig"] as? String, sigHex.utf8.count == 128, let sig = Hex.decode(sigHex) else {
            throw .content("sig must be 128 hex characters")
        }
        self.id = id
        self.pubkey = try PublicKey(hex: pubHex)
        self.sig = sig
    }
}
