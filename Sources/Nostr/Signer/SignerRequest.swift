import Foundation

/// The NIP-55 methods every transport carries.
public enum SignerMethod: String, Sendable, CaseIterable {
    case getPublicKey = "get_public_key"
    case signEvent = "sign_event"
    case nip04Encrypt = "nip04_encrypt"
    case nip04Decrypt = "nip04_decrypt"
    case nip44Encrypt = "nip44_encrypt"
    case nip44Decrypt = "nip44_decrypt"
    case decryptZapEvent = "decrypt_zap_event"

    /// Methods that need a peer public key.
    public var needsPeer: Bool { [.nip04Encrypt, .nip04Decrypt, .nip44Encrypt, .nip44Decrypt].contains(self) }
}

/// One signer request, whichever wire form it arrived in (DIP-05, NIP-155 or a keyfob
/// universal link), so the server has one dispatcher and one approval page.
public struct SignerRequest: Sendable, Equatable {
    public enum Transport: String, Sendable { case dip05, nip155, keyfobLink }
    public enum Compression: String, Sendable { case none, gzip }

    public var transport: Transport
    public var method: SignerMethod
    /// The payload, decoded: event JSON for sign_event and decrypt_zap_event, else plaintext or ciphertext.
    public var content: String
    /// The other party for encrypt/decrypt.
    public var peer: PublicKey?
    /// NIP-155 correlator, echoed in every callback.
    public var correlationID: String?
    /// `signature`, `event`, `ciphertext`, `plaintext` (DIP-05/NIP-155 `returnType`).
    public var returnType: String?
    public var compression: Compression
    public var callbacks: Callbacks
    /// The client's pubkey for the user, when it says (`current_user`).
    public var currentUser: String?
    /// What the client calls itself (`x-source`, keyfob `origin`), for display only.
    public var clientName: String?
    /// NIP-155 `get_public_key` permissions hint, raw JSON.
    public var permissions: String?

    /// Who is asking, for permissions: the callback's host, else its scheme, else "unknown".
    public var client: String { callbacks.success.clientIdentifier }

    /// The largest payload a request may carry after decompression.
    public static let maxContentLength = 256 * 1024

    /// A request as a client builds it (then `SignerCodec.buildURL`).
    public init(
        transport: Transport, method: SignerMethod, content: String, peer: PublicKey?, correlationID: String?,
        returnType: String?, compression: Compression, callbacks: Callbacks, currentUser: String?,
        clientName: String?, permissions: String?
    ) {
        self.transport = transport
        self.method = method
        self.content = content
        self.peer = peer
        self.correlationID = correlationID
        self.returnType = returnType
        self.compression = compression
        self.callbacks = callbacks
        self.currentUser = currentUser
        self.clientName = clientName
        self.permissions = permissions
    }
}

/// Where results go. `success` is required; error and cancel fall back as each spec says.
public struct Callbacks: Sendable, Equatable {
    public var success: CallbackURL
    public var error: CallbackURL?
    public var cancel: CallbackURL?

    public init(success: CallbackURL, error: CallbackURL? = nil, cancel: CallbackURL? = nil) {
        self.success = success
        self.error = error
        self.cancel = cancel
    }
}

/// A validated callback URL: absolute, with a scheme that cannot run code or re-enter the signer.
public struct CallbackURL: Sendable, Equatable, CustomStringConvertible {
    /// The URL to open. For web callbacks this is rebuilt from the parsed parts, never the raw string.
    public let string: String
    public let scheme: String
    public let host: String?
    /// Web callbacks: the explicit port, when not the scheme's default.
    public let port: Int?

    /// Schemes refused before anything is shown (DESIGN.md §4, DIP-05 security considerations):
    /// script and local schemes, signers' own (`nostrsigner:`, `keyfob:`: a callback must not open
    /// a signer), Android's `intent:` / `android-app:`, which can start any app's component, and
    /// browser extensions' pages (`chrome-extension:`…): Keyfob's own extension reads its answers
    /// from Keyfob's `/callback.html`, so no extension is ever an app's return address.
    public static let refusedSchemes: Set<String> = [
        "javascript", "data", "file", "about", "blob", "vbscript", "nostrsigner",
        "keyfob", "intent", "android-app", "chrome-extension", "moz-extension", "safari-web-extension",
    ]

    public init(_ raw: String) throws(NostrError) {
        guard !raw.isEmpty, raw.utf8.count <= 2048 else { throw .init(.invalidCallback, "callback URL is missing or too long") }
        // Control characters and spaces can hide a scheme from naive checks (" javascript:").
        guard !raw.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7f }) else {
            throw .init(.invalidCallback, "callback URL contains spaces or control characters")
        }
        guard let colon = raw.firstIndex(of: ":") else { throw .init(.invalidCallback, "callback URL has no scheme") }
        let scheme = raw[..<colon].lowercased()
        let allowed = CharacterSet.lowercaseLetters.union(.decimalDigits).union(CharacterSet(charactersIn: "+-."))
        guard let first = scheme.unicodeScalars.first, CharacterSet.lowercaseLetters.contains(first),
            scheme.unicodeScalars.allSatisfy({ allowed.contains($0) && $0.isASCII })
        else {
            throw .init(.invalidCallback, "callback URL scheme is not valid")
        }
        guard !Self.refusedSchemes.contains(scheme) else {
            throw .init(.invalidCallback, "callback scheme \"\(scheme):\" is not allowed")
        }
        // Browsers (WHATWG URL) read "\" as "/" in web URLs: "https://evil.example\@trusted.example/cb"
        // goes to evil.example, while RFC 3986 parsers see trusted.example. No reading may differ.
        guard !raw.contains("\\") else { throw .init(.invalidCallback, "callback URL contains a backslash") }
        guard let components = URLComponents(string: raw) else { throw .init(.invalidCallback, "callback is not a URL") }
        self.scheme = scheme
        if scheme == "http" || scheme == "https" {
            guard raw.dropFirst(scheme.count + 1).hasPrefix("//") else {
                throw .init(.invalidCallback, "web callback must be scheme://host/…")
            }
            guard components.user == nil, components.password == nil,
                !(components.percentEncodedHost ?? "").contains("@")
            else {
                throw .init(.invalidCallback, "web callback must not carry a user name or password (user@host)")
            }
            guard let rawHost = components.host, !rawHost.isEmpty,
                rawHost.unicodeScalars.allSatisfy({
                    $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-.[]:".unicodeScalars.contains($0))
                })
            else {
                throw .init(.invalidCallback, "web callback needs a plain host name (ASCII letters, digits, - and .)")
            }
            let host = rawHost.lowercased()
            let defaultPort = scheme == "https" ? 443 : 80
            let port = components.port.flatMap { $0 == defaultPort ? nil : $0 }
            if let p = components.port, !(1...65535).contains(p) { throw .init(.invalidCallback, "web callback port is out of range") }
            self.host = host
            self.port = port
            // Rebuilt from the parts this parser saw, so what is redirected to is what was named.
            var rebuilt = "\(scheme)://\(host)" + (port.map { ":\($0)" } ?? "")
            rebuilt += components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
            if let query = components.percentEncodedQuery { rebuilt += "?" + query }
            if let fragment = components.percentEncodedFragment { rebuilt += "#" + fragment }
            string = rebuilt
        } else {
            host = components.host.flatMap { $0.isEmpty ? nil : $0.lowercased() }
            port = nil
            string = raw
        }
    }

    /// The web origin of an http(s) callback, as a browser writes it (`https://host[:port]`).
    public var origin: String? {
        guard scheme == "http" || scheme == "https", let host else { return nil }
        return "\(scheme)://\(host)" + (port.map { ":\($0)" } ?? "")
    }

    public var description: String { string }

    /// Who the client is, for permissions. DIP-05's rule says "host, else scheme, else unknown", but its
    /// own example names `primal` for `primal://nostrsigner`, whose URL host is `nostrsigner`. Taking the
    /// host of an app scheme would let `evil://nostrsigner` share `primal://nostrsigner`'s grants, so:
    /// web callbacks are named by host, app callbacks by scheme (as the example shows), else "unknown".
    /// A web callback's client is its origin: `https` on the default port is written as the bare
    /// host (`client.example`); any other origin is written so that it never equals an `https`
    /// client's name (`http://client.example`, `client.example:8443`).
    public var clientIdentifier: String {
        if scheme == "http" || scheme == "https" {
            guard let host else { return "unknown" }
            if scheme == "https" { return host + (port.map { ":\($0)" } ?? "") }
            return "http://\(host)" + (port.map { ":\($0)" } ?? "")
        }
        return scheme.isEmpty ? (host ?? "unknown") : scheme
    }

    /// The client name a web origin gets (same rules as `clientIdentifier`), for NIP-07 flows
    /// whose callback is Keyfob's own page and whose client is the requesting page's origin.
    public static func clientIdentifier(ofOrigin origin: String) throws(NostrError) -> String {
        let url = try CallbackURL(origin)
        guard let canonical = url.origin, canonical == origin.lowercased() || canonical + "/" == origin.lowercased() else {
            throw .init(.invalidCallback, "origin must be a web origin like https://client.example")
        }
        return url.clientIdentifier
    }

    /// Whether the URL ends in `=` (before any fragment), as NIP-55's web example
    /// `callbackUrl=https://example.com/?event=` does: the result is appended as that value.
    public var expectsValue: Bool {
        (string.firstIndex(of: "#").map { string[..<$0] } ?? string[...]).hasSuffix("=")
    }

    /// The URL with `value` (percent-encoded) appended where it ends in `=`, before any fragment.
    public func appendingValue(_ value: String) -> String {
        guard let hash = string.firstIndex(of: "#") else { return string + percentEncode(value) }
        return String(string[..<hash]) + percentEncode(value) + String(string[hash...])
    }

    /// The URL with `parameters` appended: `?` when it has no query yet, `&` otherwise,
    /// before any fragment. Values are percent-encoded (RFC 3986 unreserved kept).
    public func appending(_ parameters: [(String, String)]) -> String {
        var base = string
        var fragment = ""
        if let hash = base.firstIndex(of: "#") {
            fragment = String(base[hash...])
            base = String(base[..<hash])
        }
        let query = parameters.map { "\(percentEncode($0.0))=\(percentEncode($0.1))" }.joined(separator: "&")
        let separator = base.contains("?") ? (base.hasSuffix("?") || base.hasSuffix("&") ? "" : "&") : "?"
        return base + separator + query + fragment
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
public func percentEncode(_ s: String) -> String {
    var out = ""
    for byte in s.utf8 {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            out.unicodeScalars.append(Unicode.Scalar(byte))
        default:
            out += String(format: "%%%02X", byte)
        }
    }
    return out
}

/// The outcome of a request, to be written back to the client.
public enum SignerOutcome: Sendable, Equatable {
    /// `result` is the method's result; `event` the signed or decrypted event JSON when there is one.
    case success(result: String, event: String?)
    /// The user said no.
    case rejected
    /// Something failed; `code` is a DESIGN.md §7 code, each transport maps it onto its own.
    case failure(code: String, message: String)
}
