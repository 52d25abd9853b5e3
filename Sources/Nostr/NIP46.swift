import Foundation

/// NIP-46 remote signing, the message layer: requests and responses as JSON, carried in kind-24133
/// events whose content is NIP-44 encrypted between the client's key and the signer's key, and the
/// `bunker://` and `nostrconnect://` URLs that introduce the two sides. No transport here.
public enum NIP46 {
    /// The event kind that carries NIP-46 messages.
    public static let kind = 24133
    /// Bounds on what a peer may send (a request is small; anything past these is refused unread).
    public static let maxMessageBytes = 256 * 1024
    public static let maxParams = 8
    public static let maxIDLength = 64

    /// A client's self-description, `{"name": …, "url": …, "image": …}` (`connect`'s fourth
    /// parameter, a nostrconnect URL's older `metadata=`): the object, or empty when it is not one
    /// or is over 4 KiB.
    public static func clientMetadata(_ json: String) -> [String: Any] {
        guard json.utf8.count <= 4096,
            let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any]
        else { return [:] }
        return object
    }

    /// `{"id": "…", "method": "…", "params": ["…", …]}`.
    public struct Request: Sendable, Equatable {
        public var id: String
        public var method: String
        public var params: [String]

        public init(id: String, method: String, params: [String]) {
            self.id = id
            self.method = method
            self.params = params
        }

        /// Parses a decrypted request, checking every field's type and size.
        public static func parse(_ json: String) throws(NostrError) -> Request {
            guard json.utf8.count <= NIP46.maxMessageBytes else { throw .content("a NIP-46 message is at most 256 KiB") }
            guard let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any] else {
                throw .content("a NIP-46 request is a JSON object")
            }
            guard let id = object["id"] as? String, !id.isEmpty, id.utf8.count <= NIP46.maxIDLength else {
                throw .content("a NIP-46 request needs an id of 1 to 64 characters")
            }
            guard let method = object["method"] as? String, !method.isEmpty, method.utf8.count <= 64 else {
                throw .content("a NIP-46 request needs a method")
            }
            let rawParams = object["params"] ?? [Any]()
            guard let list = rawParams as? [Any], list.count <= NIP46.maxParams else {
                throw .content("params must be a list of at most \(NIP46.maxParams) strings")
            }
            var params: [String] = []
            for value in list {
                guard let text = value as? String else { throw .content("every param must be a string") }
                params.append(text)
            }
            return Request(id: id, method: method, params: params)
        }

        public var json: String {
            var out = Array("{\"id\":".utf8)
            Event.appendJSONString(id, to: &out)
            out += Array(",\"method\":".utf8)
            Event.appendJSONString(method, to: &out)
            out += Array(",\"params\":[".utf8)
            for (index, param) in params.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Event.appendJSONString(param, to: &out)
            }
            out += Array("]}".utf8)
            return String(decoding: out, as: UTF8.self)
        }
    }

    /// `{"id": "…", "result": "…"}` or `{"id": "…", "result": "", "error": "…"}`; `auth_url`
    /// challenges are a result of `"auth_url"` with the URL as the error.
    public struct Response: Sendable, Equatable {
        public var id: String
        public var result: String?
        public var error: String?

        public init(id: String, result: String?, error: String? = nil) {
            self.id = id
            self.result = result
            self.error = error
        }

        public static func authURL(id: String, url: String) -> Response { Response(id: id, result: "auth_url", error: url) }

        public var json: String {
            var out = Array("{\"id\":".utf8)
            Event.appendJSONString(id, to: &out)
            out += Array(",\"result\":".utf8)
            if let result { Event.appendJSONString(result, to: &out) } else { out += Array("null".utf8) }
            if let error {
                out += Array(",\"error\":".utf8)
                Event.appendJSONString(error, to: &out)
            }
            out.append(UInt8(ascii: "}"))
            return String(decoding: out, as: UTF8.self)
        }

        public static func parse(_ json: String) throws(NostrError) -> Response {
            guard json.utf8.count <= NIP46.maxMessageBytes,
                let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any],
                let id = object["id"] as? String
            else {
                throw .content("a NIP-46 response is a JSON object with an id")
            }
            return Response(id: id, result: object["result"] as? String, error: object["error"] as? String)
        }
    }

    /// Which encryption a peer used, so the answer goes back in the same one (NIP-44 is the
    /// standard; some older clients still send NIP-04).
    public enum Encryption: Sendable { case nip44, nip04 }

    /// A message sealed for `peer` and signed by `key`, p-tagged to the peer.
    public static func wrap(
        _ message: String, from key: SecretKey, to peer: PublicKey, createdAt: Int64,
        encryption: Encryption = .nip44
    ) throws(NostrError) -> Event {
        let content =
            switch encryption {
            case .nip44: try NIP44.encrypt(message, from: key, to: peer)
            case .nip04: try NIP04.encrypt(message, from: key, to: peer)
            }
        return UnsignedEvent(createdAt: createdAt, kind: kind, tags: [["p", peer.hex]], content: content).sign(with: key)
    }

    /// What a kind-24133 event says to the holder of `key`: the sender and the plaintext. Refuses
    /// an event that is not NIP-46, not p-tagged to this key, badly signed, or undecryptable.
    public static func unwrap(_ event: Event, with key: SecretKey) throws(NostrError) -> (sender: PublicKey, message: String, encryption: Encryption)
    {
        guard event.kind == kind else { throw .content("not a NIP-46 event (kind \(event.kind))") }
        let me = key.publicKey.hex
        guard event.tags.contains(where: { $0.count >= 2 && $0[0] == "p" && $0[1] == me }) else {
            throw .content("the event is not p-tagged to this signer")
        }
        guard event.isValid else { throw .content("the event's id or signature is wrong") }
        guard event.content.utf8.count <= maxMessageBytes else { throw .content("a NIP-46 message is at most 256 KiB") }
        // NIP-04 payloads carry "?iv="; NIP-44 payloads are plain base64 (no '?').
        if event.content.contains("?iv=") {
            return (event.pubkey, try NIP04.decrypt(event.content, with: key, from: event.pubkey), .nip04)
        }
        return (event.pubkey, try NIP44.decrypt(event.content, with: key, from: event.pubkey), .nip44)
    }
}

/// `bunker://<signer pubkey hex>?relay=wss://…&relay=…&secret=…`: what a signer shows a client.
public struct BunkerURL: Sendable, Equatable {
    public var signer: PublicKey
    public var relays: [String]
    public var secret: String?

    public init(signer: PublicKey, relays: [String], secret: String?) {
        self.signer = signer
        self.relays = relays
        self.secret = secret
    }

    public var string: String {
        var components = URLComponents()
        components.scheme = "bunker"
        components.host = signer.hex
        components.queryItems =
            relays.map { URLQueryItem(name: "relay", value: $0) } + (secret.map { [URLQueryItem(name: "secret", value: $0)] } ?? [])
        return NIP46URL.encode(components)
    }

    public static func parse(_ text: String) throws(NostrError) -> BunkerURL {
        let (host, items) = try NIP46URL.split(text, scheme: "bunker")
        let signer: PublicKey
        do { signer = try PublicKey(hex: host) } catch { throw .content("a bunker URL names the signer's public key in hex") }
        return BunkerURL(
            signer: signer, relays: items.filter { $0.name == "relay" }.compactMap(\.value),
            secret: items.first { $0.name == "secret" }?.value)
    }
}

/// `nostrconnect://<client pubkey hex>?relay=…&secret=…&perms=…&name=…&url=…&image=…`: what a
/// client shows a signer (the user pastes it). `name`, `url` and `image` are the client's own
/// claims, never checked.
public struct NostrConnectURL: Sendable, Equatable {
    public var client: PublicKey
    public var relays: [String]
    public var secret: String
    public var perms: [NIP46Permission]
    public var name: String?
    public var url: String?
    public var image: String?

    public static func parse(_ text: String) throws(NostrError) -> NostrConnectURL {
        let (host, items) = try NIP46URL.split(text, scheme: "nostrconnect")
        let client: PublicKey
        do { client = try PublicKey(hex: host) } catch { throw .content("a nostrconnect URL names the client's public key in hex") }
        func value(_ name: String) -> String? { items.first { $0.name == name }?.value.flatMap { $0.isEmpty ? nil : $0 } }
        let relays = items.filter { $0.name == "relay" }.compactMap(\.value)
        guard !relays.isEmpty else { throw .content("a nostrconnect URL needs at least one relay") }
        guard let secret = value("secret"), secret.utf8.count <= 128 else {
            throw .content("a nostrconnect URL needs a secret (at most 128 characters)")
        }
        // Earlier clients (rust-nostr among them) send `metadata={"name":…,"url":…}` instead.
        let metadata = value("metadata").map(NIP46.clientMetadata) ?? [:]
        func field(_ name: String) -> String? { value(name) ?? (metadata[name] as? String).flatMap { $0.isEmpty ? nil : $0 } }
        return NostrConnectURL(
            client: client, relays: relays, secret: secret, perms: try NIP46Permission.parseList(value("perms") ?? ""),
            name: field("name"), url: field("url"), image: field("image"))
    }
}

/// One entry of a `perms` list: `sign_event:1`, `nip44_encrypt`.
public struct NIP46Permission: Sendable, Equatable, Hashable {
    public var method: String
    public var kind: Int?

    public init(method: String, kind: Int? = nil) {
        self.method = method
        self.kind = kind
    }

    public static func parseList(_ text: String) throws(NostrError) -> [NIP46Permission] {
        let entries = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard entries.count <= 64 else { throw .content("perms lists at most 64 permissions") }
        var out: [NIP46Permission] = []
        for entry in entries {
            let parts = entry.split(separator: ":", maxSplits: 1).map(String.init)
            guard let method = parts.first, !method.isEmpty, method.utf8.count <= 64,
                method.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") })
            else {
                throw .content("a permission is method[:kind], e.g. sign_event:1")
            }
            var kind: Int?
            if parts.count == 2 {
                guard let value = Int(parts[1]), Event.kinds.contains(value) else { throw .content("a permission's kind is 0…65535") }
                kind = value
            }
            let permission = NIP46Permission(method: method, kind: kind)
            if !out.contains(permission) { out.append(permission) }
        }
        return out
    }

    public var string: String { kind.map { "\(method):\($0)" } ?? method }
}

/// The URL handling both schemes share.
enum NIP46URL {
    static func split(_ text: String, scheme: String) throws(NostrError) -> (host: String, items: [URLQueryItem]) {
        guard text.utf8.count <= 8192 else { throw .content("the URL is too long") }
        guard let components = URLComponents(string: text), components.scheme?.lowercased() == scheme,
            let host = components.host, host.utf8.count == 64
        else {
            throw .content("not a \(scheme):// URL with a 64-character hex public key")
        }
        return (host.lowercased(), components.queryItems ?? [])
    }

    /// Query values percent-encoded strictly (URLComponents leaves ':' '/' '&'-safe forms that
    /// some parsers split on).
    static func encode(_ components: URLComponents) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let query = (components.queryItems ?? []).map { item in
            "\(item.name)=\((item.value ?? "").addingPercentEncoding(withAllowedCharacters: allowed) ?? "")"
        }.joined(separator: "&")
        return "\(components.scheme ?? "")://\(components.host ?? "")" + (query.isEmpty ? "" : "?\(query)")
    }
}
