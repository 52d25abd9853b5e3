import Foundation
import KeyfobStore

/// Grants a session writes must not outlive it. A request checks its session at the top, then
/// writes grants; "Sign out everywhere" may commit in between, deleting every grant it can see
/// but not those written after it. So the session is read again after the writes: gone, and this
/// client's grants go too and the request fails. (Either the sign-out committed before that read,
/// and this removes what it missed, or after it, and it removed the writes itself.)
enum SessionBound {
    static func recheck(
        _ auth: Sessions.Authenticated, client: String, sessions: any SessionStore, store: any ApprovalStore, now: Date
    ) async throws {
        guard try await sessions.session(tokenHash: auth.session.tokenHash, now: now) == nil else { return }
        for grant in try await store.grants(ofUser: auth.user.id, now: now) where grant.client == client {
            _ = try await store.deleteGrant(id: grant.id, ofUser: auth.user.id)
        }
        throw KeyfobError.unauthorized
    }
}
