import Hummingbird

/// Browsers refuse passkeys on a bare IP address ("invalid domain"). A browser that reaches a
/// localhost deployment as 127.0.0.1 gets a page linking to the same path on localhost instead.
enum LoopbackAddress {
    /// The page for a browser on 127.0.0.1 or [::1] of a localhost deployment; nil for every other request.
    static func page(for request: Request, rpID: String) -> Response? {
        guard rpID == "localhost", let authority = request.head.authority,
            authority.hasPrefix("127.0.0.1") || authority.hasPrefix("[::1]"), request.wantsHTML
        else {
            return nil
        }
        let port = authority.dropFirst(authority.hasPrefix("127.0.0.1") ? "127.0.0.1".count : "[::1]".count)
        let target = "http://localhost\(port)\(request.head.path ?? "/")"
        return HTMLPage.problem(
            title: "Open Keyfob at localhost",
            message: "Browsers allow passkeys on http://localhost but never on a bare IP address like 127.0.0.1. Open \(target) instead.",
            back: target, status: .ok, link: .localhost)
    }
}
