import HTTPTypes
import Hummingbird
import ServiceLifecycle

/// Server-sent events: a response whose body runs until the client goes, the source ends, or
/// the server stops. A stream is the one response that never finishes by itself, so it ends on
/// graceful shutdown (SIGTERM) at once — an open dashboard or wallet must not hold a restart for
/// the whole drain time — with the stream's end written, which EventSource answers by reconnecting.
enum EventStream {
    static let headers: HTTPFields = [
        .contentType: "text/event-stream", .cacheControl: "no-store", HTTPField.Name("X-Accel-Buffering")!: "no",
    ]

    /// Events a reader has not taken yet; past this the oldest are dropped (a reader that slow
    /// loses events rather than the server's memory).
    static let backlog = 256

    /// `produce` runs in a task of its own and yields the stream's bytes (`data: …\n\n` lines and
    /// comments); it is cancelled when the client goes, and the stream ends when it returns.
    static func response(_ produce: @escaping @Sendable (AsyncStream<ByteBuffer>.Continuation) async -> Void) -> Response {
        Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                let (events, sink) = AsyncStream<ByteBuffer>.makeStream(bufferingPolicy: .bufferingNewest(backlog))
                try await withGracefulShutdownHandler {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            await produce(sink)
                            sink.finish()
                        }
                        for await event in events { try await writer.write(event) }
                        group.cancelAll()
                    }
                } onGracefulShutdown: {
                    sink.finish()
                }
                try await writer.finish(nil)
            })
    }
}
