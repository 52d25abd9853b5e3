import Foundation
import HTTPTypes
import HummingbirdTesting
import KeyfobStore
import NIOCore
import Testing

@testable import KeyfobServer

/// Who gets into `/dashboard`, and what everyone else sees there (never a silent redirect).
@Suite struct OperatorGateTests {
    func page(_ client: Client, _ token: String?) async throws -> (status: HTTPResponse.Status, body: String) {
        let response = try await client.raw.execute(uri: "/dashboard", method: .get, headers: token.map(Client.bearer) ?? [:], body: nil)
        return (response.status, String(buffer: response.body))
    }

    func confirm(_ client: Client, _ token: String, adminToken: String) async throws -> TestResponse {
        var headers = Client.bearer(token)
        headers[.contentType] = "application/x-www-form-urlencoded"
        return try await client.raw.execute(
            uri: "/dashboard/confirm", method: .post, headers: headers, body: ByteBuffer(string: "token=\(adminToken)"))
    }

    /// The natural order on a fresh install: start with `--admin ops`, then sign up as ops.
    @Test func anAccountNamedBeforeItExistedConfirmsOnceWithTheAdminToken() async throws {
        let harness = try Harness()
        let admins = try await Admins.bind(["ops"], store: harness.store, now: harness.clock.now)
        harness.clock.advance(10)
        let (adminToken, hash) = AdminToken.generate()
        try await harness.store.setMetaValue(AdminController.tokenMetaName, hash)
        try await harness.run(admins: admins) { client in
            let (ops, _) = try await client.newAccount("ops")
            let (eve, _) = try await client.newAccount("eve")
            // Nobody signed in: what the page is, and a sign-in that comes back here.
            let nobody = try await page(client, nil)
            #expect(nobody.body.contains("The dashboard is for operators") && nobody.body.contains(#"href="/?next=/dashboard""#))
            // Signed in, not named: told so, no data.
            let other = try await page(client, eve)
            #expect(other.status == .forbidden && other.body.contains("not an operator") && !other.body.contains("dashboard.js"))
            // Named after the account could be taken by anyone: asked for the token, not let in yet.
            let asked = try await page(client, ops)
            #expect(asked.body.contains(#"action="/dashboard/confirm""#) && !asked.body.contains("dashboard.js"))
            #expect(try await client.call(.get, "/api/admin/users", headers: Client.bearer(ops)).status == .forbidden)
            // A wrong token is refused, with the field marked.
            let wrong = try await confirm(client, ops, adminToken: "kfa_not-the-token")
            #expect(wrong.status == .forbidden && String(buffer: wrong.body).contains("That is not this server"))
            // Someone --admin does not name cannot use the token to get in.
            #expect(try await confirm(client, eve, adminToken: adminToken).status == .forbidden)
            #expect(try await client.call(.get, "/api/admin/users", headers: Client.bearer(eve)).status == .forbidden)
            // The right token: back to the dashboard, which now opens.
            let right = try await confirm(client, ops, adminToken: adminToken)
            #expect(right.status == .seeOther && right.headers[.location] == "/dashboard")
            #expect(try await client.call(.get, "/api/admin/users", headers: Client.bearer(ops)).status == .ok)
            #expect(try await page(client, ops).body.contains("dashboard.js"))
        }
    }

    /// `keyfob admins add|remove` bind accounts (not names) and override `--admin`.
    @Test func bindingsAddOperatorsAndRemovalOverridesTheFlag() async throws {
        let harness = try Harness()
        try await harness.run { client in
            _ = try await client.newAccount("root")
            _ = try await client.newAccount("carol")
        }
        let admins = try await Admins.bind(["root"], store: harness.store, now: harness.clock.now + 1)  // root existed first
        harness.clock.advance(10)
        try await harness.run(admins: admins) { _ in
            let rootUser = try #require(try await harness.store.user(named: "root"))
            let carolUser = try #require(try await harness.store.user(named: "carol"))
            #expect(try await admins.isOperator(rootUser))
            #expect(try await !admins.isOperator(carolUser))
            try await Admins.bind(carolUser, isOperator: true, in: harness.store, at: harness.clock.now)
            try await Admins.bind(rootUser, isOperator: false, in: harness.store, at: harness.clock.now)
            #expect(try await admins.isOperator(carolUser))
            #expect(try await !admins.isOperator(rootUser))
            let bindings = try await Admins.bindings(in: harness.store)
            #expect(bindings[carolUser.id]?.isOperator == true && bindings[rootUser.id]?.isOperator == false)
        }
    }
}
