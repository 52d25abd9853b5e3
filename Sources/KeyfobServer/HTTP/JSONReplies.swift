import Foundation
import HTTPTypes
import Hummingbird
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
