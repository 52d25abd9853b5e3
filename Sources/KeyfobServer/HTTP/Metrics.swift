import Foundation
import HTTPTypes
import Hummingbird
import Prometheus
import Synchronization

/// Prometheus metrics (swift-prometheus), one registry per application: requests and latency per
/// route, ceremony outcomes and signer operations by code. Served at `/metrics` to loopback
/// peers and `--metrics-from` addresses only.
final class KeyfobMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    /// The registry builds a name and sorts labels for every lookup; a request records three
    /// metrics or more, so the handles are kept here, found by typed keys of their label values
    /// (no array built per request or store call to find them).
    private let eventCounters = Handles<LabelPair, Counter>()
    private let signerCounters = Handles<SignerKey, Counter>()
    private let storeHistograms = Handles<String, DurationHistogram>()
    private let requestCounters = Handles<RequestKey, Counter>()
    private let routeHistograms = Handles<String, DurationHistogram>()

    private struct LabelPair: Hashable {
        let name: String
        let code: String?
    }

    private struct SignerKey: Hashable {
        let method: String
        let outcome: String
        let code: String?
    }

    private struct RequestKey: Hashable {
        let method: HTTPRequest.Method
        let route: String
        let status: Int
    }
    static var requests: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "keyfob", metricName: "http_requests", unitName: "total",
            helpText: "HTTP requests by method, route pattern and status")
    }
    static var requestDuration: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "keyfob", metricName: "http_request_duration", unitName: "seconds",
            helpText: "HTTP request latency by route pattern")
    }
    static var events: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "keyfob", metricName: "events", unitName: "total",
            helpText: "Ceremony and session events by code")
    }
    static var signerOperations: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "keyfob", metricName: "signer_operations", unitName: "total",
            helpText: "Signer operations by method, outcome and code")
    }
    static var storeDuration: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "keyfob", metricName: "store_duration", unitName: "seconds",
            helpText: "Store call latency by operation")
    }
    static let buckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
        .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .seconds(5),
    ]

    func request(method: HTTPRequest.Method, route: String, status: Int, duration: Duration) {
        requestCounters.get(RequestKey(method: method, route: route, status: status)) {
            registry.makeCounter(
                descriptor: Self.requests,
                labels: [("method", method.rawValue), ("route", route), ("status", String(status))])
        }.increment()
        routeHistograms.get(route) {
            registry.makeDurationHistogram(descriptor: Self.requestDuration, labels: [("route", route)], buckets: Self.buckets)
        }.record(duration)
    }

    /// A ceremony or session event (`registration.verified`, `authentication.failed`, …) and its code.
    func event(_ name: String, code: String?) {
        eventCounters.get(LabelPair(name: name, code: code)) {
            registry.makeCounter(descriptor: Self.events, labels: [("event", name), ("code", code ?? "")])
        }.increment()
    }

    func signer(method: String, outcome: String, code: String?) {
        signerCounters.get(SignerKey(method: method, outcome: outcome, code: code)) {
            registry.makeCounter(descriptor: Self.signerOperations, labels: [("method", method), ("outcome", outcome), ("code", code ?? "")])
        }.increment()
    }

    /// Times one store call (`keyfob_store_duration_seconds{operation}`).
    func store<T>(_ operation: String, _ body: () async throws -> T) async rethrows -> T {
        let start = ContinuousClock.now
        defer {
            storeHistograms.get(operation) {
                registry.makeDurationHistogram(descriptor: Self.storeDuration, labels: [("operation", operation)], buckets: Self.buckets)
            }.record(ContinuousClock.now - start)
        }
        return try await body()
    }

    func exposition() -> Response {
        Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
    }
}

/// Metric handles by their label values, one table per metric. Label values come
/// from route patterns, codes and method names, never from raw input, so the set stays small.
private final class Handles<Key: Hashable & Sendable, Handle: Sendable>: Sendable {
    private let handles = Mutex<[Key: Handle]>([:])

    func get(_ key: Key, make: () -> Handle) -> Handle {
        handles.withLock { handles in
            if let handle = handles[key] { return handle }
            let handle = make()
            handles[key] = handle
            return handle
        }
    }
}
