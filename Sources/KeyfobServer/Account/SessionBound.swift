import Foundation
import KeyfobStore

/// Grants a session writes must not outlive it. A request checks its session at the top, then
/// writes grants; "Sign out everywhere" may commit in between, deleting every grant it can see
/// but not those written after it. So the session is read again after the writes: gone, and this
/// client's grants go too and the request fails. (Either the sign-out committed before that read,
/// and this removes what it missed, or after it, and it removed the writes itself. The read waits
/// for a sign-out in progress, `sessionRemains`: on PostgreSQL one that had deleted the session and
/// the grants it could see, but not committed, would otherwise read as not yet signed out.)
enum SessionBound {
    static func recheck(
        _ auth: Sessions.Authenticated, client: String, sessions: any SessionStore, store: any ApprovalStore, now: Date
    ) async throws {
        // A read that fails (a lock wait past its bound, the database away) counts as gone: the
        // grants go and the request fails, never the other way round.
        var failure: (any Error)?
        do {
            if try await sessions.sessionRemains(tokenHash: auth.session.tokenHash, now: now) { return }
        } catch { failure = error }
        for grant in try await store.grants(ofUser: auth.user.id, now: now) where grant.client == client {
            _ = try await store.deleteGrant(id: grant.id, ofUser: auth.user.id)
        }
        throw failure ?? KeyfobError.unauthorized
    }
}
