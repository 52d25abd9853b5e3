import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import Nostr

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
func buildRelayApplication(configuration: ServerConfiguration, hub: RelayHub, logger: Logger) -> some ApplicationProtocol {
    let router = Router(context: RelayRequestContext.self)
    let addresses = ClientAddress(trustedProxies: Set(configuration.trustedProxies))
    router.get("/healthz") { _, _ in jsonResponse(["status": "ok"]) }
    router.ws("/nip46") { _, _ in .upgrade([:]) } onUpgrade: { inbound, outbound, context in
        let address = addresses.resolve(context.request, peer: context.requestContext.remoteAddress)
        let (frames, queue) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(hub.limits.outboundBuffer))
        let id: UInt64
        do {
            id = try hub.open(address: address, send: { queue.yield($0) })
        } catch {
            try await outbound.write(.text(RelayAnswer.notice("blocked: too many connections from your address")))
            try await outbound.close(.policyViolation, reason: "too many connections")
            return
        }
        defer {
            hub.close(id)
            queue.finish()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await frame in frames { try await outbound.write(.text(frame)) }
            }
            for try await message in inbound.messages(maxSize: hub.limits.frame.maxMessageBytes) {
                switch message {
                case .text(let text):
                    for answer in hub.receive(text, from: id) { queue.yield(answer) }
                case .binary:
                    queue.yield(RelayAnswer.notice("invalid: this relay reads text frames (NIP-01 JSON)"))
                }
            }
            queue.finish()
            try await group.waitForAll()
        }
    }
    let server = HTTPServerBuilder.http1WebSocketUpgrade(
        webSocketRouter: router,
        configuration: .init(http1: .init(idleTimeout: .seconds(Int64(configuration.headerTimeout))),
                             ws: .init(maxFrameSize: hub.limits.frame.maxMessageBytes, autoPing: .enabled(timePeriod: .seconds(30)))))
    return Application(router: router, server: server,
                       configuration: .init(address: .hostname(configuration.host, port: configuration.effectiveNIP46Port ?? 0),
                                            serverName: "keyfob-nip46"),
                       logger: logger)
}
