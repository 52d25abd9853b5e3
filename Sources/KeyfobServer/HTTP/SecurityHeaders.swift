import HTTPTypes
import Hummingbird

/// Headers every response carries: pages may load only Keyfob's own scripts and styles and may
/// not be framed (clickjacking an approval button); nothing is sniffed or leaks a Referer.
struct SecurityHeadersMiddleware<Context: RequestContext>: RouterMiddleware {
    static var headers: HTTPFields {
        [
            .contentSecurityPolicy: "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'",
            .xContentTypeOptions: "nosniff",
            .init("Referrer-Policy")!: "no-referrer",
            .init("X-Frame-Options")!: "DENY",
        ]
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        for field in Self.headers where response.headers[field.name] == nil { response.headers.append(field) }
        // The NIP-07 shim is loaded by other sites' pages (DESIGN.md §4.5).
        if request.uri.path == "/nip07.js" { response.headers[.accessControlAllowOrigin] = "*" }
        return response
    }
}
