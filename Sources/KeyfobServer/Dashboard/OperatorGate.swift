import Foundation
import Hummingbird
import KeyfobCrypto
import KeyfobStore

/// `/dashboard` for whoever is not (yet) an operator: what the page is and how to get in, never a
/// silent redirect. An account `--admin` names but created after it was named confirms with the
/// admin token here, once (`POST /dashboard/confirm`, a plain form: no script).
extension AdminController {
    @Sendable func dashboardPage(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        guard let auth = try await sessions.authenticate(request) else {
            return gate(
                title: "The dashboard is for operators",
                lines: ["It shows this server's accounts and activity to the people who run it. Sign in with an operator's account."],
                action: .signIn)
        }
        if try await admins.isOperator(auth.user) { return try page("dashboard.html") }
        if admins.isNamed(auth.user) {
            return gate(
                title: "Confirm you run this server",
                lines: [
                    "This server names \(auth.user.username) as an operator (--admin), but this account was created after it was named, so anyone could have taken the name.",
                    "Prove it is yours with the admin token (printed by keyfob admin-token, or in the file named in the server's log at first start). This is asked once.",
                ],
                action: .confirm(error: nil))
        }
        return gate(
            title: "The dashboard is for operators",
            lines: [
                "You are signed in as \(auth.user.username), which is not an operator of this server.",
                "An operator makes an account one with keyfob admins add NAME (or --admin NAME).",
            ],
            action: .account, status: .forbidden)
    }

    /// The token confirmation: the signed-in account must be one `--admin` names.
    @Sendable func confirmOperator(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        guard let auth = try await sessions.authenticate(request), admins.isNamed(auth.user) else {
            return gate(
                title: "Nothing to confirm", lines: ["Sign in with the account the server names with --admin first."],
                action: .signIn, status: .forbidden)
        }
        let form = try await request.formFields(limit: 4096)
        let token = (form["token"] ?? "").trimmingCharacters(in: .whitespaces)
        guard token.hasPrefix("kfa_"), let stored = try await store.metaValue(Self.tokenMetaName),
            constantTimeEqual(stored, sha256(Array(token.utf8)))
        else {
            return gate(
                title: "Confirm you run this server",
                lines: ["Type the admin token (kfa_…) this server printed; it is shown once by keyfob admin-token."],
                action: .confirm(error: "That is not this server's admin token (was it rotated?)."), status: .forbidden)
        }
        try await Admins.bind(auth.user, isOperator: true, in: store, at: now())
        record("admin.confirmed", by: auth.user.username, target: auth.user.username)
        return Response(status: .seeOther, headers: [.location: "/dashboard", .cacheControl: "no-store"])
    }

    enum GateAction {
        case signIn, account
        case confirm(error: String?)
    }

    func gate(title: String, lines: [String], action: GateAction, status: HTTPResponse.Status = .ok) -> Response {
        let e = HTMLPage.escape
        var body = """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Keyfob — \(e(title))</title><link rel="icon" href="/favicon.svg" type="image/svg+xml">
            <link rel="stylesheet" href="/style.css"></head>
            <body>\(HTMLPage.header)<main><h1>\(e(title))</h1><section class="card" id="operator-gate">
            """
        for line in lines { body += "<p>\(e(line))</p>" }
        switch action {
        case .signIn:
            body += #"<a id="sign-in" class="button primary" href="/?next=/dashboard">Sign in</a>"#
        case .account:
            body += #"<a id="account" class="button secondary" href="/account.html">Back to your account</a>"#
        case .confirm(let error):
            body += """
                <form method="post" action="/dashboard/confirm" class="stack">
                <label for="token">Admin token</label>
                <input id="token" name="token" type="password" autocomplete="off" spellcheck="false" required placeholder="kfa_…"
                \(error == nil ? "" : #"aria-invalid="true" aria-describedby="token-error""#)>
                \(error.map { #"<p id="token-error" class="field-error">\#(e($0))</p>"# } ?? "")
                <button id="confirm" type="submit">Confirm</button></form>
                """
        }
        body += "</section></main></body></html>"
        // Under the usual no-referrer policy a browser posts this page's form with `Origin: null`,
        // which the CSRF check refuses; same-origin still sends no Referer to any other site.
        return Response(
            status: status,
            headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store", .init("Referrer-Policy")!: "same-origin"],
            body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
