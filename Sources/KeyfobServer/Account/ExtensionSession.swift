import Foundation
import HTTPTypes
import Hummingbird
import KeyfobStore

/// The Keyfob browser extension's session (Extension/, docs/api.md "The browser extension").
///
///     POST /api/extension/session {"confirmation": <assertion for extension.connect>}
///       → {"token", "username", "expiresAt"}
///
/// Only Keyfob's own page asks (a cookie session, so the browser's Origin check applies), with a
/// passkey assertion made for it; the page hands the token to the extension, which keeps it in
/// its own storage. The session is marked `extension`: its Polkadot requests are answered as the
/// browser-verified origins the extension reports, and "Sign out everywhere" ends it like any other.
extension AccountController {
    static let extensionKind = "extension"

    struct ExtensionSessionReply: Encodable {
        let token: String
        let username: String
        let expiresAt: Date
    }

    @Sendable func connectExtension(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        guard auth.viaCookie else {
            throw KeyfobError(
                .permissionDenied, "the extension is connected from Keyfob's own page, signed in in the browser", status: .forbidden)
        }
        let assertion = try await ActionConfirmations.assertion(in: request)
        let (credential, _) = try await confirmations.verify(assertion, .connectExtension, target: "", for: auth)
        var new = sessions.create(userID: auth.user.id, unlocked: false, credentialID: credential.id)
        new.record.kind = Self.extensionKind
        try await store.addSession(new.record)
        events.record(.extensionConnected, username: auth.user.username)
        return jsonResponse(
            ExtensionSessionReply(token: new.token, username: auth.user.username, expiresAt: new.record.expiresAt), status: .created)
    }
}

extension Sessions.Authenticated {
    /// The Keyfob browser extension, with the session a Keyfob page gave it.
    var isExtension: Bool { !viaCookie && session.kind == AccountController.extensionKind }
}
