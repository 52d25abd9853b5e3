import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Testing

@testable import KeyfobServer

/// The per-connection deadlines (slow heads, slow bodies, idle keep-alive) with one timer per
/// connection that moves only when it must.
@Suite struct ConnectionGuardTests {
    func channel() throws -> (EmbeddedChannel, EmbeddedEventLoop) {
        let loop = EmbeddedEventLoop()
        let channel = EmbeddedChannel(handler: ConnectionGuard(headerTimeout: .seconds(10), bodyTimeout: .seconds(3)), loop: loop)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return (channel, loop)
    }

    let head = HTTPRequestPart.head(HTTPRequest(method: .post, scheme: nil, authority: "localhost", path: "/x"))

    @Test func aConnectionThatSendsNothingClosesAtTheHeaderTimeout() throws {
        let (channel, loop) = try channel()
        loop.advanceTime(by: .seconds(9))
        #expect(channel.isActive)
        loop.advanceTime(by: .seconds(1))
        #expect(!channel.isActive)
    }

    @Test func aSlowBodyClosesAtTheBodyTimeoutThoughTheHeaderTimeoutIsLater() throws {
        let (channel, loop) = try channel()
        loop.advanceTime(by: .seconds(1))
        try channel.writeInbound(head)
        loop.advanceTime(by: .milliseconds(2_900))
        #expect(channel.isActive)
        loop.advanceTime(by: .milliseconds(100))
        #expect(!channel.isActive)  // 4 s after connecting: the body's deadline, not the header's
    }

    @Test func eachRequestOnAKeepAliveConnectionGetsAFreshDeadline() throws {
        let (channel, loop) = try channel()
        for _ in 0..<5 {
            loop.advanceTime(by: .seconds(8))
            try channel.writeInbound(head)
            try channel.writeInbound(HTTPRequestPart.end(nil))
            loop.advanceTime(by: .seconds(8))  // the handler takes its time: no deadline while it works
            try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok)))
            try channel.writeOutbound(HTTPResponsePart.end(nil))
            #expect(channel.isActive)
        }
        loop.advanceTime(by: .milliseconds(9_999))
        #expect(channel.isActive)
        loop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)  // idle for the header timeout after the last answer
    }
}
