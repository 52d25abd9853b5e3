import Foundation
import Hummingbird
import Logging

/// One structured log line per request: method, route (the pattern, never the raw path or
/// query, which may carry payloads), status, milliseconds, client IP.
struct RequestLog: Sendable {
    let addresses: ClientAddress
    let logger: Logger
    let metrics: KeyfobMetrics?
    /// The process's own line handler, when it is the logger's: the line is then written straight
    /// into its buffer, the same text without a metadata dictionary per request (BENCHMARKS.md).
    private let lines: LineLogHandler?

    init(addresses: ClientAddress, logger: Logger, metrics: KeyfobMetrics?) {
        self.addresses = addresses
        self.logger = logger
        self.metrics = metrics
        lines = LineLogHandler.direct(for: logger)
    }

    /// The line and the metrics for one answered request, `elapsed` after it came in.
    func record(_ request: Request, context: KeyfobRequestContext, response: Response, elapsed: Duration) {
        // Tenths of a millisecond, formatted by hand (String(format:) showed in the profile).
        let tenths = elapsed.components.seconds * 10_000 + elapsed.components.attoseconds / 100_000_000_000_000
        let route = context.endpointPath ?? "static"
        metrics?.request(method: request.method, route: route, status: response.status.code, duration: elapsed)
        logger.log(.info, "request", direct: lines) { fields in
            fields.add("ip", addresses.resolve(request, context: context))
            fields.add("method", request.method.rawValue)
            fields.add("ms", "\(tenths / 10).\(tenths % 10)")
            fields.add("request", context.logger[metadataKey: "hb.request.id"]?.description ?? "-")
            fields.add("route", route)
            fields.add("status", String(response.status.code))
        }
    }
}
