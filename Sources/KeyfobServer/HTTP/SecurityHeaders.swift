import HTTPTypes
import Hummingbird

/// Headers every response carries: pages may load only Keyfob's own scripts and styles and may
/// not be framed (clickjacking an approval button); nothing is sniffed or leaks a Referer.
enum SecurityHeaders {
    static let fields: HTTPFields = [
        .contentSecurityPolicy: "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'",
        .xContentTypeOptions: "nosniff",
        .init("Referrer-Policy")!: "no-referrer",
        .init("X-Frame-Options")!: "DENY",
    ]

    /// Adds each field the response does not set itself. A scan of its few fields, not a lookup by
    /// name: that would build the fields' index for every response.
    static func apply(to response: inout Response, path: String) {
        for field in fields where !response.headers.contains(where: { $0.name == field.name }) {
            response.headers.append(field)
        }
        // The NIP-07 and polkadot-js shims are loaded by other sites' pages (DESIGN.md §4.5).
        if path == "/nip07.js" || path == "/polkadot.js" { response.headers[.accessControlAllowOrigin] = "*" }
    }
}
