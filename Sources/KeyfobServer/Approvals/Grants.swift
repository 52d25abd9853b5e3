import Foundation
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Nostr
import WebAuthn

/// Remembered decisions (DESIGN.md §4.6): per user × client × method (× kind for sign_event).
/// A grant skips the approval page, never the lock. Dangerous kinds are never allowed in advance.
struct Grants: Sendable {
    let store: any ApprovalStore
    let now: @Sendable () -> Date

    enum Decision: Equatable { case allow, deny, ask }

    /// How long a decision is remembered: `once` not at all, `forever` until revoked.
    enum Remember: String, CaseIterable, Sendable, Decodable {
        case once, hour, day, forever

        /// Seconds; 0 for `once`, nil for `forever`.
        var duration: TimeInterval? {
            switch self {
            case .once: 0
            case .hour: 3600
            case .day: 86_400
            case .forever: nil
            }
        }

        init(from decoder: any Decoder) throws {
            guard let value = Self(rawValue: try decoder.singleValueContainer().decode(String.self)) else {
                throw KeyfobError.invalid("remember must be once, hour, day or forever")
            }
            self = value
        }
    }

    /// A set of grants given with a client's first approval (see `apply(preset:)`); `requested`
    /// is what a NIP-46 client asked for in `connect`.
    enum Preset: String, CaseIterable, Sendable, Decodable {
        case ask, everyday, trusted, requested

        init(from decoder: any Decoder) throws {
            guard let value = Self(rawValue: try decoder.singleValueContainer().decode(String.self)) else {
                throw KeyfobError.invalid("preset must be ask, everyday, trusted or requested")
            }
            self = value
        }
    }

    /// Kinds the "everyday use" preset allows for an hour: notes, reposts, reactions, zap requests,
    /// comments, long-form articles; plus the encrypt/decrypt methods.
    static let everydayKinds = [1, 6, 7, 9734, 1111, 30023]
    static let presets = ["ask", "everyday", "trusted"]

    static func isDangerous(_ method: String, kind: Int?) -> Bool {
        method == SignerMethod.signEvent.rawValue && kind.map(SignerCall.dangerousKinds.contains) == true
    }

    /// What the user decided before for this request, if anything. A deny beats an allow; an
    /// allow never covers a dangerous kind.
    func decision(userID: String, client: String, method: String, kind: Int?) async throws -> Decision {
        let matching = try await store.grants(ofUser: userID, now: now()).filter { grant in
            guard grant.client == client, grant.method == method else { return false }
            if method != SignerMethod.signEvent.rawValue { return true }
            return grant.kind == nil ? !grant.allow || !Self.isDangerous(method, kind: kind) : grant.kind == kind
        }
        if matching.contains(where: { !$0.allow }) { return .deny }
        if matching.contains(where: \.allow), !Self.isDangerous(method, kind: kind) { return .allow }
        return .ask
    }

    /// Remembers one decision. `once` remembers nothing; an allow for a dangerous kind is refused.
    func remember(_ choice: Remember, allow: Bool, userID: String, client: String, method: String, kind: Int?) async throws {
        let duration = choice.duration
        if duration == 0 { return }
        guard !allow || !Self.isDangerous(method, kind: kind) else {
            throw KeyfobError(
                .permissionDenied, "kind \(kind ?? 0) can change or impersonate your account: it is asked every time",
                status: .forbidden)
        }
        try await insert(
            userID: userID, client: client, method: method,
            kind: method == SignerMethod.signEvent.rawValue ? kind : nil, allow: allow, duration: duration)
    }

    /// A preset for a client's first request: "everyday" or "trusted" (see `durations`, `everydayKinds`).
    func apply(preset: Preset, userID: String, client: String) async throws {
        let others: [SignerMethod] = [.getPublicKey, .nip04Encrypt, .nip04Decrypt, .nip44Encrypt, .nip44Decrypt]
        switch preset {
        case .ask: return
        case .everyday:
            for kind in Self.everydayKinds {
                try await insert(userID: userID, client: client, method: SignerMethod.signEvent.rawValue, kind: kind, allow: true, duration: 3600)
            }
            for method in others {
                try await insert(userID: userID, client: client, method: method.rawValue, kind: nil, allow: true, duration: 3600)
            }
        case .trusted:
            // Every kind that is not dangerous (kind nil), and every other method, until revoked.
            for method in [SignerMethod.signEvent, .decryptZapEvent] + others {
                try await insert(userID: userID, client: client, method: method.rawValue, kind: nil, allow: true, duration: nil)
            }
        case .requested:
            throw KeyfobError.invalid("the requested preset is for NIP-46 clients, which ask for permissions when they connect")
        }
    }

    /// The permissions a NIP-46 client asked for in `connect` (`sign_event:1,nip44_encrypt`), allowed
    /// until revoked (or the client is disconnected). Dangerous kinds and unknown methods are
    /// skipped: those are asked every time. Returns what was granted.
    @discardableResult
    func apply(requested perms: [NIP46Permission], userID: String, client: String) async throws -> [NIP46Permission] {
        var granted: [NIP46Permission] = []
        for perm in perms {
            guard let method = SignerMethod(rawValue: perm.method), method != .decryptZapEvent,
                !Self.isDangerous(method.rawValue, kind: perm.kind)
            else { continue }
            // A kind only narrows sign_event; `sign_event` alone is every kind that is not dangerous.
            let kind = method == .signEvent ? perm.kind : nil
            try await insert(userID: userID, client: client, method: method.rawValue, kind: kind, allow: true, duration: nil)
            granted.append(NIP46Permission(method: method.rawValue, kind: kind))
        }
        return granted
    }

    private func insert(userID: String, client: String, method: String, kind: Int?, allow: Bool, duration: TimeInterval?) async throws {
        let created = now()
        try await store.insertGrant(
            GrantRecord(
                id: Base64URL.encode(randomBytes(16)), userID: userID, client: client, method: method, kind: kind,
                allow: allow, createdAt: created, expiresAt: duration.map { created.addingTimeInterval($0) }))
    }
}
