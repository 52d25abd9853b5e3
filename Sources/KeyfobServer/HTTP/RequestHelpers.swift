import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import WebAuthn

/// A body type a hot path reads from `PlainJSON` without Foundation. `init(plain:)` gives the
/// value JSONDecoder would, or nil for a shape it does not handle (a missing field too), which
/// then goes to JSONDecoder: its answer and its error messages stay the one definition.
protocol PlainDecodable: Decodable {
    init?(plain: PlainJSON)
}

extension Request {
    /// The body, refused with `payload_too_large` before it is read whole when it is
    /// (or declares itself) larger than `limit`.
    func bodyBytes(limit: Int) async throws -> [UInt8] {
        // One pass over the fields: a lookup by name would build the request's header index.
        if let declared = headers.first(where: { $0.name == .contentLength }).flatMap({ Int($0.value) }), declared > limit {
            throw KeyfobError(.payloadTooLarge, "request body is over \(limit) bytes", status: .contentTooLarge)
        }
        do {
            let buffer = try await body.collect(upTo: limit)
            return Array(buffer.readableBytesView)
        } catch {
            throw KeyfobError(.payloadTooLarge, "request body is over \(limit) bytes", status: .contentTooLarge)
        }
    }

    /// Decodes a JSON body, naming the field that is missing or of the wrong type. With
    /// `emptyIsObject`, an empty body reads as `{}` (bodies whose every field is optional).
    func decodeJSON<T: Decodable>(_ type: T.Type, limit: Int, emptyIsObject: Bool = false) async throws -> T {
        let bytes = try await bodyBytes(limit: limit)
        try requireJSONContentType(bodyIsEmpty: bytes.isEmpty)
        return try decodeJSON(T.self, from: bytes.isEmpty && emptyIsObject ? Array("{}".utf8) : bytes)
    }

    /// The same, for a body a hot path reads without Foundation when it is plain JSON.
    func decodeJSON<T: PlainDecodable>(_ type: T.Type, limit: Int) async throws -> T {
        let bytes = try await bodyBytes(limit: limit)
        try requireJSONContentType(bodyIsEmpty: bytes.isEmpty)
        if let object = PlainJSON.parse(bytes), let value = T(plain: object) { return value }
        return try decodeJSON(T.self, from: bytes)
    }

    private func decodeJSON<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        guard !bytes.isEmpty else { throw KeyfobError.invalid("request body is empty; send a JSON object") }
        return try JSONBody.decode(T.self, from: bytes)
    }

    /// A JSON object body, read as Foundation values (for bodies whose fields are checked by hand,
    /// e.g. nostr events); an empty body is `{}`.
    func jsonObject(limit: Int) async throws -> [String: Any] {
        let bytes = try await bodyBytes(limit: limit)
        guard !bytes.isEmpty else { return [:] }
        return try jsonObject(parsing: bytes)
    }

    /// A body already read (`bodyBytes`) as a JSON object; it must be declared as JSON.
    func jsonObject(parsing bytes: [UInt8]) throws -> [String: Any] {
        try requireJSONContentType(bodyIsEmpty: bytes.isEmpty)
        guard let object = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else {
            throw KeyfobError.invalid("request body must be a JSON object")
        }
        return object
    }

    /// A body, when there is one, must be declared as JSON.
    func requireJSONContentType(bodyIsEmpty: Bool) throws {
        guard !bodyIsEmpty else { return }
        let type = headers[.contentType]?.lowercased() ?? ""
        guard type.hasPrefix("application/json") else {
            throw KeyfobError(.invalidRequest, "Content-Type must be application/json", status: .unsupportedMediaType)
        }
    }

    /// An HTML form's fields (`application/x-www-form-urlencoded`); the first value of each name.
    func formFields(limit: Int) async throws -> [String: String] {
        let bytes = try await bodyBytes(limit: limit)
        let type = headers[.contentType]?.lowercased() ?? ""
        guard type.hasPrefix("application/x-www-form-urlencoded") else {
            throw KeyfobError(.invalidRequest, "Content-Type must be application/x-www-form-urlencoded", status: .unsupportedMediaType)
        }
        guard let items = FormURLEncoded.items(String(decoding: bytes, as: UTF8.self)) else {
            throw KeyfobError.invalid("the form's fields are not valid percent-encoding")
        }
        var fields: [String: String] = [:]
        for item in items where fields[item.name] == nil { fields[item.name] = item.value }
        return fields
    }

    /// A browser asking for a page (not the JSON API): GET, `Accept` with text/html.
    var wantsHTML: Bool {
        method == .get && !uri.path.hasPrefix("/api/") && (headers[.accept] ?? "").contains("text/html")
    }

    /// The first value of query parameter `name`, read as browsers write forms (`FormURLEncoded`:
    /// `+` is a space); nil when absent or when the query does not decode.
    func queryValue(_ name: String) -> String? {
        guard let query = uri.query else { return nil }
        return FormURLEncoded.items(query)?.first { $0.name == name }?.value
    }

    /// A cookie's value from the Cookie header.
    func cookie(_ name: String) -> String? {
        for header in headers[values: .cookie] {
            for part in header.split(separator: ";") {
                let pair = part.trimmingCharacters(in: .whitespaces)
                if pair.hasPrefix(name + "=") { return String(pair.dropFirst(name.count + 1)) }
            }
        }
        return nil
    }
}

/// Typed reading of request JSON: JSONDecoder only, which throws on any shape (Foundation's
/// `JSONSerialization.data(withJSONObject:)` traps on Linux for a top-level string or number, so
/// a request's values are never re-serialised to reach a `Decodable`).
enum JSONBody {
    /// `bytes` as `T`, or `invalid_request` naming the field that is missing or of the wrong type.
    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch let DecodingError.keyNotFound(key, context) {
            throw KeyfobError.invalid("field \"\(path(context.codingPath + [key]))\" is missing")
        } catch let DecodingError.typeMismatch(_, context) {
            throw KeyfobError.invalid("field \"\(path(context.codingPath))\" has the wrong type")
        } catch let DecodingError.valueNotFound(_, context) {
            throw KeyfobError.invalid("field \"\(path(context.codingPath))\" is null")
        } catch let DecodingError.dataCorrupted(context) where !context.codingPath.isEmpty {
            throw KeyfobError.invalid("field \"\(path(context.codingPath))\" has a value that is not allowed")
        } catch let error as KeyfobError {
            throw error
        } catch {
            // Foundation on Linux says "not valid JSON" for a valid number that does not fit its
            // field (2.5 for an integer), with no path: find the number and name its field.
            if let object = try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed]),
                let field = unfitNumber(in: object, at: [])
            {
                throw KeyfobError.invalid("field \"\(field.isEmpty ? "(body)" : field)\" must be a whole number in range")
            }
            throw KeyfobError.invalid("request body is not valid JSON")
        }
    }

    /// The path of the first number that is not a whole number an Int holds (the body is bounded, so is the walk).
    private static func unfitNumber(in value: Any, at path: [String]) -> String? {
        switch value {
        case let object as [String: Any]:
            for key in object.keys.sorted() {
                if let found = unfitNumber(in: object[key]!, at: path + [key]) { return found }
            }
        case let array as [Any]:
            for (index, item) in array.enumerated() {
                if let found = unfitNumber(in: item, at: path + ["[\(index)]"]) { return found }
            }
        case let number as NSNumber:  // true and false are 1 and 0, whole
            let double = number.doubleValue
            if double.rounded() != double || abs(double) >= 9.2e18 {
                return path.joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
            }
        default: break
        }
        return nil
    }

    private static func path(_ keys: [CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            .replacingOccurrences(of: ".[", with: "[")
    }
}

/// Encodes a value's fields plus one string field at the same level: ceremony options with their
/// `challengeKey` (as the iOS guide shows), a confirmation's options with the bytes they commit to,
/// a sealed account's sign-in options (already with their key) with the account's name.
struct WithField<Options: Encodable>: Encodable {
    let options: Options
    let name: Name
    let value: String

    enum Name: String, CodingKey {
        case challengeKey, committed, account
    }

    func encode(to encoder: Encoder) throws {
        try options.encode(to: encoder)
        var container = encoder.container(keyedBy: Name.self)
        try container.encode(value, forKey: name)
    }
}

/// A page of the public directory, served uncached (pages routed by the server, not FileMiddleware).
func htmlPage(_ name: String, in directory: String) throws -> Response {
    let path = (directory as NSString).appendingPathComponent(name)
    guard let data = FileManager.default.contents(atPath: path) else {
        throw KeyfobError(.internalError, "the page \(name) is missing from --public-dir", status: .internalServerError)
    }
    return Response(
        status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
        body: .init(byteBuffer: ByteBuffer(bytes: data)))
}
