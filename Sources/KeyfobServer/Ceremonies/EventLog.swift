import Foundation
import Logging

/// Ceremony outcomes as structured log lines (and, later, the dashboard's stream).
/// Never records secrets: usernames, codes and counts only.
struct EventLog: Sendable {
    enum Kind: String, Sendable {
        case registered = "registration.verified"
        case registrationFailed = "registration.failed"
        case signedIn = "authentication.verified"
        case signInFailed = "authentication.failed"
        case signedOut = "session.ended"
        case credentialRemoved = "credential.removed"
        case extensionConnected = "extension.connected"
    }

    let logger: Logger
    var metrics: KeyfobMetrics? = nil
    var feed: ActivityFeed? = nil
    var now: @Sendable () -> Date = { Date() }
    /// The logger's line handler when lines can go straight into it, found once.
    private let lines: LineLogHandler?

    init(logger: Logger, metrics: KeyfobMetrics? = nil, feed: ActivityFeed? = nil, now: @escaping @Sendable () -> Date = { Date() }) {
        self.logger = logger
        self.metrics = metrics
        self.feed = feed
        self.now = now
        lines = LineLogHandler.direct(for: logger)
    }

    func record(_ kind: Kind, ip: String? = nil, username: String?, code errorCode: ErrorCode? = nil, detail: String? = nil) {
        let code = errorCode?.rawValue
        metrics?.event(kind.rawValue, code: code)
        let category = kind == .signedOut || kind == .credentialRemoved ? "session" : "ceremony"
        feed?.publish(
            Activity(
                time: now(), category: category, event: kind.rawValue, user: username, client: nil, method: nil,
                kind: nil, outcome: code == nil ? "ok" : "failed", code: code, ip: ip))
        logger.log(code == nil ? .info : .notice, kind.rawValue, direct: lines) { fields in
            if let code { fields.add("code", code) }
            if let detail { fields.add("detail", detail) }
            fields.add("event", kind.rawValue)
            if let ip { fields.add("ip", ip) }
            if let username { fields.add("user", username) }
        }
    }
}
