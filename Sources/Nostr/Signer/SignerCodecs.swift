import Foundation
import KeyfobCodecs

/// Parsing the three request forms into `SignerRequest`, and writing callbacks back.
public enum SignerCodec {
    // MARK: - Parsing

    /// Parses a `nostrsigner:` URL: DIP-05 (`nostrsigner:<content>?type=…&callbackUrl=…`) or
    /// NIP-155 (`nostrsigner://<method>?type=…&x-success=…`). NIP-155 signers also answer an
    /// app-specific scheme (its Appendix B uses `nip55-ios-test://`), so any scheme is read the same way.
    public static func parse(nostrsignerURL url: String) throws(NostrError) -> SignerRequest {
        guard let colon = url.firstIndex(of: ":"), url.distance(from: url.startIndex, to: colon) >= 1,
            url[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || "+-.".contains($0) })
        else {
            throw .init(.invalidRequest, "not a signer URL (scheme:content?query)")
        }
        let rest = String(url[url.index(after: colon)...])
        let (path, query) = splitQuery(rest)
        return try parse(content: path, query: query)
    }

    /// Parses a request given its content part (percent-encoded, may be empty) and query string,
    /// as the server receives `/nostrsigner/<content>?<query>`.
    public static func parse(content rawContent: String, query: String) throws(NostrError) -> SignerRequest {
        let items = try queryItems(query)
        func value(_ name: String) -> String? { items.first { $0.0 == name }?.1 }

        guard let type = value("type") else { throw .init(.invalidRequest, "the request has no type") }
        guard let method = SignerMethod(rawValue: type) else { throw .init(.unsupportedType, "method \"\(type)\" is not supported") }
        let compression = try compressionType(value("compressionType"))

        if let success = value("x-success") {
            // NIP-155: payload in event / plaintext / encryptedText; gzip applies to it too.
            var payload: String? =
                switch method {
                case .signEvent, .decryptZapEvent: value("event")
                case .nip04Encrypt, .nip44Encrypt: value("plaintext")
                case .nip04Decrypt, .nip44Decrypt: value("encryptedText") ?? value("ciphertext")
                case .getPublicKey: ""
                }
            // The draft's own form names the method where DIP-05 puts content
            // (`nostrsigner://nip04_decrypt?type=nip04_decrypt&…`, served as
            // `/nostrsigner/nip04_decrypt?…`): that is not a payload.
            let named = rawContent == type || rawContent == "//" + type
            if payload == nil, !rawContent.isEmpty, !rawContent.hasPrefix("//"), !named { payload = rawContent.removingPercentEncoding }
            guard var content = payload else { throw .content("the request carries no \(method.rawValue) payload") }
            if method == .nip04Decrypt || method == .nip44Decrypt, content.isEmpty {
                throw .content("the request carries no ciphertext to decrypt (encryptedText is empty)")
            }
            if compression == .gzip && method != .getPublicKey { content = try gunzipBase64(content, prefix: nil) }
            return SignerRequest(
                transport: .nip155, method: method, content: content, peer: try peer(method, value("pubkey")),
                correlationID: value("id"), returnType: value("returnType"), compression: compression,
                callbacks: Callbacks(
                    success: try CallbackURL(success), error: try value("x-error").map(CallbackURL.init),
                    cancel: try value("x-cancel").map(CallbackURL.init)),
                currentUser: value("current_user"), clientName: value("x-source"), permissions: value("permissions"))
        }

        // DIP-05: callbackUrl is required on iOS (no clipboard between apps).
        guard let callback = value("callbackUrl") else {
            throw .init(.invalidCallback, "callbackUrl is required (there is no clipboard fallback)")
        }
        let callbackURL = try CallbackURL(callback)
        var content = rawContent
        if content.hasPrefix("//") { content = "" }  // nostrsigner://?… carries no content
        guard let decoded = content.removingPercentEncoding else { throw .content("content is not valid percent-encoding") }
        if method == .signEvent || method == .decryptZapEvent, decoded.isEmpty {
            throw .content("the request carries no event")
        }
        return SignerRequest(
            transport: .dip05, method: method, content: decoded, peer: try peer(method, value("pubkey")),
            correlationID: value("id"), returnType: value("returnType"), compression: compression,
            callbacks: Callbacks(success: callbackURL, error: nil, cancel: nil),
            currentUser: value("current_user"), clientName: nil, permissions: nil)
    }

    /// Parses a keyfob universal link: `/app/sign?payload=<base64url event>&cb=…&origin=…`
    /// or `/app/pubkey?cb=…&origin=…` (also as `keyfob://sign?…`).
    public static func parse(keyfobLinkAction action: String, query: String) throws(NostrError) -> SignerRequest {
        let items = try queryItems(query)
        func value(_ name: String) -> String? { items.first { $0.0 == name }?.1 }
        guard let cb = value("cb") else { throw .init(.invalidCallback, "cb (the callback URL) is required") }
        let callback = try CallbackURL(cb)
        switch action {
        case "sign":
            guard let payload = value("payload"), let bytes = Base64URL.decode(payload) else {
                throw .content("payload must be a base64url-encoded event")
            }
            guard bytes.count <= SignerRequest.maxContentLength else { throw .init(.payloadTooLarge, "payload is too large") }
            guard let json = String(validating: bytes, as: UTF8.self) else { throw .content("payload is not UTF-8 JSON") }
            return SignerRequest(
                transport: .keyfobLink, method: .signEvent, content: json, peer: nil, correlationID: nil,
                returnType: "event", compression: .none, callbacks: Callbacks(success: callback),
                currentUser: nil, clientName: value("origin"), permissions: nil)
        case "pubkey":
            return SignerRequest(
                transport: .keyfobLink, method: .getPublicKey, content: "", peer: nil, correlationID: nil,
                returnType: nil, compression: .none, callbacks: Callbacks(success: callback),
                currentUser: nil, clientName: value("origin"), permissions: nil)
        default:
            throw .init(.unsupportedType, "keyfob link action \"\(action)\" is not supported")
        }
    }

    /// `keyfob://sign?…` or `https://host/app/sign?…`.
    public static func parse(keyfobURL url: String) throws(NostrError) -> SignerRequest {
        guard let components = URLComponents(string: url) else { throw .init(.invalidRequest, "not a URL") }
        let action: String
        if components.scheme == "keyfob" {
            action = components.host ?? ""
        } else {
            guard components.path.hasPrefix("/app/") else { throw .init(.invalidRequest, "not a keyfob link") }
            action = String(components.path.dropFirst("/app/".count))
        }
        return try parse(keyfobLinkAction: action, query: components.percentEncodedQuery ?? "")
    }

    // MARK: - Callbacks

    /// The URL to open with the outcome, or nil where the spec allows no callback
    /// (NIP-155 error or cancel without `x-error`/`x-cancel`).
    public static func callback(for request: SignerRequest, outcome: SignerOutcome, signerPackage: String = "keyfob") -> String? {
        switch request.transport {
        case .dip05: return dip05Callback(request, outcome)
        case .nip155: return nip155Callback(request, outcome, signerPackage)
        case .keyfobLink: return keyfobCallback(request, outcome)
        }
    }

    static func dip05Callback(_ r: SignerRequest, _ outcome: SignerOutcome) -> String {
        switch outcome {
        case let .success(result, event):
            // NIP-55's web form: a callback ending in `=` gets the value itself (the signed event
            // when `returnType=event`, else the result), not named parameters.
            if r.callbacks.success.expectsValue {
                let value = r.returnType == "event" ? event ?? result : result
                return r.callbacks.success.appendingValue(r.compression == .gzip ? "Signer1" + gzipBase64(value) : value)
            }
            var params = [("result", result)]
            if r.returnType == "event", let event {
                params.append(("event", r.compression == .gzip ? "Signer1" + gzipBase64(event) : event))
            }
            return r.callbacks.success.appending(params)
        case .rejected:
            return r.callbacks.success.appending([("error", "user_rejected"), ("rejected", "true")])
        case let .failure(code, _):
            return r.callbacks.success.appending([("error", dip05Code(code))])
        }
    }

    /// DESIGN.md §7 codes onto DIP-05's six; others fold into the nearest.
    public static func dip05Code(_ code: String) -> String {
        switch code {
        case "user_rejected", "invalid_content", "invalid_callback", "unsupported_type", "invalid_pubkey", "internal_error":
            return code
        case "decrypt_failed", "payload_too_large", "invalid_request": return "invalid_content"
        case "permission_denied", "signer_locked", "unauthorized", "rate_limited": return "user_rejected"
        default: return "internal_error"
        }
    }

    static func nip155Callback(_ r: SignerRequest, _ outcome: SignerOutcome, _ package: String) -> String? {
        var echo: [(String, String)] = []
        if let id = r.correlationID { echo.append(("id", id)) }
        switch outcome {
        case let .success(result, event):
            var params = echo
            let encode: (String) -> String = { r.compression == .gzip ? gzipBase64($0) : $0 }
            if r.method == .getPublicKey {
                params += [("pubkey", result), ("package", package)]
            } else if r.returnType == "event", let event {
                params += [("result", encode(result)), ("event", encode(event))]
            } else {
                params.append(("result", encode(r.method == .decryptZapEvent ? (event ?? result) : result)))
            }
            return r.callbacks.success.appending(params)
        case .rejected:
            if let cancel = r.callbacks.cancel { return cancel.appending(echo) }
            return r.callbacks.error?.appending([("code", "user_cancelled"), ("reason", "the user declined")] + echo)
        case let .failure(code, message):
            return r.callbacks.error?.appending([("code", nip155Code(code)), ("reason", message)] + echo)
        }
    }

    /// DESIGN.md §7 codes onto NIP-155 §7's.
    public static func nip155Code(_ code: String) -> String {
        switch code {
        case "user_rejected": return "user_cancelled"
        case "permission_denied": return "permission_denied"
        case "unsupported_type": return "unsupported_method"
        case "payload_too_large": return "payload_too_large"
        case "rate_limited": return "rate_limited"
        case "signer_locked", "unauthorized": return "not_logged_in"
        case "internal_error", "store_unavailable": return "internal_error"
        default: return "invalid_request"
        }
    }

    static func keyfobCallback(_ r: SignerRequest, _ outcome: SignerOutcome) -> String {
        switch outcome {
        case let .success(result, event):
            if r.method == .getPublicKey { return r.callbacks.success.appending([("ok", "1"), ("pubkey", result)]) }
            var params: [(String, String)] = [("ok", "1")]
            if let event, let object = try? JSONSerialization.jsonObject(with: Data(event.utf8)) as? [String: Any] {
                params += [("id", object["id"] as? String ?? ""), ("sig", result), ("pubkey", object["pubkey"] as? String ?? "")]
            } else {
                params.append(("sig", result))
            }
            return r.callbacks.success.appending(params)
        case .rejected:
            return r.callbacks.success.appending([("ok", "0"), ("code", "user_rejected"), ("msg", "The request was rejected")])
        case let .failure(code, message):
            return r.callbacks.success.appending([("ok", "0"), ("code", code), ("msg", message)])
        }
    }

    // MARK: - Helpers

    static func peer(_ method: SignerMethod, _ hex: String?) throws(NostrError) -> PublicKey? {
        guard method.needsPeer else { return nil }
        guard let hex else { throw .init(.invalidPubkey, "\(method.rawValue) needs the other party's pubkey") }
        return try PublicKey(hex: hex)
    }

    static func compressionType(_ value: String?) throws(NostrError) -> SignerRequest.Compression {
        guard let value, !value.isEmpty else { return .none }
        guard let c = SignerRequest.Compression(rawValue: value) else { throw .content("compressionType must be none or gzip") }
        return c
    }

    static func splitQuery(_ s: String) -> (String, String) {
        guard let q = s.firstIndex(of: "?") else { return (s, "") }
        return (String(s[..<q]), String(s[s.index(after: q)...]))
    }

    /// `name=value&…` as `FormURLEncoded` reads it (`+` is a space: NIP-155 and DIP-05 clients
    /// build their queries with `URLSearchParams` and its kin).
    static func queryItems(_ query: String) throws(NostrError) -> [(String, String)] {
        guard query.utf8.count <= 512 * 1024 else { throw .init(.payloadTooLarge, "request URL is too long") }
        guard let items = FormURLEncoded.items(query) else {
            throw .init(.invalidRequest, "the query is not valid percent-encoding")
        }
        return items.map { ($0.name, $0.value) }
    }

    /// base64(gzip(text)).
    public static func gzipBase64(_ text: String) -> String {
        Data(Gzip.compress(Array(text.utf8)) ?? []).base64EncodedString()
    }

    /// Decodes base64(gzip(text)), with an optional prefix such as DIP-05's "Signer1".
    public static func gunzipBase64(_ text: String, prefix: String?) throws(NostrError) -> String {
        var body = Substring(text)
        if let prefix {
            guard body.hasPrefix(prefix) else { throw .content("payload does not start with \(prefix)") }
            body = body.dropFirst(prefix.count)
        }
        guard let data = Data(base64Encoded: String(body)),
            let bytes = Gzip.decompress([UInt8](data), limit: SignerRequest.maxContentLength),
            let string = String(validating: bytes, as: UTF8.self)
        else {
            throw .content("payload is not base64 gzip of UTF-8 text (or inflates past \(SignerRequest.maxContentLength) bytes)")
        }
        return string
    }

}

extension Callbacks {
    init(success: CallbackURL) { self.init(success: success, error: nil, cancel: nil) }
}
