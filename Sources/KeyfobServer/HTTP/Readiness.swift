import Hummingbird
import NIOConcurrencyHelpers

/// Open once start-up is done: the schema is current, the master key checked, operators bound.
/// With SQLite that is before the server listens; with PostgreSQL the server listens first (so
/// `/healthz` can say 503 while the database is unreachable) and start-up finishes when it can.
public final class ReadinessGate: Sendable {
    private let isOpen: NIOLockedValueBox<Bool>

    public init(open: Bool) { isOpen = NIOLockedValueBox(open) }

    var open: Bool { isOpen.withLockedValue { $0 } }
    func openNow() { isOpen.withLockedValue { $0 = true } }
}

/// Until the gate opens, every route but `/healthz` and `/metrics` answers 503 (pages are
/// served, and their calls get the 503). Added only where the gate starts closed (PostgreSQL).
struct ReadinessMiddleware<Context: RequestContext>: RouterMiddleware {
    let gate: ReadinessGate

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard !gate.open, request.uri.path != "/healthz", request.uri.path != "/metrics" else {
            return try await next(request, context)
        }
        throw KeyfobError(
            .storeUnavailable, "keyfob is starting: the database is not reachable yet; try again in a moment",
            status: .serviceUnavailable, retryAfter: 2)
    }
}
