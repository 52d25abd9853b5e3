import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import KeyfobStore
import WebAuthn

/// The Keyfob browser extension's session (Extension/, docs/api.md "The browser extension").
///
///     POST /api/extension/session {"confirmation": <assertion for extension.connect>, "claim": H}
///       → 201 {"username", "expiresAt"}
///
/// Only Keyfob's own page asks (a cookie session, so the browser's Origin check applies), with a
/// passkey assertion made for it. The token is never in the page or the reply: the extension draws
/// 32 random bytes S, keeps them, and gives the page only `claim` = SHA-256(S) (base64url), which
/// the session is stored under — sessions are stored by their token's SHA-256 — so S is the token
/// and only the extension has it. This works in every browser (Firefox has no page-to-extension
/// messaging). The session is marked `extension`: its Polkadot requests are answered as the
/// browser-verified origins the extension reports, and "Sign out everywhere" ends it like any other.
extension AccountController {
    static let extensionKind = "extension"

    struct ExtensionSessionReply: Encodable {
        let username: String
        let expiresAt: Date
    }

    struct ExtensionSessionBody: Decodable {
        var confirmation: AuthenticationCredential?
        /// SHA-256 of the token the extension holds, base64url (43 characters).
        var claim: String?
    }

    @Sendable func connectExtension(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let auth = try await sessions.require(request)
        guard auth.viaCookie else {
            throw KeyfobError(
                .permissionDenied, "the extension is connected from Keyfob's own page, signed in in the browser", status: .forbidden)
        }
        let body = try await request.decodeJSON(ExtensionSessionBody.self, limit: 16 * 1024, emptyIsObject: true)
        guard let claim = body.claim, claim.utf8.count == 43, let tokenHash = Base64URL.decode(claim), tokenHash.count == 32 else {
            throw KeyfobError.invalid("claim must be the SHA-256 of the extension's token, base64url (the Keyfob extension puts it on this page)")
        }
        // A claim names one session: a second use (or any session's hash, expired or not) is
        // refused before the passkey confirmation is spent.
        guard try await store.session(tokenHash: tokenHash, now: .distantPast) == nil else {
            throw KeyfobError(.invalidRequest, "this claim was used already; reload this page and try again", status: .conflict)
        }
        let (credential, _) = try await confirmations.verify(body.confirmation, .connectExtension, target: "", for: auth)
        var record = sessions.create(userID: auth.user.id, unlocked: false, credentialID: credential.id).record
        record.tokenHash = tokenHash
        record.kind = Self.extensionKind
        // Only while the page's own session lasts: one a sign-out everywhere ended meanwhile
        // gives no session to anyone (401).
        do { try await store.addSession(record, parent: auth.session.tokenHash) } catch StoreError.notFound { throw KeyfobError.unauthorized }
        events.record(.extensionConnected, username: auth.user.username)
        return jsonResponse(ExtensionSessionReply(username: auth.user.username, expiresAt: record.expiresAt), status: .created)
    }
}

extension Sessions.Authenticated {
    /// The Keyfob browser extension, with the session a Keyfob page gave it.
    var isExtension: Bool { !viaCookie && session.kind == AccountController.extensionKind }
}
