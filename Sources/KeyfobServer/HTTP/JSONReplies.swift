import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import KeyfobStore
import NIOCore
import WebAuthn

/// The body of every error answer.
struct ErrorReply: Encodable {
    let error: ErrorCode
    let message: String
}

extension KeyfobError: HTTPResponseError {
    public var headers: HTTPFields { retryAfter.map { [.retryAfter: String($0)] } ?? [:] }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        jsonResponse(ErrorReply(error: code, message: message), status: status, headers: headers)
    }

    /// The client-facing form of a verification failure (WebAuthn's codes are §7's ceremony codes).
    init(_ error: WebAuthnError) {
        self.init(ErrorCode(rawValue: error.code.rawValue) ?? .invalidRequest, error.message)
    }
}

/// A JSON response from an encodable value.
func jsonResponse(_ value: some Encodable, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
    jsonResponse(body: ByteBuffer(bytes: jsonBytes(value)), status: status, headers: headers)
}

/// A JSON response from bytes already encoded.
func jsonResponse(body: ByteBuffer, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
    guard !headers.isEmpty else { return Response(status: status, headers: jsonHeaders, body: .init(byteBuffer: body)) }
    var fields = headers
    fields[.contentType] = "application/json; charset=utf-8"
    fields[.cacheControl] = "no-store"
    return Response(status: status, headers: fields, body: .init(byteBuffer: body))
}

/// A JSON answer's headers with the security headers already in (checked once, not per answer).
private let jsonHeaders: HTTPFields = {
    var fields: HTTPFields = [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"]
    fields.append(contentsOf: SecurityHeaders.fields)
    return fields
}()

/// The encoding every JSON answer uses: sorted keys, slashes as they are, ISO 8601 dates.
func jsonBytes(_ value: some Encodable) -> [UInt8] {
    Array((try? sharedEncoder.encode(value)) ?? Data(#"{"error":"\#(ErrorCode.internalError.rawValue)","message":"encoding failed"}"#.utf8))
}

/// One encoder for every answer (its settings never change; `encode` is safe from any thread).
private let sharedEncoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    return encoder
}()

/// Turns every error into the JSON error shape, so no handler can answer with HTML or a bare 500.
enum ErrorReplies {
    static func response(to error: any Error, request: Request, context: some RequestContext) throws -> Response {
        do {
            throw error
        } catch let error as KeyfobError {
            if error.status.code >= 500 && error.status != .serviceUnavailable {
                context.logger.error("request failed", metadata: ["code": "\(error.code.rawValue)"])
            }
            return try error.response(from: request, context: context)
        } catch StoreError.unavailable(let reason) {
            context.logger.warning("database unavailable", metadata: ["reason": "\(reason)"])
            return try KeyfobError.databaseUnavailable.response(from: request, context: context)
        } catch StoreError.database(let reason) {
            // A store that cannot write (a full disk, a read-only file, an I/O error) is a 503 like
            // one that cannot be reached: never a 500, and nothing was answered as done.
            context.logger.error("database error", metadata: ["reason": "\(reason)"])
            return try KeyfobError.databaseUnavailable.response(from: request, context: context)
        } catch let error as HTTPResponseError where error.status == .notFound && request.wantsHTML {
            return HTMLPage.problem(
                title: "Page not found", message: "There is no page at this address.",
                back: "/", status: .notFound, link: .home)
        } catch let error as HTTPResponseError {
            let status = error.status
            let code: ErrorCode = status == .contentTooLarge ? .payloadTooLarge : status.code >= 500 ? .internalError : .invalidRequest
            let message = status == .notFound ? "no such endpoint" : status.reasonPhrase
            return jsonResponse(ErrorReply(error: code, message: message), status: status)
        } catch {
            context.logger.error("unexpected error", metadata: ["type": "\(type(of: error))"])
            return jsonResponse(
                ErrorReply(error: .internalError, message: ErrorCode.internalError.defaultMessage),
                status: .internalServerError)
        }
    }
}

/// JSON written the way `jsonBytes` writes it, without JSONEncoder, for a hot path's answer whose
/// strings need no escaping (printable ASCII without `"` or `\`) and whose dates fall in years
/// 1970–9999. When one does not, `isPlain` turns false and the caller uses `jsonBytes`, which
/// stays the definition (`PlainJSONOutputTests` holds the two to the same bytes). The caller
/// writes the members in `jsonBytes`'s order: keys sorted.
struct PlainJSONOutput {
    private(set) var bytes: [UInt8] = []
    private(set) var isPlain = true

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// Punctuation and keys, written as they are.
    mutating func raw(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func bool(_ value: Bool) { value ? raw("true") : raw("false") }

    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else {
                isPlain = false
                return
            }
            bytes.append(byte)
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// A date as `.iso8601` writes it: whole seconds (rounded down), UTC, `Z`.
    mutating func date(_ date: Date) {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        guard seconds >= 0, seconds < 253_402_300_800 else {
            isPlain = false
            return
        }
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        bytes.append(UInt8(ascii: "\""))
        digits(Int(parts.tm_year) + 1900, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2)
        bytes.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2)
        raw("Z\"")
    }

    private mutating func digits(_ value: Int, _ count: Int) {
        var divisor = 1
        for _ in 1..<count { divisor *= 10 }
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
            divisor /= 10
        }
    }
}
