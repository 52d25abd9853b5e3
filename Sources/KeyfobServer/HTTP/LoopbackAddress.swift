import Hummingbird

/// Browsers refuse passkeys on a bare IP address ("invalid domain"). A browser that reaches a
/// localhost deployment as 127.0.0.1 gets a page linking to the same path on localhost instead.
struct LoopbackAddressMiddleware: RouterMiddleware {
    let rpID: String

    func handle(_ request: Request, context: KeyfobRequestContext,
                next: (Request, KeyfobRequestContext) async throws -> Response) async throws -> Response {
        guard rpID == "localhost", request.wantsHTML, let authority = request.head.authority else {
            return try await next(request, context)
        }
        let port: String
        if authority.hasPrefix("127.0.0.1") {
            port = String(authority.dropFirst("127.0.0.1".count))
        } else if authority.hasPrefix("[::1]") {
            port = String(authority.dropFirst("[::1]".count))
        } else {
            return try await next(request, context)
        }
        let target = "http://localhost\(port)\(request.head.path ?? "/")"
        return HTMLPage.problem(
            title: "Open Keyfob at localhost",
            message: "Browsers allow passkeys on http://localhost but never on a bare IP address like 127.0.0.1. Open \(target) instead.",
            back: target, status: .ok, link: .localhost)
    }
}
