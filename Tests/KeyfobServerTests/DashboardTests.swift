import Foundation
import HTTPTypes
import KeyfobStore
import NIOConcurrencyHelpers
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

@Suite struct DashboardTests {
    /// An admin bound before the name was configured, the token, a rotated-out token, a user, nobody.
    @Test func onlyOperatorsSeeData() async throws {
        let harness = try Harness()
        let rootToken = NIOLockedValueBox("")
        try await harness.run { client in
            let (token, _) = try await client.newAccount("root")  // exists before it is named admin
            rootToken.withLockedValue { $0 = token }
        }
        let admins = try await Admins.bind(["root", "mallory"], store: harness.store, now: harness.clock.now + 1)
        harness.clock.advance(10)
        let (token, hash) = AdminToken.generate()
        try await harness.store.setMetaValue(AdminController.tokenMetaName, hash)
        try await harness.run(admins: admins) { client in
            let (user, _) = try await client.newAccount("mallory")  // registered after the name was configured
            let root = rootToken.withLockedValue { $0 }
            #expect(try await client.call(.get, "/api/admin/users").status == .unauthorized)
            #expect(try await client.call(.get, "/api/admin/users", headers: Client.bearer(user)).status == .forbidden)
            #expect(try await client.call(.get, "/api/admin/users", headers: Client.bearer(root)).status == .ok)
            #expect(try await client.call(.get, "/api/admin/stats", headers: Client.bearer(token)).status == .ok)
            #expect(try await client.call(.get, "/api/admin/users", headers: Client.bearer("kfa_wrong")).status == .unauthorized)
            // Who is not an operator learns nothing of which names exist: the same answer for both.
            for name in ["mallory", "nobody"] {
                #expect(try await client.call(.delete, "/api/admin/users/\(name)", json: [:]).status == .unauthorized)
                #expect(try await client.call(.delete, "/api/admin/users/\(name)", json: [:], headers: Client.bearer(user)).status == .forbidden)
                let revoke = try await client.call(.post, "/api/admin/users/\(name)/revoke-sessions", json: [:], headers: Client.bearer(user))
                #expect(revoke.status == .forbidden, "\(revoke.json)")
            }
            let page = try await client.raw.execute(uri: "/dashboard", method: .get, headers: Client.bearer(user), body: nil)
            #expect(!String(buffer: page.body).contains("dashboard.js"))  // the sign-in page, no data
            let adminPage = try await client.raw.execute(uri: "/dashboard", method: .get, headers: Client.bearer(root), body: nil)
            #expect(String(buffer: adminPage.body).contains("dashboard.js"))
            let users = try await client.call(.get, "/api/admin/users", headers: Client.bearer(token))["users"] as! [[String: Any]]
            #expect(Set(users.map { $0["username"] as! String }) == ["mallory", "root"])
            #expect(users.allSatisfy { $0["hasNostrKey"] as? Bool == true && ($0["passkeys"] as? [Any])?.count == 1 })
            let found = try await client.call(.get, "/api/admin/users?query=mal", headers: Client.bearer(token))["users"] as! [[String: Any]]
            #expect(found.map { $0["username"] as! String } == ["mallory"])
            // Rotated: the old token stops working at once.
            let (_, newHash) = AdminToken.generate()
            try await harness.store.setMetaValue(AdminController.tokenMetaName, newHash)
            #expect(try await client.call(.get, "/api/admin/stats", headers: Client.bearer(token)).status == .unauthorized)
        }
    }

    /// #55: the operator's live stream ends with its operator — when the admin token it was opened
    /// with is rotated, when `keyfob admins remove` unbinds the account, and when the operator signs
    /// out everywhere — instead of delivering every user's activity on.
    @Test func anOperatorStreamEndsWithItsOperator() async throws {
        let harness = try Harness()
        let root = NIOLockedValueBox<(String, SoftwareAuthenticator)?>(nil)
        try await harness.run { client in
            let created = try await client.newAccount("root")
            root.withLockedValue { $0 = created }
        }
        let admins = try await Admins.bind(["root"], store: harness.store, now: harness.clock.now + 1)
        harness.clock.advance(10)
        let (adminToken, hash) = AdminToken.generate()
        try await harness.store.setMetaValue(AdminController.tokenMetaName, hash)
        try await harness.run(admins: admins) { client in
            var (session, passkey) = try #require(root.withLockedValue { $0 })
            defer { session = "" }
            /// Opens the stream with `headers`, does `end`, then makes activity until the stream ends (10 s at most).
            func ends(_ headers: HTTPFields, after end: @escaping @Sendable () async throws -> Void) async throws -> Bool {
                try await withThrowingTaskGroup(of: Bool.self) { group in
                    group.addTask {
                        _ = try await client.raw.execute(uri: "/api/admin/stream", method: .get, headers: headers, body: nil)
                        return true
                    }
                    group.addTask {
                        try await Task.sleep(for: .milliseconds(200))
                        try await end()
                        for _ in 0..<40 {
                            _ = try await client.newAccount(nil)  // activity the stream would carry
                            try await Task.sleep(for: .milliseconds(250))
                        }
                        return false
                    }
                    let first = try await group.next()!
                    group.cancelAll()
                    return first
                }
            }
            // The admin token rotated.
            #expect(
                try await ends(Client.bearer(adminToken)) {
                    let (_, rotated) = AdminToken.generate()
                    try await harness.store.setMetaValue(AdminController.tokenMetaName, rotated)
                })
            // `keyfob admins remove root`.
            let user = try #require(try await harness.store.user(named: "root"))
            #expect(
                try await ends(Client.bearer(session)) {
                    try await Admins.bind(user, isOperator: false, in: harness.store, at: harness.clock.now)
                })
            try await Admins.bind(user, isOperator: true, in: harness.store, at: harness.clock.now)
            // Signed out everywhere.
            let confirmation = try JSONSerialization.data(
                withJSONObject: ["confirmation": try await client.confirmation("sessions.revoke", by: &passkey, token: session)])
            let auth = Client.bearer(session)
            let signedOut = try await ends(auth) {
                let out = try await client.call(.post, "/logout?everywhere=1", body: [UInt8](confirmation), headers: auth)
                guard out.status == .ok else { throw KeyfobError.invalid("sign out everywhere: \(out.json)") }
            }
            #expect(signedOut)
        }
    }

    @Test func theEventsCarryCeremoniesFailuresAndSignerOperations() async throws {
        let harness = try Harness()
        let (token, hash) = AdminToken.generate()
        try await harness.store.setMetaValue(AdminController.tokenMetaName, hash)
        try await harness.run { client in
            var (user, authenticator) = try await client.newAccount("lucy")
            _ = try await client.signer("sign_event", ["event": ["kind": 1, "content": "hi"]], token: user)
            var wrong = authenticator
            _ = try await client.signIn(&wrong) { $0.corruptSignature = true }
            _ = try await client.signIn(&authenticator)
            let events = try await client.call(.get, "/api/admin/events", headers: Client.bearer(token))["events"] as! [[String: Any]]
            let names = events.map { $0["event"] as! String }
            #expect(names.contains("registration.verified") && names.contains("authentication.verified"))
            #expect(events.contains { $0["event"] as? String == "authentication.failed" && $0["code"] as? String == "signature_invalid" })
            #expect(events.contains { $0["method"] as? String == "sign_event" && $0["kind"] as? Int == 1 && $0["user"] as? String == "lucy" })
            let failed = try await client.call(.get, "/api/admin/events?outcome=failed", headers: Client.bearer(token))["events"] as! [[String: Any]]
            #expect(!failed.isEmpty && failed.allSatisfy { $0["outcome"] as? String == "failed" })
            let stats = try await client.call(.get, "/api/admin/stats", headers: Client.bearer(token))
            let hour = stats["lastHour"] as! [String: Any]
            #expect(hour["signUps"] as? Int == 1 && hour["signIns"] as? Int == 1)
            #expect((hour["failures"] as? [String: Int])?["signature_invalid"] == 1)
            #expect((stats["health"] as? [String: Any])?["database"] as? String == "ok")
            #expect(!"\(events)".contains(user))
            user = ""
        }
    }

    /// A stolen operator session deletes no one (#24): removing a user or revoking their sessions
    /// needs the operator's passkey, confirmed for that user; the admin token (automation) does
    /// not, and each is logged with who did it.
    @Test func destructiveOperatorActionsNeedTheOperatorsPasskey() async throws {
        let harness = try Harness()
        let rootKey = NIOLockedValueBox<SoftwareAuthenticator?>(nil)
        let rootToken = NIOLockedValueBox("")
        try await harness.run { client in
            let (token, passkey) = try await client.newAccount("root")
            rootToken.withLockedValue { $0 = token }
            rootKey.withLockedValue { $0 = passkey }
        }
        let admins = try await Admins.bind(["root"], store: harness.store, now: harness.clock.now + 1)
        let (adminToken, hash) = AdminToken.generate()
        try await harness.store.setMetaValue(AdminController.tokenMetaName, hash)
        try await harness.run(admins: admins) { client in
            var root = rootKey.withLockedValue { $0! }
            let session = rootToken.withLockedValue { $0 }
            _ = try await client.newAccount("ann")
            _ = try await client.newAccount("ben")
            let bare = try await client.call(.delete, "/api/admin/users/ann", headers: Client.bearer(session))
            #expect(bare.status == .forbidden && bare.error == "confirmation_required")
            // Confirmed for another user: refused.
            let wrong = try await client.call(
                .delete, "/api/admin/users/ann",
                json: client.confirmed([:], "admin.remove_user", target: "ben", by: &root, token: session),
                headers: Client.bearer(session))
            #expect(wrong.error == "challenge_not_found")
            #expect(try await harness.store.user(named: "ann") != nil)
            let removed = try await client.call(
                .delete, "/api/admin/users/ann",
                json: client.confirmed([:], "admin.remove_user", target: "ann", by: &root, token: session),
                headers: Client.bearer(session))
            #expect(removed.status == .ok)
            #expect(try await harness.store.user(named: "ann") == nil)
            let revoke = try await client.call(.post, "/api/admin/users/ben/revoke-sessions", json: [:], headers: Client.bearer(session))
            #expect(revoke.error == "confirmation_required")
            #expect(try await client.call(.delete, "/api/admin/users/ben", headers: Client.bearer(adminToken)).status == .ok)
            let lines = harness.logs.lines.filter { $0.contains("admin.user_removed") }
            #expect(lines.count == 2 && lines.contains { $0.contains("root") } && lines.contains { $0.contains("token") }, "\(lines)")
        }
    }

    @Test func theKillSwitchLocksEverySigner() async throws {
        let harness = try Harness()
        let (token, hash) = AdminToken.generate()
        try await harness.store.setMetaValue(AdminController.tokenMetaName, hash)
        try await harness.run { client in
            let (a, _) = try await client.newAccount("ann")
            let (b, _) = try await client.newAccount("ben")
            let locked = try await client.call(.post, "/api/admin/lock-all", json: [:], headers: Client.bearer(token))
            #expect(locked["locked"] as? Int == 2)
            for t in [a, b] {
                #expect(try await client.signer("get_public_key", token: t).error == "signer_locked")
                #expect(try await client.call(.get, "/session", headers: Client.bearer(t)).status == .ok)  // still signed in
            }
            // A locked signer's refusal is the step-up to the passkey, not a failure.
            let stats = try await client.call(.get, "/api/admin/stats", headers: Client.bearer(token))
            let hour = try #require(stats["lastHour"] as? [String: Any])
            #expect((hour["failures"] as? [String: Int])?["signer_locked"] == nil && (hour["stepUps"] as? Int ?? 0) >= 2, "\(hour)")
            #expect(try await client.call(.post, "/api/admin/users/ann/revoke-sessions", json: [:], headers: Client.bearer(token)).status == .ok)
            #expect(try await client.call(.get, "/session", headers: Client.bearer(a)).status == .unauthorized)
            #expect(try await client.call(.delete, "/api/admin/users/ben", headers: Client.bearer(token)).status == .ok)
            #expect(try await harness.store.user(named: "ben") == nil)
        }
    }
}
