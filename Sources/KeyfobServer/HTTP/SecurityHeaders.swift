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

    /// Adds each field the response does not set itself. One pass over its fields: a lookup by
    /// name would build the fields' index for every response.
    static func apply(to response: inout Response, path: String) {
        var present = (csp: false, nosniff: false, referrer: false, frame: false)
        for field in response.headers {
            switch field.name {
            case .contentSecurityPolicy: present.csp = true
            case .xContentTypeOptions: present.nosniff = true
            case referrerPolicy: present.referrer = true
            case frameOptions: present.frame = true
            default: break
            }
        }
        let missing = [!present.csp, !present.nosniff, !present.referrer, !present.frame]
        for (field, add) in zip(fields, missing) where add { response.headers.append(field) }
        // The NIP-07 shim is loaded by other sites' pages (DESIGN.md §4.5).
        if path == "/nip07.js" { response.headers[.accessControlAllowOrigin] = "*" }
    }

    private static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    private static let frameOptions = HTTPField.Name("X-Frame-Options")!
}
