import Hummingbird
import NIOCore

/// Hummingbird's request context plus the socket peer, so the client IP is known
/// (rate limits, the audit of who asked).
public struct KeyfobRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// Who a request comes from: the socket peer, or the `X-Forwarded-For` address a trusted
/// proxy added (the right-most address that is not itself a trusted proxy).
struct ClientAddress: Sendable {
    let trustedProxies: Set<String>

    func resolve(_ request: Request, peer: SocketAddress?) -> String {
        let socket = peer?.ipAddress ?? "unknown"
        guard trustedProxies.contains(socket) else { return socket }
        let forwarded = request.headers[values: .init("X-Forwarded-For")!]
            .flatMap { $0.split(separator: ",") }
            .map { $0.trimmingCharacters(in: .whitespaces) }
        // Walk from the nearest hop outwards: the first address no trusted proxy vouches for.
        for hop in forwarded.reversed() where !hop.isEmpty && !trustedProxies.contains(hop) {
            return hop.count <= 64 ? hop : socket
        }
        return socket
    }

    /// Whether the request reached the client over https: `X-Forwarded-Proto` from a trusted proxy.
    func isHTTPS(_ request: Request, peer: SocketAddress?) -> Bool {
        if request.uri.scheme == .https { return true }
        guard let socket = peer?.ipAddress, trustedProxies.contains(socket) else { return false }
        return request.headers[.init("X-Forwarded-Proto")!]?.lowercased() == "https"
    }
}
