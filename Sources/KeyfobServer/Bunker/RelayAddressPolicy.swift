import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Which relays a user may make Keyfob connect to (`nostrconnect://` URLs). Keyfob dials them from
/// inside the operator's network, so a relay URL is a request-forgery vector: it must be `wss://`
/// (`ws://` only when Keyfob itself runs on localhost), printable, and its host must resolve to
/// public addresses only — no loopback, private, link-local (cloud metadata), CGNAT, multicast or
/// reserved ones. Checked when the URL is pasted and again before every connection (a name may
/// be rebound to an inner address later). Relays the operator configures (`--relay`) are not
/// checked: the operator may run one on the private network on purpose.
struct RelayAddressPolicy: Sendable {
    /// Keyfob runs on localhost (development): `ws://` and loopback relays are allowed.
    var allowsLocal: Bool
    /// Host name → its addresses (nil: it does not resolve). Tests replace it.
    var resolve: @Sendable (String) async -> [IPAddress]? = { await IPAddress.resolve($0) }

    struct Refusal: Error, Equatable {
        let reason: String
    }

    static let maxLength = 256

    /// The URL's form: scheme, no control characters or spaces, no credentials, a host.
    func checkForm(_ text: String) throws(Refusal) -> (host: String, port: Int?) {
        guard text.utf8.count <= Self.maxLength else { throw Refusal(reason: "is longer than \(Self.maxLength) bytes") }
        guard !text.unicodeScalars.contains(where: { $0.value <= 0x20 || (0x7f...0x9f).contains($0.value) }) else {
            throw Refusal(reason: "contains spaces or control characters")
        }
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(),
            let host = url.host, !host.isEmpty
        else { throw Refusal(reason: "is not a ws:// or wss:// URL") }
        guard url.user == nil, url.password == nil else { throw Refusal(reason: "carries a user name or password") }
        switch scheme {
        case "wss": break
        case "ws" where allowsLocal: break
        case "ws": throw Refusal(reason: "is not encrypted: relays must be wss://")
        default: throw Refusal(reason: "is not a wss:// URL")
        }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return (bare, url.port)
    }

    /// The whole check: form, then every address the host resolves to. A name that does not
    /// resolve now passes (it reaches nothing; it is checked again before each connection) unless
    /// `mustResolve`.
    func check(_ text: String, mustResolve: Bool = false) async throws(Refusal) {
        let (host, _) = try checkForm(text)
        let addresses: [IPAddress]
        if let literal = IPAddress(host) {
            addresses = [literal]
        } else if host.lowercased() == "localhost" || host.lowercased().hasSuffix(".localhost") {
            addresses = [IPAddress("127.0.0.1")!]
        } else if let resolved = await resolve(host), !resolved.isEmpty {
            addresses = resolved
        } else {
            if mustResolve { throw Refusal(reason: "does not resolve") }
            return
        }
        for address in addresses where !isAllowed(address) {
            throw Refusal(reason: "points into a private network (\(address.kind.rawValue))")
        }
    }

    func isAllowed(_ address: IPAddress) -> Bool {
        switch address.kind {
        case .public: true
        case .loopback: allowsLocal
        default: false
        }
    }
}

/// An IPv4 or IPv6 address as bytes, with what kind of network it belongs to.
struct IPAddress: Sendable, Equatable, CustomStringConvertible {
    /// 4 or 16 bytes.
    let bytes: [UInt8]

    init?(_ text: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
        } else {
            return nil
        }
    }

    init(bytes: [UInt8]) { self.bytes = bytes }

    var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        var copy = bytes
        _ = inet_ntop(bytes.count == 4 ? AF_INET : AF_INET6, &copy, &buffer, socklen_t(buffer.count))
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    enum Kind: String { case `public`, loopback, `private`, linkLocal = "link-local", sharedAddressSpace = "CGNAT", multicast, reserved }

    var kind: Kind {
        if bytes.count == 4 { return Self.kind(v4: bytes) }
        let b = bytes
        // IPv4 inside IPv6 (mapped ::ffff:a.b.c.d, NAT64 64:ff9b::a.b.c.d, compatible ::a.b.c.d): the IPv4 address decides.
        if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xff && b[11] == 0xff { return Self.kind(v4: Array(b[12...])) }
        if b[0..<12] == [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0][...] { return Self.kind(v4: Array(b[12...])) }
        if b[0..<15].allSatisfy({ $0 == 0 }) { return b[15] == 1 ? .loopback : .reserved }  // ::1, ::
        if b[0..<12].allSatisfy({ $0 == 0 }) { return Self.kind(v4: Array(b[12...])) }
        // 6to4 (2002::/16) carries an IPv4 address in bytes 2–5.
        if b[0] == 0x20 && b[1] == 0x02 { return Self.kind(v4: Array(b[2..<6])) }
        if b[0] == 0xff { return .multicast }
        if b[0] & 0xfe == 0xfc { return .private }  // fc00::/7 (fd00:ec2::254 is AWS's metadata service)
        if b[0] == 0xfe && b[1] & 0xc0 == 0x80 { return .linkLocal }  // fe80::/10
        if b[0] == 0xfe && b[1] & 0xc0 == 0xc0 { return .private }  // fec0::/10, site-local (deprecated)
        if b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8 { return .reserved }  // 2001:db8::/32 documentation
        if b[0] & 0xe0 != 0x20 { return .reserved }  // outside 2000::/3, the global unicast space
        return .public
    }

    private static func kind(v4 b: [UInt8]) -> Kind {
        switch (b[0], b[1]) {
        case (127, _): .loopback
        case (10, _), (172, 16...31), (192, 168): .private
        case (169, 254): .linkLocal  // 169.254.169.254: cloud metadata
        case (100, 64...127): .sharedAddressSpace  // 100.100.100.200: Alibaba's metadata
        case (224...239, _): .multicast
        case (0, _), (240...255, _), (198, 18...19): .reserved
        case (192, 0) where b[2] == 0 || b[2] == 2: .reserved  // 192.0.0.0/24, 192.0.2.0/24
        case (198, 51) where b[2] == 100, (203, 0) where b[2] == 113: .reserved  // documentation
        default: .public
        }
    }

    /// Every address `host` resolves to (getaddrinfo, on a thread of its own: it blocks).
    static func resolve(_ host: String) async -> [IPAddress]? {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var hints = addrinfo()
                hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
                var list: UnsafeMutablePointer<addrinfo>?
                guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else {
                    continuation.resume(returning: nil)
                    return
                }
                defer { freeaddrinfo(first) }
                var found: [IPAddress] = []
                var next: UnsafeMutablePointer<addrinfo>? = first
                while let entry = next {
                    if let socket = entry.pointee.ai_addr {
                        if entry.pointee.ai_family == AF_INET {
                            socket.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                                var address = v4.pointee.sin_addr
                                found.append(IPAddress(bytes: withUnsafeBytes(of: &address) { Array($0) }))
                            }
                        } else if entry.pointee.ai_family == AF_INET6 {
                            socket.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                                var address = v6.pointee.sin6_addr
                                found.append(IPAddress(bytes: withUnsafeBytes(of: &address) { Array($0) }))
                            }
                        }
                    }
                    next = entry.pointee.ai_next
                }
                continuation.resume(returning: found)
            }
        }
    }
}
