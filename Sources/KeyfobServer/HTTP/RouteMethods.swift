import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers

/// Which methods each route answers, for a request whose path has a route but not its method:
/// `405 Method Not Allowed` with `Allow`, as HTTP says (RFC 9110 §15.5.6), not a 404 that tells
/// a client the address is wrong. Filled once when the router is built; read only on that path.
final class RouteMethods: Sendable {
    private let table = NIOLockedValueBox<[(pattern: [Substring], methods: [HTTPRequest.Method])]>([])

    func set(_ routes: [(path: String, method: HTTPRequest.Method)]) {
        var byPath: [String: [HTTPRequest.Method]] = [:]
        for route in routes { byPath[route.path, default: []].append(route.method) }
        let table = byPath.map { (pattern: $0.key.split(separator: "/"), methods: $0.value.sorted { $0.rawValue < $1.rawValue }) }
        self.table.withLockedValue { $0 = table }
    }

    /// The methods the routes matching `path` answer; empty when no route has this path. A route
    /// written out in full wins over one with parameters, as in the router (`GET /api/signer/bunker`
    /// is not `POST /api/signer/{method}`).
    func allowed(for path: String) -> [HTTPRequest.Method] {
        let parts = path.split(separator: "/")
        let matching = table.withLockedValue { $0 }.filter { Self.matches($0.pattern, parts) }
        let literal = matching.filter { $0.pattern.allSatisfy { !$0.hasPrefix("{") && $0 != "**" } }
        var methods: [HTTPRequest.Method] = []
        for entry in literal.isEmpty ? matching : literal {
            for method in entry.methods where !methods.contains(method) { methods.append(method) }
        }
        return methods
    }

    /// A route's segments against a path's: `{name}` is any one segment, `**` the rest.
    static func matches(_ pattern: [Substring], _ parts: [Substring]) -> Bool {
        for (index, segment) in pattern.enumerated() {
            if segment == "**" { return index < parts.count }
            guard index < parts.count else { return false }
            if segment.hasPrefix("{") && segment.hasSuffix("}") { continue }
            if segment != parts[index] { return false }
        }
        return pattern.count == parts.count
    }
}
