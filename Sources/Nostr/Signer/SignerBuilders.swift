import Foundation

/// The client side of the codecs: building request URLs and reading the callbacks back.
/// Clients, tests and the NIP-07 shim use these; `parse(build(r)) == r` for every form.
extension SignerCodec {
    /// A request URL in `request.transport`'s form. DIP-05 and NIP-155 use `scheme`
    /// (`nostrsigner` by default); keyfob links use `https://<keyfobHost>/app/…`.
    public static func buildURL(_ r: SignerRequest, scheme: String = "nostrsigner", keyfobHost: String = "keyfob.example.com") -> String {
        var params: [(String, String)] = [("type", r.method.rawValue)]
        switch r.transport {
        case .dip05:
            if let peer = r.peer { params.append(("pubkey", peer.hex)) }
            if let returnType = r.returnType { params.append(("returnType", returnType)) }
            if r.compression == .gzip { params.append(("compressionType", "gzip")) }
            if let id = r.correlationID { params.append(("id", id)) }
            if let user = r.currentUser { params.append(("current_user", user)) }
            params.append(("callbackUrl", r.callbacks.success.string))
            return "\(scheme):\(percentEncode(r.content))?" + query(params)
        case .nip155:
            let payload = r.compression == .gzip && r.method != .getPublicKey ? gzipBase64(r.content) : r.content
            switch r.method {
            case .signEvent, .decryptZapEvent: params.append(("event", payload))
            case .nip04Encrypt, .nip44Encrypt: params.append(("plaintext", payload))
            case .nip04Decrypt, .nip44Decrypt: params.append(("encryptedText", payload))
            case .getPublicKey: break
            }
            if let peer = r.peer { params.append(("pubkey", peer.hex)) }
            if let user = r.currentUser { params.append(("current_user", user)) }
            if let id = r.correlationID { params.append(("id", id)) }
            if let returnType = r.returnType { params.append(("returnType", returnType)) }
            if r.compression == .gzip { params.append(("compressionType", "gzip")) }
            if let permissions = r.permissions { params.append(("permissions", permissions)) }
            params.append(("x-success", r.callbacks.success.string))
            if let error = r.callbacks.error { params.append(("x-error", error.string)) }
            if let cancel = r.callbacks.cancel { params.append(("x-cancel", cancel.string)) }
            if let name = r.clientName { params.append(("x-source", name)) }
            return "\(scheme)://\(r.method.rawValue)?" + query(params)
        case .keyfobLink:
            var link: [(String, String)] = []
            if r.method == .signEvent {
                let payload = Data(r.content.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                    .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
                link.append(("payload", payload))
            }
            link.append(("cb", r.callbacks.success.string))
            if let origin = r.clientName { link.append(("origin", origin)) }
            return "https://\(keyfobHost)/app/\(r.method == .signEvent ? "sign" : "pubkey")?" + query(link)
        }
    }

    /// What a callback URL says, read the way `request`'s transport wrote it.
    public struct CallbackResult: Sendable, Equatable {
        public var outcome: SignerOutcome
        /// NIP-155's echoed `id`.
        public var correlationID: String?
    }

    public static func parseCallback(_ url: String, for r: SignerRequest) throws(NostrError) -> CallbackResult {
        let (_, queryString) = splitQuery(url.split(separator: "#", maxSplits: 1).first.map(String.init) ?? url)
        let items = try queryItems(queryString)
        func value(_ name: String) -> String? { items.last { $0.0 == name }?.1 }
        let decode: (String) throws(NostrError) -> String = { text throws(NostrError) in
            r.compression == .gzip ? try gunzipBase64(text, prefix: r.transport == .dip05 ? "Signer1" : nil) : text
        }
        switch r.transport {
        case .dip05:
            if let error = value("error") {
                return CallbackResult(outcome: value("rejected") == "true" ? .rejected : .failure(code: error, message: ""), correlationID: nil)
            }
            guard let result = value("result") else { throw .content("callback has neither result nor error") }
            return CallbackResult(outcome: .success(result: result, event: try value("event").map(decode)), correlationID: nil)
        case .nip155:
            let id = value("id")
            if let code = value("code") {
                let outcome: SignerOutcome = code == "user_cancelled" ? .rejected : .failure(code: code, message: value("reason") ?? "")
                return CallbackResult(outcome: outcome, correlationID: id)
            }
            if r.method == .getPublicKey {
                guard let pubkey = value("pubkey") else { return CallbackResult(outcome: .rejected, correlationID: id) }
                return CallbackResult(outcome: .success(result: pubkey, event: nil), correlationID: id)
            }
            guard let result = value("result") else { return CallbackResult(outcome: .rejected, correlationID: id) }
            return CallbackResult(outcome: .success(result: try decode(result), event: try value("event").map(decode)), correlationID: id)
        case .keyfobLink:
            guard value("ok") == "1" else {
                let code = value("code") ?? "internal_error"
                return CallbackResult(
                    outcome: code == "user_rejected" ? .rejected : .failure(code: code, message: value("msg") ?? ""),
                    correlationID: nil)
            }
            if r.method == .getPublicKey {
                return CallbackResult(outcome: .success(result: value("pubkey") ?? "", event: nil), correlationID: nil)
            }
            return CallbackResult(outcome: .success(result: value("sig") ?? "", event: nil), correlationID: nil)
        }
    }

    private static func query(_ params: [(String, String)]) -> String {
        params.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
    }
}
