import Foundation
import HTTPTypes
import Hummingbird
import KeyfobStore
import NIOCore
import WebAuthn

/// An error a client sees: `{"error": code, "message": text}` with a fitting 4xx status.
/// Codes are DESIGN.md §7's and stable; messages never carry secrets.
public struct APIError: Error, HTTPResponseError, Sendable {
    public let code: String
    public let message: String
    public let status: HTTPResponse.Status
    /// Extra response headers (`Retry-After`).
    public let headers: HTTPFields

    public init(_ code: String, _ message: String, status: HTTPResponse.Status = .badRequest, headers: HTTPFields = [:]) {
        self.code = code
        self.message = message
        self.status = status
        self.headers = headers
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        jsonResponse(["error": code, "message": message], status: status, headers: headers)
    }

    static func invalid(_ message: String) -> APIError { .init("invalid_request", message) }
    /// The database cannot be reached right now (PostgreSQL down or restarting): a 503 the
    /// client may retry, never a hang.
    static let databaseUnavailable = APIError("internal_error", "the database is not reachable right now; try again in a moment",
                                              status: .serviceUnavailable, headers: [.retryAfter: "2"])
    static let unauthorized = APIError("unauthorized", "sign in with a passkey first", status: .unauthorized)
    static func usernameTaken(_ username: String) -> APIError {
        APIError("username_taken", "username \"\(username)\" is taken; sign in to add a passkey to it", status: .conflict)
    }

    /// The client-facing form of a verification failure.
    init(_ error: WebAuthnError) {
        let status: HTTPResponse.Status
        switch error.code {
        case .credentialNotFound: status = .notFound
        case .counterRegression: status = .conflict
        case .signatureInvalid, .userHandleMismatch: status = .unauthorized
        case .userPresenceRequired, .userVerificationRequired: status = .forbidden
        default: status = .badRequest
        }
        self.init(error.code.rawValue, error.message, status: status)
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
    Array((try? sharedEncoder.encode(value)) ?? Data(#"{"error":"internal_error","message":"encoding failed"}"#.utf8))
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
        } catch let error as APIError {
            if error.status.code >= 500 && error.status != .serviceUnavailable {
                context.logger.error("request failed", metadata: ["code": "\(error.code)"])
            }
            return jsonResponse(["error": error.code, "message": error.message], status: error.status, headers: error.headers)
        } catch StoreError.unavailable(let reason) {
            context.logger.warning("database unavailable", metadata: ["reason": "\(reason)"])
            return try APIError.databaseUnavailable.response(from: request, context: context)
        } catch let error as HTTPResponseError where error.status == .notFound && request.wantsHTML {
            return HTMLPage.problem(title: "Page not found", message: "There is no page at this address.",
                                    back: "/", status: .notFound, link: .home)
        } catch let error as HTTPResponseError {
            let status = error.status
            let code = status == .contentTooLarge ? "payload_too_large" : status.code >= 500 ? "internal_error" : "invalid_request"
            let message = status == .notFound ? "no such endpoint" : status.reasonPhrase
            return jsonResponse(["error": code, "message": message], status: status)
        } catch {
            context.logger.error("unexpected error", metadata: ["type": "\(type(of: error))"])
            return jsonResponse(["error": "internal_error", "message": "something went wrong on the server"],
                                status: .internalServerError)
        }
    }
}
