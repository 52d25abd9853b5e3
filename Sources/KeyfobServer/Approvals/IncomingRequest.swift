import Foundation
import KeyfobCodecs
import Nostr

/// A redirect-flow request as it arrived (`/app/sign?…`, `/app/pubkey?…`, `/nostrsigner/<content>?…`),
/// decoded by the `Nostr` codecs and checked down to its payload, so nothing half-valid is stored.
struct IncomingRequest: Sendable {
    /// The raw request target (path and query), or a NIP-46 request's `nip46:` form, kept sealed
    /// with a pending request so any instance can decode it again when the user decides.
    let target: String
    /// Where the outcome goes.
    let reply: Reply
    let call: SignerCall
    /// Who asks: the callback's host or scheme; for NIP-07 flows the requesting page's origin;
    /// `nip46:<client pubkey>` for a bunker client.
    let client: String
    /// `redirect` (DIP-05, NIP-155, keyfob links), `nip07` (the callback is Keyfob's own page) or `nip46`.
    let transport: String

    enum Reply: Sendable {
        /// A redirect flow: the outcome goes to the request's callback URL, in its spec's form.
        case callback(SignerRequest)
        /// A NIP-46 request: the outcome is published to the client through the relays.
        case nip46(BunkerAddress)
    }

    /// A bunker client's request; its sealed form is the address's.
    static func nip46(_ address: BunkerAddress, call: SignerCall) -> IncomingRequest {
        IncomingRequest(
            target: address.sealedForm, reply: .nip46(address), call: call, client: address.clientIdentifier,
            transport: "nip46")
    }

    /// The request's spec (`dip05`, `nip155`, `keyfobLink`, `nip46`), for the approval page.
    var specName: String {
        switch reply {
        case .callback(let request): request.transport.rawValue
        case .nip46: "nip46"
        }
    }

    /// What the client calls itself (unverified).
    var clientName: String? {
        switch reply {
        case .callback(let request): request.clientName
        case .nip46(let address): address.name
        }
    }

    /// The account the client thinks it talks to, when it says.
    var currentUser: String? {
        if case .callback(let request) = reply { return request.currentUser }
        return nil
    }

    /// The payload as sent (plaintext, ciphertext or event JSON), which a confirmation commits to.
    var payload: String {
        switch reply {
        case .callback(let request): request.content
        case .nip46(let address): address.payload
        }
    }

    enum Failure: Error {
        /// Missing or dangerous callback: a page that says so, nothing else (no link, nothing stored).
        case badCallback(String)
        /// Anything else: a page with a "Back to <client>" link in the spec's own error form.
        case badRequest(code: ErrorCode, message: String, back: String?, client: String?)
    }

    /// Decodes `target`; `now` fills a missing `created_at`; `ownOrigins` recognise Keyfob's `/callback.html`.
    static func decode(_ target: String, now: Date, ownOrigins: [String]) throws(Failure) -> IncomingRequest {
        if target.hasPrefix(BunkerAddress.prefix) {
            guard let address = BunkerAddress(sealedForm: target), let call = try? address.call(now: now) else {
                throw .badRequest(code: .invalidRequest, message: "the stored NIP-46 request cannot be read", back: nil, client: nil)
            }
            return .nip46(address, call: call)
        }
        let (path, query) = split(target)
        let request: SignerRequest
        do {
            if path == "/app/sign" || path == "/app/pubkey" {
                request = try SignerCodec.parse(keyfobLinkAction: String(path.dropFirst("/app/".count)), query: query)
            } else if path == "/nostrsigner" || path.hasPrefix("/nostrsigner/") {
                request = try SignerCodec.parse(content: String(path.dropFirst("/nostrsigner".count).drop { $0 == "/" }), query: query)
            } else {
                throw NostrError(.unsupportedType, "not a signer request path")
            }
        } catch let error as NostrError {
            throw failure(ErrorCode(rawValue: error.code.rawValue) ?? .invalidRequest, error.message, path: path, query: query)
        } catch {
            throw failure(.invalidRequest, "the request could not be read", path: path, query: query)
        }

        // NIP-07: the result goes to Keyfob's own callback page, which posts it to the page whose
        // origin the callback names; that origin is the client, and the request must say the same.
        // Every callback into one of Keyfob's own hosts must be that page's one canonical form.
        var client = request.client
        var transport = "redirect"
        let keyfob = OwnCallback.Own(ownOrigins)
        let callbacks = [request.callbacks.success, request.callbacks.error, request.callbacks.cancel].compactMap { $0 }
        let own = callbacks.map(keyfob.contains)
        if own.contains(true) {
            guard own.allSatisfy({ $0 }) else {
                throw .badCallback("a request whose result goes to Keyfob's own page must send its errors and cancellations there too")
            }
            let parsed = callbacks.map { OwnCallback.parse($0, ownOrigins: ownOrigins) }
            guard let success = parsed[0], success.flag == nil,
                parsed.dropFirst().allSatisfy({ $0 != nil && $0!.pageOrigin == success.pageOrigin && $0!.rid == success.rid })
            else {
                throw .badCallback(
                    "a callback to Keyfob itself must be exactly \(ownOrigins.first ?? "")/callback.html?origin=<your page's origin>&rid=<id>")
            }
            let requestItems = FormURLEncoded.items(query) ?? []
            for claimed in requestItems where claimed.name == "origin" || claimed.name == "client_url" {
                guard claimed.value.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "/")) == success.pageOrigin else {
                    throw .badCallback("the request's origin and its callback's origin differ")
                }
            }
            guard let name = try? CallbackURL.clientIdentifier(ofOrigin: success.pageOrigin) else {
                throw .badCallback("the requesting page's origin is not a web origin")
            }
            client = name
            transport = "nip07"
        }

        let call: SignerCall
        do {
            call = try makeCall(request, now: now)
        } catch {
            let back = SignerCodec.callback(for: request, outcome: .failure(code: error.code.rawValue, message: error.message))
            throw .badRequest(code: error.code, message: error.message, back: back, client: client)
        }
        return IncomingRequest(target: target, reply: .callback(request), call: call, client: client, transport: transport)
    }

    /// The signer call a decoded request asks for, its payload checked.
    static func makeCall(_ r: SignerRequest, now: Date) throws(KeyfobError) -> SignerCall {
        switch r.method {
        case .getPublicKey:
            return .getPublicKey
        case .signEvent:
            let event = try KeyfobError.from { () throws(NostrError) in
                try UnsignedEvent.parse(json: Array(r.content.utf8), now: Int64(now.timeIntervalSince1970))
            }
            // Refused before the page, as content no signer signs (DIP-05's invalid_content): the
            // user is never asked, so nothing comes back as "rejected".
            guard !SignerCall.neverSignedKinds.contains(event.kind) else {
                throw KeyfobError(.invalidContent, "kind \(event.kind) is a direct-message rumor and must stay unsigned")
            }
            return .signEvent(event)
        case .nip04Encrypt, .nip44Encrypt, .nip04Decrypt, .nip44Decrypt:
            guard let peer = r.peer else { throw KeyfobError(.invalidPubkey, "the other party's pubkey is missing") }
            let cipher: SignerCall.Cipher = r.method == .nip04Encrypt || r.method == .nip04Decrypt ? .nip04 : .nip44
            return r.method == .nip04Encrypt || r.method == .nip44Encrypt
                ? .encrypt(cipher, plaintext: r.content, peer: peer) : .decrypt(cipher, ciphertext: r.content, peer: peer)
        case .decryptZapEvent:
            return .decryptZap(try KeyfobError.from { () throws(NostrError) in try Event.parse(json: Array(r.content.utf8)) })
        }
    }

    /// A failure before a request could be decoded: the back link is built from the callback
    /// parameter alone, and only if that callback is itself acceptable.
    static func failure(_ code: ErrorCode, _ message: String, path: String, query: String) -> Failure {
        let items = (try? queryItems(query)) ?? []
        func value(_ name: String) -> String? { items.first { $0.0 == name }?.1 }
        let keyfob = path.hasPrefix("/app/")
        let nip155 = value("x-success") != nil || value("x-error") != nil
        let raw = keyfob ? value("cb") : nip155 ? value("x-error") : value("callbackUrl")
        if code == .invalidCallback || (raw == nil && !nip155) {
            return .badCallback(message)
        }
        guard let raw, let callback = try? CallbackURL(raw) else {
            if nip155, let success = value("x-success"), (try? CallbackURL(success)) == nil { return .badCallback(message) }
            return .badRequest(code: code, message: message, back: nil, client: nil)
        }
        let back: String
        if keyfob {
            back = callback.appending([("ok", "0"), ("code", code.rawValue), ("msg", message)])
        } else if nip155 {
            var params = [("code", SignerCodec.nip155Code(code.rawValue)), ("reason", message)]
            if let id = value("id") { params.append(("id", id)) }
            back = callback.appending(params)
        } else {
            back = callback.appending([("error", SignerCodec.dip05Code(code.rawValue))])
        }
        return .badRequest(code: code, message: message, back: back, client: callback.clientIdentifier)
    }

    static func split(_ target: String) -> (String, String) {
        guard let q = target.firstIndex(of: "?") else { return (target, "") }
        return (String(target[..<q]), String(target[target.index(after: q)...]))
    }

    /// The pairs that decode (form rules), skipping the others: only for finding where to send a
    /// failure, whose callback is then checked like any other.
    static func queryItems(_ query: String) throws -> [(String, String)] {
        query.split(separator: "&").compactMap { part in FormURLEncoded.items(part)?.first.map { ($0.name, $0.value) } }
    }
}
