import Foundation
import KeyfobCodecs
import Nostr

/// Keyfob's own NIP-07 callback page, `/callback.html`, as a redirect flow's callback. The page
/// posts the result to the requesting page's origin, so who receives a result is decided by how
/// that origin is read — and a browser's `URLSearchParams` and the server must never read it
/// differently (a duplicate `origin`, one that does not percent-decode, a name spelled
/// `ori%67in`). So one form only is accepted, and the server is the only one that reads it:
///
///     <own origin>/callback.html?origin=<canonical origin>&rid=<id>[&failed=1 | &cancelled=1]
///
/// each parameter once, in that order, each decodable, nothing else; and the page is rendered by
/// the server with the origin it read (`callbackPage`), `callback.js` taking it from there.
/// Any other URL on one of Keyfob's own hosts — any scheme, port, case or trailing dot — is
/// refused as a callback: it would make Keyfob a relay for whatever page it serves.
struct OwnCallback: Equatable {
    /// The requesting page's origin, canonical (`https://host[:port]`, lowercase, no default port).
    let pageOrigin: String
    /// The request id the page's `nip07.js` matches answers with.
    let rid: String
    /// `failed` or `cancelled` for NIP-155's error and cancel callbacks.
    let flag: String?

    /// Where Keyfob answers, from its origins: on a public deployment, its hosts on any port and
    /// scheme; on `localhost` (development, where other local apps are clients too), the loopback
    /// hosts on Keyfob's own ports, and any loopback URL whose path is `/callback.html`.
    struct Own: Sendable {
        let hosts: Set<String>
        /// Local deployments only: Keyfob's ports.
        let localPorts: Set<Int>?

        init(_ ownOrigins: [String]) {
            let urls = ownOrigins.compactMap { try? CallbackURL($0) }
            var hosts = Set(urls.compactMap { $0.host.map(OwnCallback.normalizedHost) })
            if hosts.contains(where: { $0 == "localhost" || $0.hasSuffix(".localhost") }) {
                hosts.formUnion(["localhost", "127.0.0.1", "::1"])
                localPorts = Set(urls.map(OwnCallback.effectivePort))
            } else {
                localPorts = nil
            }
            self.hosts = hosts
        }

        /// Whether `url` points at Keyfob, whatever its scheme, case or trailing dot.
        func contains(_ url: CallbackURL) -> Bool {
            guard let host = url.host, hosts.contains(OwnCallback.normalizedHost(host)) else { return false }
            guard let localPorts else { return true }
            let path = (URLComponents(string: url.string)?.percentEncodedPath ?? "").lowercased()
            return localPorts.contains(OwnCallback.effectivePort(url)) || path.hasSuffix("/callback.html")
        }
    }

    static func effectivePort(_ url: CallbackURL) -> Int {
        url.port ?? (url.scheme == "https" ? 443 : 80)
    }

    /// A host as compared: lowercase, without brackets or trailing dots (`LOCALHOST.` is `localhost`).
    static func normalizedHost(_ host: String) -> String {
        var h = host.lowercased()
        if h.hasPrefix("["), h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        while h.hasSuffix(".") { h.removeLast() }
        return h
    }

    /// The canonical callback `url` is, or nil (then it must be refused).
    static func parse(_ url: CallbackURL, ownOrigins: [String]) -> OwnCallback? {
        guard let origin = url.origin, ownOrigins.contains(origin),
            let components = URLComponents(string: url.string), components.percentEncodedPath == "/callback.html",
            components.percentEncodedFragment == nil, let query = components.percentEncodedQuery,
            let items = FormURLEncoded.items(query), items.count == 2 || items.count == 3,
            items[0].name == "origin", let pageOrigin = canonicalOrigin(items[0].value),
            items[1].name == "rid", isRequestID(items[1].value)
        else { return nil }
        var flag: String?
        if items.count == 3 {
            guard ["failed", "cancelled"].contains(items[2].name), items[2].value == "1" else { return nil }
            flag = items[2].name
        }
        return OwnCallback(pageOrigin: pageOrigin, rid: items[1].value, flag: flag)
    }

    /// The origin `/callback.html` may post to, read from its whole query (the callback's own
    /// parameters and the result Keyfob appended): exactly one `origin`, canonical; nil otherwise.
    static func pageOrigin(ofQuery query: String) -> String? {
        guard let items = FormURLEncoded.items(query) else { return nil }
        let origins = items.filter { $0.name == "origin" }
        guard origins.count == 1, items.filter({ $0.name == "rid" }).count == 1 else { return nil }
        return canonicalOrigin(origins[0].value)
    }

    /// `value` if it is an http(s) origin written exactly as a browser writes `location.origin`.
    static func canonicalOrigin(_ value: String) -> String? {
        guard let url = try? CallbackURL(value), let origin = url.origin, origin == value else { return nil }
        return origin
    }

    static func isRequestID(_ value: String) -> Bool {
        (1...64).contains(value.utf8.count)
            && value.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "-" || $0 == "_") }
    }
}
