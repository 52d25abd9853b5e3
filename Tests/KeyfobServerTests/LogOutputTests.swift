import Foundation
import Logging
import Testing

@testable import KeyfobServer

/// The buffered log output: StreamLogHandler's line format, lines in order, errors written at once.
@Suite struct LogOutputTests {
    func pipe() -> (read: Int32, write: Int32) {
        var ends: [Int32] = [0, 0]
        precondition(Foundation.pipe(&ends) == 0)
        return (ends[0], ends[1])
    }

    func readAvailable(_ descriptor: Int32) -> String {
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        var out = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(descriptor, &chunk, chunk.count)
            if count <= 0 { break }
            out += chunk.prefix(count)
        }
        return String(decoding: out, as: UTF8.self)
    }

    @Test func linesKeepStreamLogHandlersFormatAndOrderAndErrorsAreWrittenAtOnce() throws {
        let (readEnd, writeEnd) = pipe()
        defer { close(readEnd); close(writeEnd) }
        let output = LogOutput(descriptor: writeEnd, interval: 60)  // the thread never wakes by itself here
        var logger = Logger(label: "keyfob") { LineLogHandler(label: $0, output: output) }
        logger[metadataKey: "instance"] = "a"
        logger.info("request", metadata: ["status": "200", "method": "POST"])
        logger.notice("second")
        #expect(readAvailable(readEnd).isEmpty)  // buffered
        logger.error("start-up failed")  // written at once, after what came before it
        let text = readAvailable(readEnd)
        let lines = text.split(separator: "\n")
        #expect(lines.count == 3)
        #expect(lines[0].hasSuffix(" info keyfob : instance=a method=POST status=200 [KeyfobServerTests] request"))
        #expect(lines[1].hasSuffix(" notice keyfob : instance=a [KeyfobServerTests] second"))
        #expect(lines[2].hasSuffix(" error keyfob : instance=a [KeyfobServerTests] start-up failed"))
        // 2026-11-23T21:00:00+0000
        #expect(lines[0].prefix(24).wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}/) != nil)
        logger.info("last")
        output.flush()
        #expect(readAvailable(readEnd).hasSuffix("[KeyfobServerTests] last\n"))
    }

    /// The request log's direct path (`LineLogHandler.write`, no metadata dictionary) writes the
    /// very line `logger.info` with the same metadata writes, escaping included.
    @Test func theDirectLineIsTheLineLoggerInfoWrites() throws {
        let (readEnd, writeEnd) = pipe()
        defer { close(readEnd); close(writeEnd) }
        let output = LogOutput(descriptor: writeEnd, interval: 60)
        let handler = LineLogHandler(label: "keyfob", output: output)
        let logger = Logger(label: "keyfob") { _ in handler }
        logger.info(
            "request", metadata: ["status": "200", "route": "/x", "ip": "10.0.0.1\nforged=1", "method": "GET"],
            source: "KeyfobServer")
        handler.write(level: .info, source: "KeyfobServer", message: "request") { fields in
            fields.add("ip", "10.0.0.1\nforged=1")
            fields.add("method", "GET")
            fields.add("route", "/x")
            fields.add("status", "200")
        }
        output.flush()
        let lines = readAvailable(readEnd).split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines[0].dropFirst(24) == lines[1].dropFirst(24))  // all but the timestamp
        #expect(lines[1].hasSuffix(#" info keyfob : ip=10.0.0.1\nforged=1 method=GET route=/x status=200 [KeyfobServer] request"#))
    }
}
