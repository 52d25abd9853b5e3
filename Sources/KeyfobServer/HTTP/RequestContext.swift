import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Hummingbird's request context plus the socket peer, so the client IP is known
/// (rate limits, the audit of who asked).
public struct KeyfobRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?
    /// The client's address as `ClientAddress.resolve` gives it, worked out once at the front door
    /// (nil before: then each user resolves it).
    var clientAddress: String?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// Who a request comes from: the socket peer, or the `X-Forwarded-For` address a trusted
/// proxy added (the right-most address that is not itself a trusted proxy).
struct ClientAddress: Sendable {
    let trustedProxies: Set<String>
    /// IPv6 clients are limited by this prefix (`--ipv6-prefix`, 64): one subscriber or one
    /// attacker gets a whole /64, so counting each of its 2^64 addresses apart means no limit.
    var ipv6Prefix = 64

    init(trustedProxies: Set<String>, ipv6Prefix: Int = 64) {
        self.trustedProxies = trustedProxies
        self.ipv6Prefix = ipv6Prefix
    }

    /// What per-address limits and caps count by: the address, or for IPv6 its prefix
    /// (`2001:db8:1:2::/64`).
    func limitKey(_ request: Request, peer: SocketAddress?) -> String {
        Self.limitKey(resolve(request, peer: peer), ipv6Prefix: ipv6Prefix)
    }

    static func limitKey(_ address: String, ipv6Prefix: Int) -> String {
        guard address.utf8.contains(UInt8(ascii: ":")) else { return address }
        var bytes = [UInt8](repeating: 0, count: 16)
        guard inet_pton(AF_INET6, address, &bytes) == 1 else { return address }
        // An IPv4 address written as IPv6 (::ffff:a.b.c.d) is that IPv4 address.
        if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
            return bytes[12..<16].map(String.init).joined(separator: ".")
        }
        let prefix = max(0, min(128, ipv6Prefix))
        for i in 0..<16 {
            let keep = max(0, min(8, prefix - i * 8))
            bytes[i] &= keep == 8 ? 0xff : UInt8(truncatingIfNeeded: 0xff << (8 - keep))
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, bytes, &text, socklen_t(text.count)) != nil else { return address }
        return String(cString: text) + "/\(prefix)"
    }

    /// `resolve`, once a request: the front door's answer when it has worked it out.
    func resolve(_ request: Request, context: KeyfobRequestContext) -> String {
        context.clientAddress ?? resolve(request, peer: context.remoteAddress)
    }

    func resolve(_ request: Request, peer: SocketAddress?) -> String {
        let socket = peer?.ipAddress ?? "unknown"
        guard trustedProxies.contains(socket) else { return socket }
        // Walk from the nearest hop outwards: the first address no trusted proxy vouches for.
        // (Split and trimmed by hand: Foundation's trimming showed in the profile of every request.)
        for value in request.headers[values: Self.forwardedFor].reversed() {
            for hop in value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false).reversed() {
                guard let first = hop.firstIndex(where: { !Self.isSpace($0) }), let last = hop.lastIndex(where: { !Self.isSpace($0) })
                else { continue }
                let text = String(Substring(hop[first...last]))
                if !trustedProxies.contains(text) { return Self.ipAddress(text) ?? socket }
            }
        }
        return socket
    }

    private static let forwardedFor = HTTPField.Name("X-Forwarded-For")!

    /// A forwarded hop as an address: as it is, or without the port some proxies append
    /// (`203.0.113.7:5123`, `[2001:db8::1]:443`); nil for anything else, which then counts as
    /// the proxy itself (per-client limits must not become per-connection ones).
    static func ipAddress(_ hop: String) -> String? {
        guard hop.utf8.count <= 64 else { return nil }
        var candidate = Substring(hop)
        if candidate.hasPrefix("["), let close = candidate.firstIndex(of: "]") {
            candidate = candidate[candidate.index(after: candidate.startIndex)..<close]
        } else if candidate.filter({ $0 == ":" }).count == 1, let colon = candidate.firstIndex(of: ":") {
            candidate = candidate[..<colon]
        }
        let text = String(candidate)
        var v4 = in_addr()
        var v6 = in6_addr()
        guard inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1 else { return nil }
        return text
    }

    /// HTTP's optional whitespace around a list element.
    private static func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }

    /// Whether the request reached the client over https: `X-Forwarded-Proto` from a trusted proxy.
    func isHTTPS(_ request: Request, peer: SocketAddress?) -> Bool {
        if request.uri.scheme == .https { return true }
        guard let socket = peer?.ipAddress, trustedProxies.contains(socket) else { return false }
        return request.headers[.init("X-Forwarded-Proto")!]?.lowercased() == "https"
    }
}
