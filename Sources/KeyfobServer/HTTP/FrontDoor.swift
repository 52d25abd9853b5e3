import Hummingbird

/// What every request goes through before its route, in one middleware: the loopback page, the
/// error replies, the files of `Public/` for paths no route has, the security headers, the
/// request's log line and metrics. One layer instead of six: each middleware is an async call of
/// its own around the rest, and six of them cost a trivial request a fifth of its time
/// (BENCHMARKS.md).
struct FrontDoorMiddleware: RouterMiddleware {
    let log: RequestLog?
    let rpID: String
    /// Asked only when no route answers (404), as Hummingbird's own layer would.
    let files: FileMiddleware<KeyfobRequestContext, LocalFileSystem>?
    /// Only for the load harness's measurements (`--bench-without headers`).
    var headers = true
    /// The router's routes by path, for a 405 where a path has routes but not this method.
    var routes: RouteMethods? = nil

    func handle(
        _ request: Request, context: KeyfobRequestContext,
        next: (Request, KeyfobRequestContext) async throws -> Response
    ) async throws -> Response {
        let start = ContinuousClock.now
        var context = context
        // Once a request: the log line, the rate limits and the audit all name this address.
        context.clientAddress = log?.addresses.resolve(request, peer: context.remoteAddress)
        var response: Response
        if let page = LoopbackAddress.page(for: request, rpID: rpID) {
            response = page
        } else {
            do {
                do {
                    response = try await next(request, context)
                } catch let error as HTTPResponseError where error.status == .notFound {
                    let allowed = routes?.allowed(for: request.uri.path) ?? []
                    if !allowed.isEmpty, !allowed.contains(request.method) {
                        let names = allowed.map(\.rawValue).joined(separator: ", ")
                        let refusal = KeyfobError(.invalidRequest, "this address answers \(names) only", status: .methodNotAllowed)
                        response = try ErrorReplies.response(to: refusal, request: request, context: context)
                        response.headers[.allow] = names
                    } else {
                        guard let files else { throw error }
                        response = try await files.handle(request, context: context) { _, _ in throw error }
                    }
                }
            } catch {
                response = try ErrorReplies.response(to: error, request: request, context: context)
            }
        }
        if headers { SecurityHeaders.apply(to: &response, path: request.uri.path) }
        log?.record(request, context: context, response: response, elapsed: ContinuousClock.now - start)
        return response
    }
}
