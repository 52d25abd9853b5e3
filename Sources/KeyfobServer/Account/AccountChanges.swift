import Foundation
import KeyfobStore

extension AuditStore {
    /// An account change in the user's history (the account page shows recent ones at the top:
    /// "a passkey was added … not you?"). `method`: `add_passkey`, `remove_passkey`, `revoke_sessions`.
    func auditAccountChange(userID: String, method: String, at date: Date) async {
        _ = try? await appendAudit(
            AuditRecord(
                userID: userID, at: date, client: "account", transport: "rest", method: method,
                outcome: .approved))
    }
}
