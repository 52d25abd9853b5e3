import Foundation
import KeyfobCodecs

/// NIP-01's relay protocol, the frames only: what a client sends a relay (`EVENT`, `REQ`,
/// `CLOSE`), filters and whether an event matches one, and what a relay answers (`EVENT`, `OK`,
/// `EOSE`, `CLOSED`, `NOTICE`). Parsing is bounded by `RelayLimits`; no transport here.
public enum ClientMessage: Sendable, Equatable {
    case event(Event)
    case request(subscription: String, filters: [RelayFilter])
    case close(subscription: String)

    /// Why a frame was refused, with what the relay's answer needs: the event id for `OK false`,
    /// the subscription for `CLOSED`; neither means `NOTICE`.
    public struct Refusal: Error, Sendable, Equatable {
        public let reason: String
        public var eventID: String?
        public var subscription: String?

        /// The relay's answer, as NIP-01 says: `OK false` for an event, `CLOSED` for a
        /// subscription, else `NOTICE`.
        public var answer: String {
            if let eventID { return RelayAnswer.ok(eventID: eventID, accepted: false, message: reason) }
            if let subscription { return RelayAnswer.closed(subscription: subscription, message: reason) }
            return RelayAnswer.notice(reason)
        }
    }

    public static func parse(_ text: String, limits: RelayLimits = RelayLimits()) throws(Refusal) -> ClientMessage {
        guard text.utf8.count <= limits.maxMessageBytes else {
            throw Refusal(reason: "invalid: messages are at most \(limits.maxMessageBytes) bytes")
        }
        guard let array = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [Any], let type = array.first as? String else {
            throw Refusal(reason: "invalid: a message is a JSON array that starts with its type")
        }
        switch type {
        case "EVENT":
            guard array.count == 2, let object = array[1] as? [String: Any] else {
                throw Refusal(reason: "invalid: EVENT carries one event object")
            }
            let claimedID = (object["id"] as? String).flatMap { $0.utf8.count == 64 ? $0 : nil }
            let event: Event
            do { event = try Event.parse(object: object) } catch {
                throw Refusal(reason: "invalid: \(error.message)", eventID: claimedID)
            }
            guard event.isValid else { throw Refusal(reason: "invalid: bad id or signature", eventID: Hex.encode(event.id)) }
            return .event(event)
        case "REQ":
            guard array.count >= 2, let subscription = array[1] as? String else {
                throw Refusal(reason: "invalid: REQ needs a subscription id")
            }
            guard !subscription.isEmpty, subscription.utf8.count <= 64 else {
                throw Refusal(reason: "invalid: a subscription id is 1 to 64 characters")
            }
            let rawFilters = array.dropFirst(2)
            guard !rawFilters.isEmpty, rawFilters.count <= limits.maxFiltersPerRequest else {
                throw Refusal(reason: "invalid: a REQ has 1 to \(limits.maxFiltersPerRequest) filters", subscription: subscription)
            }
            var filters: [RelayFilter] = []
            for raw in rawFilters {
                guard let object = raw as? [String: Any] else {
                    throw Refusal(reason: "invalid: a filter is an object", subscription: subscription)
                }
                do { filters.append(try RelayFilter(object, limits: limits)) } catch {
                    throw Refusal(reason: "invalid: \(error.message)", subscription: subscription)
                }
            }
            return .request(subscription: subscription, filters: filters)
        case "CLOSE":
            guard array.count == 2, let subscription = array[1] as? String, subscription.utf8.count <= 64 else {
                throw Refusal(reason: "invalid: CLOSE carries a subscription id")
            }
            return .close(subscription: subscription)
        default:
            throw Refusal(reason: "unsupported: \(type.prefix(16)) (this relay speaks EVENT, REQ and CLOSE)")
        }
    }
}

/// How much one client may ask of a relay.
public struct RelayLimits: Sendable {
    public var maxMessageBytes = 128 * 1024
    public var maxFiltersPerRequest = 10
    /// Values in one filter field (ids, authors, kinds, each tag).
    public var maxValuesPerField = 256

    public init(maxMessageBytes: Int = 128 * 1024, maxFiltersPerRequest: Int = 10, maxValuesPerField: Int = 256) {
        self.maxMessageBytes = maxMessageBytes
        self.maxFiltersPerRequest = maxFiltersPerRequest
        self.maxValuesPerField = maxValuesPerField
    }
}

/// A NIP-01 filter: every field given must match (ids and authors exactly, as 64-hex values).
public struct RelayFilter: Sendable, Equatable {
    public var ids: Set<String>?
    public var authors: Set<String>?
    public var kinds: Set<Int>?
    /// `#p` → values, `#e` → values, … (single-letter tags).
    public var tags: [String: Set<String>] = [:]
    public var since: Int64?
    public var until: Int64?
    public var limit: Int?

    public init(
        ids: Set<String>? = nil, authors: Set<String>? = nil, kinds: Set<Int>? = nil, tags: [String: Set<String>] = [:],
        since: Int64? = nil, until: Int64? = nil, limit: Int? = nil
    ) {
        self.ids = ids
        self.authors = authors
        self.kinds = kinds
        self.tags = tags
        self.since = since
        self.until = until
        self.limit = limit
    }

    init(_ object: [String: Any], limits: RelayLimits) throws(NostrError) {
        func strings(_ key: String) throws(NostrError) -> Set<String>? {
            guard let value = object[key] else { return nil }
            guard let list = value as? [Any], list.count <= limits.maxValuesPerField else {
                throw .content("\(key) is a list of at most \(limits.maxValuesPerField) strings")
            }
            var out = Set<String>()
            for item in list {
                guard let text = item as? String, text.utf8.count <= 256 else { throw .content("\(key) holds strings") }
                out.insert(text)
            }
            return out
        }
        func integer(_ key: String) throws(NostrError) -> Int64? {
            guard let value = object[key] else { return nil }
            guard let number = value as? NSNumber, let whole = Int64(exactly: number.doubleValue),
                whole >= 0, whole <= Event.maxTimestamp
            else {
                throw .content("\(key) is a whole number")
            }
            return whole
        }
        for key in object.keys {
            let known =
                ["ids", "authors", "kinds", "since", "until", "limit"].contains(key)
                || (key.hasPrefix("#") && key.count == 2 && key.last!.isLetter)
            guard known else { throw .content("unknown filter field \(key.prefix(16))") }
        }
        ids = try strings("ids")
        authors = try strings("authors")
        if let value = object["kinds"] {
            guard let list = value as? [Any], list.count <= limits.maxValuesPerField else { throw .content("kinds is a list of numbers") }
            var kinds = Set<Int>()
            for item in list {
                guard let number = item as? NSNumber, let kind = Int(exactly: number.doubleValue), Event.kinds.contains(kind) else {
                    throw .content("kinds holds numbers 0…65535")
                }
                kinds.insert(kind)
            }
            self.kinds = kinds
        }
        for key in object.keys where key.hasPrefix("#") {
            tags[String(key.dropFirst())] = try strings(key)
        }
        since = try integer("since")
        until = try integer("until")
        limit = try integer("limit").map { Int(min($0, 10_000)) }
    }

    /// Whether `event` passes every field this filter gives.
    public func matches(_ event: Event) -> Bool {
        if let ids, !ids.contains(Hex.encode(event.id)) { return false }
        if let authors, !authors.contains(event.pubkey.hex) { return false }
        if let kinds, !kinds.contains(event.kind) { return false }
        if let since, event.createdAt < since { return false }
        if let until, event.createdAt > until { return false }
        for (name, values) in tags {
            guard event.tags.contains(where: { $0.count >= 2 && $0[0] == name && values.contains($0[1]) }) else { return false }
        }
        return true
    }
}

/// What a relay sends, as NIP-01 JSON text.
public enum RelayAnswer {
    public static func event(subscription: String, event: Event) -> String {
        var out = Array("[\"EVENT\",".utf8)
        Event.appendJSONString(subscription, to: &out)
        out.append(UInt8(ascii: ","))
        return String(decoding: out, as: UTF8.self) + event.json + "]"
    }

    public static func ok(eventID: String, accepted: Bool, message: String) -> String {
        var out = Array("[\"OK\",".utf8)
        Event.appendJSONString(eventID, to: &out)
        out += Array(",\(accepted),".utf8)
        Event.appendJSONString(message, to: &out)
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    public static func endOfStoredEvents(subscription: String) -> String { frame("EOSE", subscription) }
    public static func closed(subscription: String, message: String) -> String { frame("CLOSED", subscription, message) }
    public static func notice(_ message: String) -> String { frame("NOTICE", message) }

    private static func frame(_ type: String, _ values: String...) -> String {
        var out = Array("[\"\(type)\"".utf8)
        for value in values {
            out.append(UInt8(ascii: ","))
            Event.appendJSONString(value, to: &out)
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }
}
