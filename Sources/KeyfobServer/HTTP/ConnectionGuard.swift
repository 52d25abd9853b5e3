import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Per-connection deadlines and parse-error answers, in the channel pipeline after HTTP decoding.
///
/// - A request's head must arrive within `headerTimeout` of the connection opening or of the
///   previous response (this also ends idle keep-alive connections), and its body within
///   `bodyTimeout` of the head: slow-header and slow-body clients cannot hold a connection.
/// - One client address holds at most `addresses.limit` connections at once: one more is closed
///   as it opens, before a byte is read (`AddressConnections`).
/// - A request the HTTP parser refuses (oversized or too many header fields, malformed syntax)
///   gets the same JSON error body as every other 4xx, then the connection closes.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let headerTimeout: TimeAmount
    private let bodyTimeout: TimeAmount
    /// When the connection is closed unless a request moves it on (nil: no deadline now).
    private var closesAt: NIODeadline?
    private var timer: Scheduled<Void>?
    private var timerAt: NIODeadline?
    /// A response head has been written and its end not yet: parse errors then just close.
    private var responding = false

    private let connections: ConnectionCounter?
    private var counted = false
    private let addresses: AddressConnections?
    /// The place this connection holds in `addresses` (nil: none, or its address is not capped).
    private var addressKey: String?

    init(
        headerTimeout: TimeAmount, bodyTimeout: TimeAmount, connections: ConnectionCounter? = nil,
        addresses: AddressConnections? = nil
    ) {
        self.headerTimeout = headerTimeout
        self.bodyTimeout = bodyTimeout
        self.connections = connections
        self.addresses = addresses
    }

    private func count(_ open: Bool) {
        guard open != counted else { return }
        counted = open
        if open { connections?.opened() } else { connections?.closed() }
        if !open, let addressKey {
            addresses?.release(addressKey)
            self.addressKey = nil
        }
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { opened(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        guard opened(context) else { return }
        context.fireChannelActive()
    }

    /// A new connection: admitted (deadline armed, counted) or, over its address's cap, closed.
    @discardableResult
    private func opened(_ context: ChannelHandlerContext) -> Bool {
        if let addresses, let key = addresses.key(for: context.channel.remoteAddress) {
            guard addresses.admit(key) else {
                context.close(promise: nil)
                return false
            }
            addressKey = key
        }
        arm(context, headerTimeout)
        count(true)
        return true
    }

    func handlerRemoved(context: ChannelHandlerContext) { stopTimer(); count(false) }

    func channelInactive(context: ChannelHandlerContext) {
        stopTimer()
        count(false)
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: arm(context, bodyTimeout)
        case .body: break
        case .end: disarm()  // the request is whole; the handler may take its time
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head) where head.status.code >= 200: responding = true
        case .end:
            responding = false
            arm(context, headerTimeout)  // the next request on this connection gets the same deadline
        default: break
        }
        context.write(data, promise: promise)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let parseError = error as? HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        disarm()
        guard !responding else { context.close(promise: nil); return }
        let (status, code, message): (HTTPResponse.Status, ErrorCode, String) =
            switch parseError {
            case .headerOverflow:
                (
                    .init(code: 431, reasonPhrase: "Request Header Fields Too Large"), .payloadTooLarge,
                    "request headers are too large or too many"
                )
            default:
                (.badRequest, .invalidRequest, "the request is not valid HTTP/1.1")
            }
        let body = ByteBuffer(string: #"{"error":"\#(code)","message":"\#(message)"}"#)
        var headers = SecurityHeaders.fields
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.contentLength] = String(body.readableBytes)
        headers[.connection] = "close"
        context.write(wrapOutboundOut(.head(HTTPResponse(status: status, headerFields: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        // The channel is closed once the error response is flushed (the promise completes on this loop).
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Sets the connection's deadline. One timer per connection, moved only when the new deadline
    /// is earlier than the one it is set for: a keep-alive connection re-arms twice a request, and
    /// scheduling (and cancelling) a task each time was a measurable share of a small request.
    private func arm(_ context: ChannelHandlerContext, _ timeout: TimeAmount) {
        let deadline = context.eventLoop.now + timeout  // the loop's clock: tests advance it
        closesAt = deadline
        if let timerAt, timerAt <= deadline { return }
        timer?.cancel()
        schedule(context, at: deadline)
    }

    private func schedule(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        timerAt = deadline
        let loop = context.eventLoop.assumeIsolated()
        timer = loop.scheduleTask(deadline: deadline) { [self] in
            timer = nil
            timerAt = nil
            guard let closesAt else { return }  // disarmed since: nothing to do until the next arm
            if closesAt <= context.eventLoop.now {
                context.channel.close(promise: nil)
            } else {
                schedule(context, at: closesAt)
            }
        }
    }

    /// No deadline until the next `arm`; the timer, if any, finds nothing to do when it fires.
    private func disarm() { closesAt = nil }

    /// The connection is gone: its timer goes too.
    private func stopTimer() {
        closesAt = nil
        timer?.cancel()
        timer = nil
        timerAt = nil
    }
}
