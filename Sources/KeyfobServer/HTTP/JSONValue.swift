import Foundation

/// Any JSON value, read by JSONDecoder: for a request field whose inside is checked by code that
/// takes Foundation's values (a polkadot-js backup file), without re-serialising what the request
/// sent. `Sendable`, so it crosses into the scrypt slots as it is.
enum JSONValue: Decodable, Sendable, Equatable {
    case object([String: JSONValue])
    case array([JSONValue])
    case string(String)
    case number(Double)
    case bool(Bool)
    case null

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// As `JSONSerialization.jsonObject` would have given it (numbers as `Double`, null as `NSNull`).
    var foundation: Any {
        switch self {
        case .object(let members): return members.mapValues(\.foundation)
        case .array(let items): return items.map(\.foundation)
        case .string(let text): return text
        case .number(let value):
            // Whole numbers as Int, as `JSONSerialization` gives them (`as? Int` must find them).
            if value == value.rounded(), abs(value) < 9e15 { return Int(value) }
            return value
        case .bool(let value): return value
        case .null: return NSNull()
        }
    }
}

/// Foundation values written as JSON: the one place the server calls
/// `JSONSerialization.data(withJSONObject:)` (a test finds any other). Its argument is statically
/// a dictionary or an array — on Linux a top-level string or number traps instead of throwing —
/// and is checked with `isValidJSONObject` first, so a value that is not JSON throws.
enum JSONText {
    static func data(_ object: [String: Any], sortedKeys: Bool = false) throws -> Data {
        try serialize(object, sortedKeys: sortedKeys)
    }

    static func data(_ array: [Any]) throws -> Data {
        try serialize(array, sortedKeys: false)
    }

    static func string(_ object: [String: Any], sortedKeys: Bool = false) throws -> String {
        String(decoding: try data(object, sortedKeys: sortedKeys), as: UTF8.self)
    }

    private static func serialize(_ container: Any, sortedKeys: Bool) throws -> Data {
        guard JSONSerialization.isValidJSONObject(container) else { throw KeyfobError.invalid("a value is not JSON") }
        return try JSONSerialization.data(
            withJSONObject: container, options: sortedKeys ? [.sortedKeys, .withoutEscapingSlashes] : [.withoutEscapingSlashes])
    }
}
