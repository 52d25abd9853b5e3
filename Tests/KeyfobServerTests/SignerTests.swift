import COpenSSL
import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Logging
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

extension Client {
    func signer(_ method: String, _ body: [String: Any] = [:], token: String?) async throws -> Reply {
        try await call(.post, "/api/signer/\(method)", json: body, headers: token.map(Client.bearer) ?? [:])
    }

    /// Signs up a new account; returns its session token.
    func newAccount(_ username: String? = nil) async throws -> (token: String, authenticator: SoftwareAuthenticator) {
        var authenticator = SoftwareAuthenticator()
        let reply = try await signUp(&authenticator, username: username)
        guard let token = reply["token"] as? String else { throw TestFailure("sign-up failed: \(reply.json)") }
        return (token, authenticator)
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Independent checks of a signed event: the id recomputed from NIP-01's serialization
/// through SHA-256 here, the signature through libsecp256k1's verifier.
func verifySignedEvent(_ object: [String: Any]) throws -> Bool {
    guard let pubkey = object["pubkey"] as? String, let id = object["id"] as? String, let sig = object["sig"] as? String,
        let createdAt = (object["created_at"] as? NSNumber)?.int64Value, let kind = (object["kind"] as? NSNumber)?.intValue,
        let tags = object["tags"] as? [[String]], let content = object["content"] as? String
    else { return false }
    let serialized = Event.serialize(pubkey: pubkey, createdAt: createdAt, kind: kind, tags: tags, content: content)
    guard Hex.encode(sha256(serialized)) == id else { return false }
    return try PublicKey(hex: pubkey).isValidSignature(Hex.decode(sig)!, for: Hex.decode(id)!)
}

@Suite struct SignerMethodTests {
    @Test func getPublicKeyMatchesTheSessionsNpub() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let reply = try await client.signer("get_public_key", ["id": "r1"], token: token)
            #expect(reply.status == .ok)
            let hex = try #require(reply["result"] as? String)
            #expect(reply["pubkey"] as? String == hex && reply["id"] as? String == "r1")
            #expect(try NIP19.decode(reply["npub"] as! String) == .npub(PublicKey(hex: hex)))
            let session = try await client.call(.get, "/session", headers: Client.bearer(token))
            #expect(session["pubkey"] as? String == hex && session["npub"] as? String == reply["npub"] as? String)
            // Two accounts, two keys.
            let (other, _) = try await client.newAccount()
            #expect(try await client.signer("get_public_key", token: other)["result"] as? String != hex)
        }
    }

    @Test func signEventFillsDefaultsIgnoresPubkeyAndIdAndVerifies() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (token, _) = try await client.newAccount("alice")
            let mine = try await client.signer("get_public_key", token: token)["result"] as! String
            let reply = try await client.signer(
                "sign_event",
                [
                    "id": "x",
                    "event": [
                        "kind": 1, "content": "hello </script> \"nostr\" \u{2028}",
                        "pubkey": String(repeating: "a", count: 64), "id": String(repeating: "b", count: 64),
                    ],
                ], token: token)
            #expect(reply.status == .ok, "\(reply.json)")
            let event = try #require(reply["event"] as? [String: Any])
            #expect(event["pubkey"] as? String == mine)
            #expect(event["tags"] as? [[String]] == [])
            #expect((event["created_at"] as? NSNumber)?.doubleValue == harness.clock.now.timeIntervalSince1970)
            #expect(reply["result"] as? String == event["sig"] as? String)
            #expect(try verifySignedEvent(event))
            // A string holding the event JSON (NIP-55's form) works too.
            let asString = try await client.signer(
                "sign_event", ["event": #"{"kind":7,"content":"+","tags":[["e","00"]],"created_at":5}"#], token: token)
            #expect(try verifySignedEvent(asString["event"] as! [String: Any]))
        }
    }

    /// The shared NIP-01 vectors: with the vector's key imported, the server's event ids are the vectors' ids.
    @Test func signedIdsMatchTheNIP01Vectors() async throws {
        try await Harness().run { client in
            let vectors =
                try JSONSerialization.jsonObject(with: Data(contentsOf: vectorsURL("nostr/generated_nip01_serialization.json"))) as! [String: Any]
            let (token, firstPasskey) = try await client.newAccount("alice")
            var owner = firstPasskey
            for vector in vectors["valid"] as! [[String: Any]] {
                let expected = vector["event"] as! [String: Any]
                let imported = try await client.importKey(["secret": vector["seckey"] as! String], token: token, by: &owner)
                #expect(imported["pubkey"] as? String == expected["pubkey"] as? String)
                let event = [
                    "kind": expected["kind"]!, "content": expected["content"]!, "tags": expected["tags"]!,
                    "created_at": expected["created_at"]!,
                ]
                let reply = try await client.signer("sign_event", ["event": event], token: token)
                let signed = try #require(reply["event"] as? [String: Any], "\(vector["label"]!): \(reply.json)")
                #expect(signed["id"] as? String == expected["id"] as? String, "\(vector["label"]!)")
                #expect(try verifySignedEvent(signed))
            }
        }
    }

    @Test(arguments: ["nip04", "nip44"])
    func encryptionRoundTripsWithTheOtherSide(_ scheme: String) async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let mine = try PublicKey(hex: try await client.signer("get_public_key", token: token)["result"] as! String)
            let peer = SecretKey.generate()
            let plaintext = "secret plaintext ✓ \(scheme)"
            // The server encrypts; the peer decrypts with its own key.
            let encrypted = try await client.signer("\(scheme)_encrypt", ["plaintext": plaintext, "pubkey": peer.publicKey.hex], token: token)
            let ciphertext = try #require(encrypted["result"] as? String, "\(encrypted.json)")
            let opened =
                scheme == "nip04"
                ? try NIP04.decrypt(ciphertext, with: peer, from: mine)
                : try NIP44.decrypt(ciphertext, with: peer, from: mine)
            #expect(opened == plaintext)
            // The peer encrypts; the server decrypts (both field names).
            let sealed =
                scheme == "nip04"
                ? try NIP04.encrypt("reply ✓", from: peer, to: mine)
                : try NIP44.encrypt("reply ✓", from: peer, to: mine)
            for field in ["ciphertext", "encryptedText"] {
                let decrypted = try await client.signer("\(scheme)_decrypt", [field: sealed, "pubkey": peer.publicKey.hex], token: token)
                #expect(decrypted["result"] as? String == "reply ✓")
            }
            // Garbage and a wrong peer are clean 4xx errors.
            for garbage in ["", "AAAA", "not base64 at all!", String(repeating: "A", count: 5000), sealed + "x"] {
                let reply = try await client.signer("\(scheme)_decrypt", ["ciphertext": garbage, "pubkey": peer.publicKey.hex], token: token)
                #expect(reply.status.code / 100 == 4 && reply.error != nil, "\(garbage.prefix(20)): \(reply.json)")
            }
            let wrongPeer = try await client.signer(
                "\(scheme)_decrypt", ["ciphertext": sealed, "pubkey": SecretKey.generate().publicKey.hex], token: token)
            #expect(wrongPeer.status == .badRequest && wrongPeer.error == "decrypt_failed")
        }
    }

    /// The generated private-zap vectors, as recipient and as sender.
    @Test func decryptZapEventAsRecipientAndSender() async throws {
        try await Harness().run { client in
            let file =
                try JSONSerialization.jsonObject(with: Data(contentsOf: vectorsURL("nostr/generated_nip57_private_zap.json"))) as! [String: Any]
            let (token, firstPasskey) = try await client.newAccount("alice")
            var owner = firstPasskey
            for vector in file["vectors"] as! [[String: Any]] {
                let expected = vector["decrypt_zap_event_result"] as! [String: Any]
                for role in ["recipient_seckey", "sender_seckey"] {
                    _ = try await client.importKey(["secret": vector[role] as! String], token: token, by: &owner)
                    let reply = try await client.signer("decrypt_zap_event", ["event": vector["zap_request"]!], token: token)
                    let note = try #require(reply["event"] as? [String: Any], "\(vector["label"]!) \(role): \(reply.json)")
                    #expect(note["id"] as? String == expected["id"] as? String)
                    #expect(note["content"] as? String == expected["content"] as? String)
                    let result = try JSONSerialization.jsonObject(with: Data((reply["result"] as! String).utf8)) as! [String: Any]
                    #expect(result["sig"] as? String == expected["sig"] as? String)
                }
                // A third key cannot.
                _ = try await client.importKey(["secret": Hex.encode(randomBytes(31) + [1])], token: token, by: &owner)
                let denied = try await client.signer("decrypt_zap_event", ["event": vector["zap_request"]!], token: token)
                #expect(denied.status == .badRequest && denied.error == "decrypt_failed")
            }
        }
    }
}

func vectorsURL(_ name: String) -> URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Vectors").appendingPathComponent(name)
}

@Suite struct SignerRejectionTests {
    @Test func noSessionLoggedOutAndLockedAreRefused() async throws {
        let harness = try Harness()
        try await harness.run { client in
            #expect(try await client.signer("get_public_key", token: nil).error == "unauthorized")
            #expect(try await client.signer("get_public_key", token: "garbage").status == .unauthorized)
            let (token, _) = try await client.newAccount("alice")
            #expect(try await client.signer("get_public_key", token: token).status == .ok)
            harness.clock.advance(601)  // past --signer-unlock-ttl
            let locked = try await client.signer("sign_event", ["event": ["kind": 1, "content": "x"]], token: token)
            #expect(locked.status == .forbidden && locked.error == "signer_locked")
            let session = try await client.call(.get, "/session", headers: Client.bearer(token))
            #expect(session["signerLocked"] as? Bool == true && session["signerUnlockedUntil"] == nil)
            _ = try await client.call(.post, "/logout", headers: Client.bearer(token))
            #expect(try await client.signer("get_public_key", token: token).status == .unauthorized)
        }
    }

    @Test func unlockingIsAnotherPasskeySignIn() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var (token, authenticator) = try await client.newAccount("alice")
            let unlocked = try await client.call(.get, "/session", headers: Client.bearer(token))
            #expect(unlocked["signerLocked"] as? Bool == false && unlocked["signerUnlockedUntil"] != nil)
            harness.clock.advance(601)
            #expect(try await client.signer("get_public_key", token: token).error == "signer_locked")
            let signIn = try await client.signIn(&authenticator)
            token = try #require(signIn["token"] as? String)
            #expect(try await client.signer("get_public_key", token: token).status == .ok)
        }
    }

    @Test func badInputOfEveryShapeIsA4xxWithACode() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let onCurve = SecretKey.generate().publicKey.hex
            let cases: [(String, [String: Any], String)] = [
                ("nip44_encrypt", ["plaintext": "x", "pubkey": String(onCurve.dropLast())], "invalid_pubkey"),  // 63 chars
                ("nip44_encrypt", ["plaintext": "x", "pubkey": String(repeating: "f", count: 64)], "invalid_pubkey"),  // not on the curve
                ("nip44_encrypt", ["plaintext": "x", "pubkey": "02" + onCurve], "invalid_pubkey"),  // compressed 33 bytes
                ("nip44_encrypt", ["plaintext": "x", "pubkey": String(repeating: "z", count: 64)], "invalid_pubkey"),
                ("nip04_encrypt", ["plaintext": "x", "pubkey": 5], "invalid_pubkey"),
                ("nip04_encrypt", ["plaintext": "x"], "invalid_pubkey"),
                ("nip04_encrypt", ["plaintext": 7, "pubkey": onCurve], "invalid_content"),
                ("nip44_decrypt", ["ciphertext": ["a"], "pubkey": onCurve], "invalid_content"),
                ("sign_event", ["event": ["kind": "1", "content": "x"]], "invalid_content"),
                ("sign_event", ["event": ["kind": 1.5, "content": "x"]], "invalid_content"),
                ("sign_event", ["event": ["kind": true, "content": "x"]], "invalid_content"),
                ("sign_event", ["event": ["kind": 70000, "content": "x"]], "invalid_content"),
                ("sign_event", ["event": ["kind": 1, "content": "x", "tags": "e"]], "invalid_content"),
                ("sign_event", ["event": ["kind": 1, "content": "x", "tags": [["e", 1]]]], "invalid_content"),
                ("sign_event", ["event": ["kind": 1, "content": "x", "tags": ["e"]]], "invalid_content"),
                ("sign_event", ["event": ["kind": 1, "content": 5]], "invalid_content"),
                ("sign_event", ["event": ["kind": 1, "content": "x", "created_at": -1]], "invalid_content"),
                ("sign_event", ["event": "not json"], "invalid_content"),
                ("sign_event", [:], "invalid_content"),
                ("sign_event", ["event": ["kind": 1, "content": "x"], "id": 5], "invalid_request"),
                ("decrypt_zap_event", ["event": ["kind": 9734, "content": ""]], "invalid_content"),
            ]
            for (method, body, code) in cases {
                let reply = try await client.signer(method, body, token: token)
                #expect(reply.status == .badRequest && reply.error == code, "\(method) \(body): \(reply.status) \(reply.json)")
            }
            for kind in [14, 15] {
                let rumor = try await client.signer("sign_event", ["event": ["kind": kind, "content": "dm"]], token: token)
                #expect(rumor.status == .forbidden && rumor.error == "permission_denied")
            }
            let unknown = try await client.signer("sign_everything", token: token)
            #expect(unknown.status == .notFound && unknown.error == "unsupported_type")
            let notJSON = try await client.call(.post, "/api/signer/sign_event", body: Array("{".utf8), headers: Client.bearer(token))
            #expect(notJSON.status == .badRequest && notJSON.error == "invalid_request")
            let array = try await client.call(.post, "/api/signer/sign_event", body: Array("[1]".utf8), headers: Client.bearer(token))
            #expect(array.status == .badRequest && array.error == "invalid_request")
            let huge = try await client.signer(
                "nip44_encrypt", ["plaintext": String(repeating: "a", count: 70_000), "pubkey": onCurve], token: token)
            #expect(huge.status == .contentTooLarge && huge.error == "payload_too_large")
        }
    }

    @Test func theSignRateIsPerSession() async throws {
        let harness = try Harness { $0.signRate = 3 }
        try await harness.run { client in
            let (token, _) = try await client.newAccount("alice")
            for _ in 0..<3 { #expect(try await client.signer("get_public_key", token: token).status == .ok) }
            let limited = try await client.signer("get_public_key", token: token)
            #expect(limited.status == .tooManyRequests && limited.error == "rate_limited")
            #expect(Int(limited.headers[.retryAfter] ?? "") ?? 0 >= 1)
            let (other, _) = try await client.newAccount("bob")
            #expect(try await client.signer("get_public_key", token: other).status == .ok)
            harness.clock.advance(21)  // 3 a minute: one every 20 s
            #expect(try await client.signer("get_public_key", token: token).status == .ok)
        }
    }
}

func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, haystack.count >= needle.count else { return false }
    for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
        if haystack[start..<start + needle.count].elementsEqual(needle) { return true }
    }
    return false
}
