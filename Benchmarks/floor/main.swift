// The floor `make load` measures Keyfob's ceiling against (BENCHMARKS.md, issue #29): Hummingbird 2
// answering the same two requests as Keyfob's `--bench-echo` routes — a POST whose body it reads,
// and a GET — with no middleware, no logging and no metrics. Its tasks run on NIO's event loops, as
// Keyfob's do, so the gap between the two is what Keyfob adds per request, nothing else.
//
//   swift build -c release --product keyfob-floor && .build/release/keyfob-floor 18083
import Foundation
import Hummingbird
import NIOCore
import NIOPosix

NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
let port = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 18083
let router = Router()
router.post("/bench/echo") { request, _ -> Response in
    let body = try await request.body.collect(upTo: 64 * 1024)
    return Response(
        status: .ok, headers: [.contentType: "application/json"],
        body: .init(byteBuffer: ByteBuffer(string: #"{"bytes":\#(body.readableBytes),"verified":true}"#)))
}
router.get("/bench/echo") { _, _ -> Response in
    Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: #"{"status":"ok"}"#)))
}
router.get("/healthz") { _, _ in "ok" }
let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "floor"))
do {
    try await app.runService()
} catch {
    // A clear line instead of a trap's backtrace, e.g. when the port is taken.
    FileHandle.standardError.write(Data("keyfob-floor: cannot serve on 127.0.0.1:\(port): \(error)\n".utf8))
    exit(1)
}
