import Foundation
import HTTPTypes
import Hummingbird
import KeyfobStore
import NIOCore
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

/// The security review's findings (issue: hardening), one test each.
@Suite struct HardeningTests {
    static let forwarded = HTTPField.Name("X-Forwarded-For")!

    func fromIP(_ ip: String) -> HTTPFields { [Self.forwarded: ip] }

    /// Real sockets: the peer is 127.0.0.1, a trusted proxy, so X-Forwarded-For names the client.
    func limitedHarness(_ edit: (inout ServerConfiguration) -> Void = { _ in }) throws -> Harness {
        try Harness { c in
            c.trustedProxies = ["127.0.0.1"]
            c.ipRate = 60
            c.ipBurst = 30
            c.signUpsPerHour = 30
            c.signUpBurst = 10
            c.maxChallengesPerIP = 100
            edit(&c)
        }
    }

    @Test func the31stOptionsRequestFromOneIPInASecondIsRefused() async throws {
        try await limitedHarness().run(.live) { client async throws in
            for i in 0..<30 {
                let reply = try await client.call(.get, "/generate-authentication-options", headers: fromIP("203.0.113.7"))
                #expect(reply.status == .ok, "request \(i + 1): \(reply.json)")
            }
            let refused = try await client.call(.get, "/generate-authentication-options", headers: fromIP("203.0.113.7"))
            #expect(refused.status == .tooManyRequests && refused.error == "rate_limited")
            #expect(Int(refused.headers[.retryAfter] ?? "") ?? 0 >= 1)
            // Another client is served; a forged header from an untrusted peer would not help (see next test).
            #expect(try await client.call(.get, "/generate-authentication-options", headers: fromIP("198.51.100.1")).status == .ok)
            // Verify requests have their own budget.
            let verify = try await client.call(.post, "/verify-authentication", json: ["cred": [:]], headers: fromIP("203.0.113.7"))
            #expect(verify.status == .badRequest)
        }
    }

    @Test func signerRequestEntriesShareThePerIPBudget() async throws {
        try await limitedHarness { $0.ipBurst = 3 }.run(.live) { client async throws in
            for i in 0..<3 {
                let target = "/app/pubkey?cb=https%3A%2F%2Fclient\(i).example%2Fcb"
                #expect(try await client.call(.get, target, headers: fromIP("203.0.113.9")).status == .seeOther)
            }
            let refused = try await client.call(.get, "/app/pubkey?cb=https%3A%2F%2Fclient9.example%2Fcb", headers: fromIP("203.0.113.9"))
            #expect(refused.status == .tooManyRequests && refused.headers[.retryAfter] != nil)
        }
    }

    @Test func forwardedForIsIgnoredFromAnUntrustedPeer() async throws {
        try await limitedHarness {
            $0.trustedProxies = []; $0.ipBurst = 3
        }.run(.live) { client async throws in
            for i in 0..<3 {
                // Each claims a new address; all count against the real peer.
                #expect(try await client.call(.get, "/generate-authentication-options", headers: fromIP("10.0.0.\(i)")).status == .ok)
            }
            #expect(try await client.call(.get, "/generate-authentication-options", headers: fromIP("10.0.0.99")).status == .tooManyRequests)
        }
    }

    @Test func signUpsAndLiveChallengesAreCappedPerIP() async throws {
        try await limitedHarness {
            $0.signUpBurst = 3; $0.maxChallengesPerIP = 5
        }.run(.live) { client async throws in
            for _ in 0..<3 {
                #expect(try await client.call(.get, "/generate-registration-options", headers: fromIP("192.0.2.1")).status == .ok)
            }
            let fourth = try await client.call(.get, "/generate-registration-options", headers: fromIP("192.0.2.1"))
            #expect(fourth.status == .tooManyRequests && fourth.error == "rate_limited")
        }
        // Unfinished ceremonies are capped apart from sign-ups: 5 held, the sixth refused.
        try await limitedHarness {
            $0.signUpBurst = 10; $0.maxChallengesPerIP = 5
        }.run(.live) { client async throws in
            for _ in 0..<5 {
                #expect(try await client.call(.get, "/generate-registration-options", headers: fromIP("192.0.2.1")).status == .ok)
            }
            let capped = try await client.call(.get, "/generate-registration-options", headers: fromIP("192.0.2.1"))
            #expect(capped.status == .tooManyRequests && capped.headers[.retryAfter] == "60")
            #expect((capped["message"] as? String)?.contains("unfinished") == true)
            #expect(try await client.call(.get, "/generate-registration-options", headers: fromIP("192.0.2.2")).status == .ok)
            // Sign-in options hold no challenge (it is sealed, `SealedChallengeTests`): still served.
            #expect(try await client.call(.get, "/generate-authentication-options", headers: fromIP("192.0.2.1")).status == .ok)
        }
    }

    /// A crowd of addresses, each under its own cap, still meets the server-wide one: memory
    /// stays bounded whoever asks.
    @Test func liveChallengesAreCappedForTheWholeServer() async throws {
        try await limitedHarness { $0.maxLiveChallenges = 4 }.run(.live) { client async throws in
            for i in 0..<4 {
                #expect(try await client.call(.get, "/generate-registration-options", headers: fromIP("198.51.100.\(i)")).status == .ok)
            }
            let full = try await client.call(.get, "/generate-registration-options", headers: fromIP("198.51.100.9"))
            #expect(full.status == .tooManyRequests && full.error == "rate_limited" && full.headers[.retryAfter] == "60")
            #expect((full["message"] as? String)?.contains("on this server") == true)
            // Sign-ins hold nothing, so a full table never stops one.
            #expect(try await client.call(.get, "/generate-authentication-options", headers: fromIP("198.51.100.9")).status == .ok)
        }
    }

    @Test func cookiesAreSecureBehindAnHttpsProxyAndPlainOnlyOnLocalhost() async throws {
        let proto = HTTPField.Name("X-Forwarded-Proto")!
        try await limitedHarness().run(.live) { client async throws in
            let viaProxy = try await client.call(.post, "/logout", headers: [proto: "https", .origin: Harness.origin])
            let secure = viaProxy.headers[.setCookie] ?? ""
            #expect(secure.hasPrefix("__Host-keyfob_session=") && secure.contains("; Secure") && secure.contains("Path=/"))
            #expect(!secure.contains("Domain"))
            let plain = try await client.call(.post, "/logout", headers: [.origin: Harness.origin])
            #expect(plain.headers[.setCookie]?.hasPrefix("keyfob_session=") == true)
            #expect(plain.headers[.setCookie]?.contains("Secure") == false)
        }
        // From an untrusted peer the header means nothing.
        try await limitedHarness { $0.trustedProxies = [] }.run(.live) { client async throws in
            let spoofed = try await client.call(.post, "/logout", headers: [proto: "https"])
            #expect(spoofed.headers[.setCookie]?.contains("Secure") == false)
        }
    }

    /// The hosts whose plain-http cookies count (`Sessions.isLocal`), and near misses that must not.
    @Test func onlyThisMachinesNamesAreLocal() {
        for local in [
            "", "localhost", "localhost:8080", "app.localhost", "app.localhost:3000", "127.0.0.1", "127.0.0.1:80", "[::1]", "[::1]:8080", "[",
        ] {
            #expect(Sessions.isLocal(authority: local), "\(local)")
        }
        for remote in [
            ":8080", "example.com", "localhost.example.com", "evil-localhost", "127.0.0.2", "[::2]:8080", "[fe80::1]", "127.0.0.1.nip.io",
            "localhost.", "::1",
        ] {
            #expect(!Sessions.isLocal(authority: remote), "\(remote)")
        }
    }

    /// Which cookie a request's session or device is read from (`Sessions.ownCookie`): the `__Host-`
    /// name first, the plain name only on a local host.
    @Test func thePlainCookieNameCountsOnlyOnLocalhost() {
        func cookie(_ header: String?, authority: String) -> String? {
            var fields = HTTPFields()
            if let header { fields[.cookie] = header }
            let head = HTTPRequest(method: .get, scheme: "http", authority: authority, path: "/", headerFields: fields)
            return Sessions.ownCookie(Request(head: head, body: .init(buffer: ByteBuffer())), secure: "__Host-k", plain: "k")
        }
        #expect(cookie("k=plain", authority: "localhost:8080") == "plain")
        #expect(cookie("k=plain; __Host-k=secure", authority: "localhost:8080") == "secure")
        #expect(cookie("__Host-k=secure", authority: "keyfob.example") == "secure")
        #expect(cookie("k=plain", authority: "keyfob.example") == nil)
        #expect(cookie(nil, authority: "localhost") == nil)
    }

    @Test func everyResponseCarriesTheSecurityHeaders() async throws {
        try await Harness().run { client in
            for path in ["/", "/index.html", "/account.html", "/keyfob.js", "/style.css", "/healthz", "/session", "/no-such-page"] {
                let reply = try await client.call(.get, path)
                let csp = reply.headers[.contentSecurityPolicy] ?? ""
                #expect(csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"), "\(path)")
                #expect(reply.headers[.xContentTypeOptions] == "nosniff", "\(path)")
                #expect(reply.headers[HTTPField.Name("Referrer-Policy")!] == "no-referrer", "\(path)")
            }
            // No inline script: the CSP would block it.
            let publicDir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("Public")
            for page in try FileManager.default.contentsOfDirectory(atPath: publicDir.path) where page.hasSuffix(".html") {
                let html = try String(contentsOf: publicDir.appendingPathComponent(page), encoding: .utf8)
                #expect(!html.contains("<script>") && !html.contains(" style=\"") && !html.contains("onclick="), "\(page)")
            }
        }
    }

    @Test func lookAlikeUsernamesAreRefusedAndSpellingsFoldToOneAccount() async throws {
        try await Harness().run { client in
            var a = SoftwareAuthenticator()
            #expect(try await client.signUp(&a, username: "alice")["username"] as? String == "alice")
            for twin in ["Alice", "ALICE", "\u{FF41}\u{FF4C}\u{FF49}\u{FF43}\u{FF45}"] {  // last: full-width "ａｌｉｃｅ"
                #expect(try await client.registrationOptions(username: twin).error == "username_taken", "\(twin)")
            }
            for bad in ["\u{0430}lice", "jos\u{E9}", "jose\u{301}", "al ice", "ali\u{200B}ce", String(repeating: "a", count: 65), "anon-123"] {
                let reply = try await client.registrationOptions(username: bad)
                #expect(reply.status == .badRequest && reply.error == "invalid_request", "\(bad.unicodeScalars.map { String($0.value, radix: 16) })")
            }
            // The message names what is wrong (#27): the character and its code point, or the length.
            #expect(
                try await client.registrationOptions(username: "\u{0430}lice")["message"] as? String
                    == "\"\u{0430}\" (U+0430) cannot be in a username: use a-z, 0-9 and . _ - @ + (letters are not case-sensitive)")
            #expect(
                (try await client.registrationOptions(username: "ali\u{200B}ce")["message"] as? String)?
                    .hasPrefix("an invisible character (U+200B)") == true)
            #expect(
                (try await client.registrationOptions(username: String(repeating: "a", count: 65))["message"] as? String)?
                    .contains("this one has 65 bytes") == true)
            var b = SoftwareAuthenticator()
            #expect(try await client.signUp(&b, username: "John_Doe+nostr@example.com")["username"] as? String == "john_doe+nostr@example.com")
        }
    }

    /// After a flood of abandoned ceremonies a request does no sweeping of its own; the sweeper
    /// removes the rows in bounded batches (work is counted, not timed).
    @Test func expiredChallengesAreSweptByTheTimerNotByRequests() async throws {
        let harness = try Harness()
        let t0 = harness.clock.now
        for i in 0..<100_000 {
            let bytes = withUnsafeBytes(of: UInt32(i).bigEndian, Array.init)
            try await harness.store.insertChallenge(
                ChallengeRecord(challenge: bytes, ceremony: .authentication, key: "k", expiresAt: t0 - 1),
                now: t0, maxPerClient: 1_000_000)
        }
        try await harness.run { client async throws in
            #expect(try await client.authenticationOptions().status == .ok)
            #expect(try await client.call(.get, "/healthz").status == .ok)
        }
        let sweeper = ExpirySweeper(store: harness.store, interval: 30, now: { t0 }, logger: .init(label: "test"))
        #expect(try await harness.store.sweepExpired(now: t0, limit: ExpirySweeper.batch) == ExpirySweeper.batch)
        #expect(await sweeper.sweepOnce() == 100_000 - ExpirySweeper.batch)  // 199 batches of at most 500
        #expect(await sweeper.sweepOnce() == 0)
    }

    @Test func filesAreCreatedPrivateUnderUmask022() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keyfob-modes-\(UUID().uuidString)").path
        let old = umask(0o022)
        defer { umask(old) }
        var c = ServerConfiguration()
        c.dataDirectory = dir
        try c.prepareDataDirectory()
        _ = try MasterKeyFile.load(c)
        let store = try SQLiteStore(path: c.sqlitePath)
        try await store.healthCheck()
        _ = try await store.setMetaValueIfAbsent("probe", [1])
        func mode(_ path: String) -> mode_t {
            var info = stat()
            stat(path, &info)
            return info.st_mode & 0o777
        }
        #expect(mode(dir) == 0o700)
        #expect(mode(c.effectiveMasterKeyFile) == 0o600)
        for file in [c.sqlitePath, c.sqlitePath + "-wal", c.sqlitePath + "-shm"] where FileManager.default.fileExists(atPath: file) {
            #expect(mode(file) == 0o600, "\(file)")
        }
        #expect(FileManager.default.fileExists(atPath: c.sqlitePath + "-wal"))
    }

    @Test func shortRSACredentialsAreRefusedAtSignUp() async throws {
        try await Harness().run { client in
            var short = SoftwareAuthenticator(key: TestPrivateKey(.rs256, rsaBits: 1024))
            let reply = try await client.signUp(&short, username: "legacy")
            #expect(reply.status == .badRequest && reply.error == "unsupported_algorithm")
            var modern = SoftwareAuthenticator(.rs256)
            let ok = try await client.signUp(&modern, username: "modern")
            #expect(ok.status == .ok && ok["attestationTrusted"] as? Bool == false)
            let list = try await client.call(.get, "/account/credentials", headers: Client.bearer(ok["token"] as! String))
            #expect((list["credentials"] as? [[String: Any]])?.first?["attestationTrusted"] as? Bool == false)
        }
    }

    @Test func attestationRootsAreReadPerFormat() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("keyfob-roots-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("tpm"), withIntermediateDirectories: true)
        let der: [UInt8] = [0x30, 0x03, 0x02, 0x01, 0x01]
        let pem = "-----BEGIN CERTIFICATE-----\n\(Data(der).base64EncodedString())\n-----END CERTIFICATE-----\n"
        try pem.write(to: dir.appendingPathComponent("tpm/root.pem"), atomically: true, encoding: .utf8)
        #expect(try AttestationRoots.load(from: dir.path) == ["tpm": [der]])
        try "not a certificate".write(to: dir.appendingPathComponent("tpm/bad.pem"), atomically: true, encoding: .utf8)
        #expect(throws: ServerConfiguration.Invalid.self) { _ = try AttestationRoots.load(from: dir.path) }
        #expect(throws: ServerConfiguration.Invalid.self) { _ = try AttestationRoots.load(from: dir.path + "/missing") }
    }

    @Test func adminsAreBoundToAccountsThatExistedBeforeTheyWereNamed() async throws {
        let harness = try Harness()
        try await harness.run { client in _ = try await client.newAccount("alice") }
        harness.clock.advance(10)
        let admins = try await Admins.bind(["alice", "root"], store: harness.store, now: harness.clock.now)
        harness.clock.advance(10)
        try await harness.run { client in _ = try await client.newAccount("root") }  // a stranger takes the name
        #expect(admins.isAdmin(try await harness.store.user(named: "alice")!))
        #expect(!admins.isAdmin(try await harness.store.user(named: "root")!))
        // A restart later remembers when the names were first configured.
        let again = try await Admins.bind(["alice", "root"], store: harness.store, now: harness.clock.now + 3600)
        #expect(!again.isAdmin(try await harness.store.user(named: "root")!))
    }
}
