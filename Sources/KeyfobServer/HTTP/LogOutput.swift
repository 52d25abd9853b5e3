import Foundation
import Logging
import NIOConcurrencyHelpers

/// Standard output for log lines, written by a thread of its own: a request appends its line to a
/// buffer and goes on; the writer thread empties the buffer every `interval` (at once for errors
/// and above, and on `flush()`). Two `StreamLogHandler` lines per sign-in each cost a `strftime` and
/// a `write(2)` on the request's thread; under load this moved logging from ~3.6% to ~2.7% of the
/// server's CPU (BENCHMARKS.md).
public final class LogOutput: @unchecked Sendable {
    public static let standardOutput = LogOutput(descriptor: STDOUT_FILENO)

    private let descriptor: Int32
    private let condition = NSCondition()
    private var buffer: [UInt8] = []
    /// Held while bytes go to the descriptor, so batches are written in order.
    private let writing = NSLock()
    /// The buffer's size past which the writer is woken early.
    private static let wakeAt = 64 * 1024
    /// Past this a burst writes on the caller's thread rather than grow without bound.
    private static let maxBuffered = 4 * 1024 * 1024
    private let interval: TimeInterval

    init(descriptor: Int32, interval: TimeInterval = 0.02) {
        self.descriptor = descriptor
        self.interval = interval
        let thread = Thread { self.writeForever() }  // lives as long as the process
        thread.name = "keyfob-log"
        thread.start()
    }

    /// Appends a line; an urgent one (error and above, e.g. the last words before start-up stops
    /// the process) is written at once, after what was buffered before it.
    func append(_ line: [UInt8], urgent: Bool) {
        condition.lock()
        if urgent || buffer.count + line.count > Self.maxBuffered {
            condition.unlock()
            writeNow(then: line)
            return
        }
        buffer.append(contentsOf: line)
        if buffer.count >= Self.wakeAt { condition.signal() }
        condition.unlock()
    }

    /// Writes what is buffered now (at exit, and before a test reads the output).
    public func flush() { writeNow(then: []) }

    /// Takes the buffer and writes it, then `line`; `writing` keeps lines in the order they came.
    private func writeNow(then line: [UInt8]) {
        writing.lock()
        defer { writing.unlock() }
        condition.lock()
        var pending = buffer
        buffer = []
        condition.unlock()
        pending.append(contentsOf: line)
        write(pending)
    }

    private func writeForever() {
        while true {
            condition.lock()
            _ = condition.wait(until: Date().addingTimeInterval(interval))
            let empty = buffer.isEmpty
            condition.unlock()
            if !empty { writeNow(then: []) }
        }
    }

    private func write(_ bytes: [UInt8]) {
        var offset = 0
        bytes.withUnsafeBytes { raw in
            while offset < raw.count {
                let written = Foundation.write(descriptor, raw.baseAddress! + offset, raw.count - offset)
                if written <= 0 {
                    if written < 0 && errno == EINTR { continue }
                    return  // stdout closed: nothing to do but drop the lines
                }
                offset += written
            }
        }
    }
}

/// `StreamLogHandler`'s line format (`<time> <level> <label> : k=v … [source] message`) into a
/// `LogOutput`, with the timestamp formatted once per second.
public struct LineLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let output: LogOutput

    public init(label: String, output: LogOutput = .standardOutput) {
        self.label = label
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get(), !provided.isEmpty { all.merge(provided) { _, new in new } }
        if let explicit = event.metadata, !explicit.isEmpty { all.merge(explicit) { _, new in new } }
        write(level: event.level, source: event.source, message: event.message.description) { fields in
            for key in all.keys.sorted() { fields.add(key, all[key]!.description) }
        }
    }

    /// The logger's handler when lines can be written to it directly (`write`): a LineLogHandler
    /// logging at info with no metadata of its own to merge in.
    static func direct(for logger: Logger) -> LineLogHandler? {
        guard logger.logLevel <= .info, let handler = logger.handler as? LineLogHandler,
            handler.metadata.isEmpty, handler.metadataProvider == nil
        else { return nil }
        return handler
    }

    /// One line: the timestamp, level and label, the fields `fields` adds (in the order it adds
    /// them: sorted by key, as `log` sorts), the source and the message.
    func write(level: Logger.Level, source: String, message: String, fields: (inout LogFields) -> Void) {
        var line = LogFields.Line()
        line.append(Timestamp.now())
        line.append(" ")
        line.append(level.rawValue)
        line.append(" ")
        line.append(label)
        line.append(" :")
        var added = LogFields(line: line)
        fields(&added)
        line = added.line!
        line.append(" [")
        line.append(source)
        line.append("] ")
        line.append(LogText.escaped(message))
        line.append("\n")
        output.append(line.bytes, urgent: level >= .error)
    }

    /// `2026-11-23T21:00:00+0000`, recomputed when the second changes.
    enum Timestamp {
        private static let cache = NIOLockedValueBox<(second: Int, text: String)>((-1, ""))

        static func now() -> String {
            var time = timespec()
            clock_gettime(CLOCK_REALTIME, &time)
            let second = time.tv_sec
            return cache.withLockedValue { cached in
                if cached.second == second { return cached.text }
                var seconds = second
                var parts = tm()
                localtime_r(&seconds, &parts)
                var bytes = [Int8](repeating: 0, count: 64)
                let count = strftime(&bytes, bytes.count, "%Y-%m-%dT%H:%M:%S%z", &parts)
                let text = String(decoding: bytes.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
                cached = (second, text)
                return text
            }
        }
    }
}

/// A log value made safe for a one-line-per-entry log: control characters (a newline that would
/// start a forged line, an escape sequence for a terminal, C1 and the Unicode line separators)
/// are written as `\n`, `\r`, `\t` or `\u{…}`. Values come from relays, clients and errors.
/// The fields of one log line, added in key order: bytes of the line when it is written straight
/// into a `LineLogHandler`'s buffer, else the metadata of an ordinary `Logger` call.
struct LogFields {
    fileprivate var line: Line?
    fileprivate var metadata: Logger.Metadata = [:]

    /// ` key=value`, the value escaped (or the metadata entry).
    mutating func add(_ key: String, _ value: String) {
        if line == nil { metadata[key] = .string(value) } else { line?.field(key, value) }
    }

    /// The bytes of one line as they are built.
    struct Line {
        var bytes: [UInt8]

        init() {
            bytes = []
            bytes.reserveCapacity(256)
        }

        mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }

        mutating func field(_ key: String, _ value: String) {
            bytes.append(0x20)
            append(key)
            bytes.append(0x3D)
            append(LogText.escaped(value))
        }
    }
}

extension Logger {
    /// One line at `level` with the fields `fields` adds (in key order): straight into `direct`'s
    /// buffer when there is one (`LineLogHandler.direct(for:)`, found once by the caller), else
    /// through this logger with the fields as metadata. The text is the same either way.
    func log(
        _ level: Level, _ message: String, direct: LineLogHandler?, source: String = "KeyfobServer",
        fields: (inout LogFields) -> Void
    ) {
        if let direct {
            direct.write(level: level, source: source, message: message, fields: fields)
            return
        }
        var collected = LogFields()
        fields(&collected)
        log(level: level, "\(message)", metadata: collected.metadata, source: source)
    }
}

public enum LogText {
    public static func escaped(_ text: String) -> String {
        // Nearly every value is plain: one pass over the bytes decides.
        func needsEscaping(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7f || byte == 0xc2 || byte == 0xe2 }
        let plain =
            text.utf8.withContiguousStorageIfAvailable { bytes in !bytes.contains(where: needsEscaping) }
            ?? !text.utf8.contains(where: needsEscaping)
        guard !plain else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029:
                out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
