import Foundation
import Hummingbird
import Logging

/// One structured log line per request: method, route (the pattern, never the raw path or
/// query, which may carry payloads), status, milliseconds, client IP.
struct RequestLogMiddleware: RouterMiddleware {
    let addresses: ClientAddress
    let logger: Logger
    let metrics: KeyfobMetrics

    func handle(_ request: Request, context: KeyfobRequestContext,
                next: (Request, KeyfobRequestContext) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let response = try await next(request, context)
        let elapsed = ContinuousClock.now - start
        // Tenths of a millisecond, formatted by hand (String(format:) showed in the profile).
        let tenths = elapsed.components.seconds * 10_000 + elapsed.components.attoseconds / 100_000_000_000_000
        metrics.request(method: request.method.rawValue, route: context.endpointPath ?? "static",
                        status: Int(response.status.code), duration: elapsed)
        logger.info("request", metadata: [
            "method": "\(request.method.rawValue)", "route": "\(context.endpointPath ?? "static")",
            "status": "\(response.status.code)", "ms": "\(tenths / 10).\(tenths % 10)",
            "ip": "\(addresses.resolve(request, peer: context.remoteAddress))",
            "request": "\(context.logger[metadataKey: "hb.request.id"]?.description ?? "-")",
        ])
        return response
    }
}
