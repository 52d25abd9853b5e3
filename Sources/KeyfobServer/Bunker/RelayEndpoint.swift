import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import Nostr
import ServiceLifecycle

/// The WebSocket side of the built-in relay: a request context that knows the peer, for the
/// per-address connection cap.
struct RelayRequestContext: RequestContext, WebSocketRequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<Self>
    let remoteAddress: SocketAddress?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        remoteAddress = source.channel.remoteAddress
    }
}

/// The built-in NIP-46 relay on a listener of its own (`--nip46-port`; behind the TLS proxy,
/// `wss://<host>/nip46` goes there). Its own listener keeps the WebSocket upgrade out of the main
/// server's pipeline, whose per-connection deadlines and parse-error answers stay as they are.
///
/// Bounded like the HTTP port (docs/configuration.md, "Connections and memory"): at most
/// `maxConnections` at once (its share of the process's descriptor budget), the upgrade request
/// within the header timeout, a dead peer found by a ping every 30 s, and the frames waiting for a
/// slow reader bounded per connection and across all of them: past either bound it is disconnected.
func buildRelayApplication(
    configuration: ServerConfiguration, hub: RelayHub, logger: Logger,
    maxConnections: Int = 1024
) -> some ApplicationProtocol {
    let router = Router(context: RelayRequestContext.self)
    let addresses = ClientAddress(trustedProxies: Set(configuration.trustedProxies), ipv6Prefix: configuration.ipv6Prefix)
    router.get("/healthz") { _, _ in jsonResponse(["status": "ok"]) }
    router.ws("/nip46") { _, _ in
        .upgrade([:])
    } onUpgrade: { inbound, outbound, context in
        let address = addresses.limitKey(context.request, peer: context.requestContext.remoteAddress)
        let queue = OutboundQueue(maxBytes: hub.limits.outboundBytesPerConnection, budget: hub.outboundBudget)
        let id: UInt64
        do {
            id = try hub.open(address: address, send: { queue.push($0) })
        } catch {
            try await outbound.write(.text(RelayAnswer.notice("blocked: too many connections from your address")))
            try await outbound.close(.policyViolation, reason: "too many connections")
            return
        }
        defer {
            hub.close(id)
            queue.drain()
        }
        // Shutting down ends every connection at once (clients reconnect to another instance or later).
        try await cancelWhenGracefulShutdown {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    while let frame = await queue.next() { try await outbound.write(.text(frame)) }
                    // Overflowed: a reader this slow is cut off, not buffered for.
                    if queue.isOverflowed { throw SlowReader() }
                }
                group.addTask {
                    defer { queue.finish() }
                    for try await message in inbound.messages(maxSize: hub.limits.frame.maxMessageBytes) {
                        switch message {
                        case .text(let text):
                            for answer in hub.receive(text, from: id) { queue.push(answer) }
                        case .binary:
                            queue.push(RelayAnswer.notice("invalid: this relay reads text frames (NIP-01 JSON)"))
                        }
                    }
                }
                // Whichever ends first (the peer left, or the writer gave up on a slow reader) ends both.
                defer { group.cancelAll() }
                try await group.next()
            }
        }
    }
    let headerTimeout = TimeAmount.seconds(Int64(configuration.headerTimeout))
    let webSocketResponder = router.buildResponder()
    let webSocket = HTTP1WebSocketUpgradeChannel.Configuration(
        http1: .init(idleTimeout: .seconds(Int64(configuration.headerTimeout))),
        // A peer gets half a second to answer our close frame (at shutdown, or when cut off as a slow
        // reader): one that does not read would otherwise hold the connection, and a shutdown, 15 s.
        ws: .init(
            maxFrameSize: hub.limits.frame.maxMessageBytes, autoPing: .enabled(timePeriod: .seconds(30)),
            closeTimeout: .milliseconds(500)))
    let server = HTTPServerBuilder { responder in
        UpgradeDeadlineChannel(
            inner: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder, configuration: webSocket),
            timeout: headerTimeout)
    }
    return Application(
        router: router, server: server,
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.effectiveNIP46Port ?? 0),
            serverName: "keyfob-nip46", backlog: 1024,
            availableConnectionsDelegate: MaximumAvailableConnections(maxConnections)),
        logger: logger)
}

/// The writer stopped: the reader had more frames waiting than its bound.
struct SlowReader: Error {}

/// The relay listener's connections with a deadline for the HTTP part: a request (the upgrade, or
/// `/healthz`) must arrive and be answered within `timeout` of connecting or of the previous
/// answer, or the connection is closed. Once the upgrade is answered (101) the deadline goes: a
/// WebSocket may stay quiet (its pings find dead peers). Without it, a partial request head held a
/// connection forever: the upgrade channel adds its own idle handling only once a head is whole.
struct UpgradeDeadlineChannel<Inner: ServerChildChannel>: ServerChildChannel {
    let inner: Inner
    let timeout: TimeAmount

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Inner.Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(UpgradeDeadline(timeout: timeout), position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return inner.setup(channel: channel, logger: logger)
    }

    func handle(value: Inner.Value, logger: Logger) async {
        // At shutdown a connection still before its upgrade (a partial head) is closed at once; an
        // upgraded WebSocket gets its close frame from its own handler.
        let channel = value.channel
        await withGracefulShutdownHandler {
            await inner.handle(value: value, logger: logger)
        } onGracefulShutdown: {
            channel.pipeline.handler(type: UpgradeDeadline.self).whenSuccess { _ in channel.close(promise: nil) }
        }
    }
}

/// Closes the connection unless a response is written within the deadline; removes itself once
/// the response is `101 Switching Protocols`.
final class UpgradeDeadline: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let timeout: TimeAmount
    private var deadline: Scheduled<Void>?
    private static let switching = Array("HTTP/1.1 101".utf8)

    init(timeout: TimeAmount) { self.timeout = timeout }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { disarm() }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let buffer = unwrapOutboundIn(data)
        if buffer.readableBytesView.starts(with: Self.switching) {
            disarm()
            context.write(data, promise: promise)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        arm(context)  // an answer: the next request gets the same deadline
        context.write(data, promise: promise)
    }

    private func arm(_ context: ChannelHandlerContext) {
        disarm()
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
    }

    private func disarm() {
        deadline?.cancel()
        deadline = nil
    }
}
