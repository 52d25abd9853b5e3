import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobStore
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

@Suite struct WellKnownTests {
    @Test func filesComeFromConfigurationAndAre404Otherwise() async throws {
        try await Harness().run { client async throws in
            for path in ["/.well-known/apple-app-site-association", "/.well-known/assetlinks.json", "/.well-known/webauthn"] {
                #expect(try await client.call(.get, path).status == .notFound, "\(path)")
            }
        }
        try await Harness {
            $0.appleAppIDs = ["ABCDE12345.com.example.app"]
            $0.androidPackage = "com.example.app"
            $0.androidCertFingerprints = ["AA:BB"]
            $0.relatedOrigins = ["https://example.net"]
        }.run { client in
            let apple = try await client.call(.get, "/.well-known/apple-app-site-association")
            #expect((apple["webcredentials"] as? [String: Any])?["apps"] as? [String] == ["ABCDE12345.com.example.app"])
            let details = ((apple["applinks"] as? [String: Any])?["details"] as? [[String: Any]])?.first
            #expect((details?["components"] as? [[String: String]])?.first?["/"] == "/app/*")
            let android = try await client.raw.execute(uri: "/.well-known/assetlinks.json", method: .get, headers: [:], body: nil)
            let statements = try JSONSerialization.jsonObject(with: Data(android.body.readableBytesView)) as! [[String: Any]]
            #expect((statements[0]["target"] as? [String: Any])?["package_name"] as? String == "com.example.app")
            #expect(try await client.call(.get, "/.well-known/webauthn")["origins"] as? [String] == ["https://example.net"])
        }
    }

    /// WebAuthn L3 §5.11: an origin listed at /.well-known/webauthn may use this rpId; others may not.
    @Test func relatedOriginsAreAcceptedAndOthersRefused() async throws {
        try await Harness { $0.relatedOrigins = ["https://example.net"] }.run { client in
            for (origin, expected) in [("https://example.net", "ok"), ("https://example.org", "origin_mismatch")] {
                var authenticator = SoftwareAuthenticator()
                let options = try await client.registrationOptions()
                authenticator.userHandle = Base64URL.decode((options["user"] as! [String: Any])["id"] as! String)
                let fields = authenticator.registrationFields(
                    challenge: Base64URL.decode(options["challenge"] as! String)!,
                    rpID: "localhost", origin: origin)
                let reply = try await client.verifyRegistration(authenticator.register(fields), challengeKey: options["challengeKey"] as? String)
                #expect((reply.error ?? "ok") == expected, "\(origin)")
            }
        }
    }

    @Test func relatedOriginsMustBeHTTPSOrigins() {
        for bad in ["http://example.net", "https://example.net/path", "example.net"] {
            var c = ServerConfiguration()
            c.relatedOrigins = [bad]
            #expect(throws: ServerConfiguration.Invalid.self) { try c.validate() }
        }
    }
}

@Suite struct OperatorStoreTests {
    @Test func usersAreListedSearchedAndRemovedWithEverythingOfTheirs() async throws {
        let harness = try Harness()
        try await harness.run { client in
            for name in ["alice", "bob", "al_ex"] { _ = try await client.newAccount(name) }
        }
        let store = harness.store
        #expect(try await store.users(matching: nil, after: nil, limit: 10).map(\.username) == ["al_ex", "alice", "bob"])
        #expect(try await store.users(matching: "al", after: nil, limit: 10).map(\.username) == ["al_ex", "alice"])
        #expect(try await store.users(matching: "l_", after: nil, limit: 10).map(\.username) == ["al_ex"])  // _ is literal
        #expect(try await store.users(matching: nil, after: "alice", limit: 1).map(\.username) == ["bob"])
        let alice = try await store.user(named: "alice")!
        #expect(try await store.deleteUser(id: alice.id))
        #expect(try await store.user(named: "alice") == nil)
        #expect(try await store.credentials(ofUser: alice.id).isEmpty)
        #expect(try await store.nostrKey(ofUser: alice.id) == nil)
        #expect(try await store.deleteUser(id: alice.id) == false)
    }
}

@Suite struct MetricsTests {
    @Test func metricsCountWhatHappenedAndAreForTheScraperOnly() async throws {
        try await Harness().run(.live) { client async throws in
            let (token, _) = try await client.newAccount("mia")
            _ = try await client.signer("get_public_key", token: token)
            _ = try await client.signer("nip44_decrypt", ["ciphertext": "AA", "pubkey": String(repeating: "0", count: 64)], token: token)
            let response = try await client.raw.execute(uri: "/metrics", method: .get, headers: [:], body: nil)
            #expect(response.status == .ok)
            let text = String(buffer: response.body)
            #expect(text.contains(#"keyfob_events_total{event="registration.verified",code=""} 1"#), "\(text.prefix(2000))")
            #expect(text.contains(#"keyfob_signer_operations_total{method="get_public_key",outcome="approved",code=""} 1"#))
            #expect(text.contains(#"keyfob_signer_operations_total{method="nip44_decrypt",outcome="failed",code="invalid_pubkey"} 1"#))
            #expect(text.contains(#"keyfob_http_requests_total{method="POST",route="/verify-registration",status="200"} 1"#))
            #expect(text.contains("keyfob_http_request_duration_seconds_bucket"))
            #expect(text.contains(#"keyfob_store_duration_seconds_count{operation="consume_challenge"}"#))
            #expect(text.contains(#"keyfob_store_duration_seconds_count{operation="append_audit"}"#))
            #expect(!text.contains(token))
        }
        try await Harness().run { client async throws in  // no socket peer: not the scraper
            #expect(try await client.call(.get, "/metrics").status == .forbidden)
        }
    }
}
