import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobCrypto
import Nostr
import TestSupport
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

/// Valid ceremony and signer bodies, mutated thousands of ways (JSON values swapped for other
/// types, fields dropped, base64 corrupted, raw bytes flipped) and sent through the whole
/// application: every answer is a 4xx with a JSON error (or, rarely, a success), never a 5xx,
/// and every request completes.
@Suite struct HTTPFuzzTests {
    static func mutateJSON(_ value: Any, _ rng: inout SplitMix, depth: Int = 0) -> Any {
        switch value {
        case var object as [String: Any]:
            guard !object.isEmpty else { return object }
            let keys = object.keys.sorted()
            let key = keys[Int(rng.next() % UInt64(keys.count))]
            switch rng.next() % 4 {
            case 0: object.removeValue(forKey: key)
            case 1: object[key] = randomValue(&rng)
            default: object[key] = mutateJSON(object[key]!, &rng, depth: depth + 1)
            }
            if rng.next() % 8 == 0 { object["extra\(rng.next() % 10)"] = randomValue(&rng) }
            return object
        case var array as [Any]:
            guard !array.isEmpty else { return [randomValue(&rng)] }
            let i = Int(rng.next() % UInt64(array.count))
            array[i] = mutateJSON(array[i], &rng, depth: depth + 1)
            return array
        case let text as String:
            var chars = Array(text.unicodeScalars)
            switch rng.next() % 5 {
            case 0: return String(String.UnicodeScalarView(chars.prefix(Int(rng.next() % UInt64(chars.count + 1)))))
            case 1 where !chars.isEmpty:
                chars[Int(rng.next() % UInt64(chars.count))] = ["A", "-", "_", "=", "+", "/", "\u{0}", "é"].randomElement(using: &rng)!
                return String(String.UnicodeScalarView(chars))
            case 2: return text + text
            case 3: return String(repeating: "A", count: Int(rng.next() % 70_000))
            default: return randomValue(&rng)
            }
        default:
            return randomValue(&rng)
        }
    }

    static func randomValue(_ rng: inout SplitMix) -> Any {
        switch rng.next() % 9 {
        case 0: return NSNull()
        case 1: return Int(truncatingIfNeeded: rng.next())
        case 2: return Double(rng.next() % 1000) / 7
        case 3: return rng.next() % 2 == 0
        case 4: return [Any]()
        case 5: return [String: Any]()
        case 6: return "AAAA"
        case 7: return [1, "a", NSNull()] as [Any]
        default: return String(repeating: "é", count: Int(rng.next() % 100))
        }
    }

    @Test func mutatedCeremonyAndSignerBodiesGetOnly4xxJSONErrors() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var rng = SplitMix(seed: 0x6874_7470_6675_7a7a)
            var (token, own) = try await client.newAccount("fuzzer")
            own.prfSecret = randomBytes(32)
            var counts: [Int: Int] = [:]
            for round in 0..<1_500 {
                // A fresh valid body for each round, so mutations start from something the server accepts.
                var authenticator = SoftwareAuthenticator()
                let endpoint: String
                var body: Any
                var headers: HTTPFields = [:]
                switch round % 4 {
                case 0:
                    let options = try await client.registrationOptions()
                    let challenge = Base64URL.decode(options["challenge"] as! String)!
                    authenticator.userHandle = Base64URL.decode((options["user"] as! [String: Any])["id"] as! String)
                    let credential = authenticator.register(
                        authenticator.registrationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin))
                    body = ["username": "", "challengeKey": options["challengeKey"]!, "cred": try jsonObject(credential)]
                    endpoint = "/verify-registration"
                case 1:
                    let options = try await client.authenticationOptions()
                    let challenge = Base64URL.decode(options["challenge"] as! String)!
                    let credential = authenticator.authenticate(
                        authenticator.authenticationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin))
                    body = ["cred": try jsonObject(credential), "prfOutput": Base64URL.encode(randomBytes(32))]
                    endpoint = "/verify-authentication"
                case 2 where round % 8 == 6:
                    // Sealing: an assertion (with a PRF output) from the account's own passkey.
                    body = try await client.freshAssertion(&own)
                    endpoint = ["/api/signer/seal", "/api/signer/unseal"][Int(rng.next() % 2)]
                    headers = Client.bearer(token)
                case 2:
                    body = ["event": ["kind": 1, "content": "hello", "tags": [["e", "00"]], "created_at": 1]]
                    endpoint = "/api/signer/sign_event"
                    headers = Client.bearer(token)
                default:
                    body = ["username": "someone"]
                    endpoint = round % 8 == 3 ? "/generate-registration-options" : "/generate-authentication-options"
                }
                for _ in 0...(rng.next() % 3) { body = Self.mutateJSON(body, &rng) }
                var bytes = try JSONSerialization.data(withJSONObject: body).map { $0 }
                if rng.next() % 4 == 0, !bytes.isEmpty {  // raw byte damage too
                    for _ in 0...(rng.next() % 4) { bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next()) }
                }
                let reply = try await client.call(.post, endpoint, body: bytes, headers: headers)
                counts[Int(reply.status.code), default: 0] += 1
                #expect(reply.status.code < 500, "round \(round) \(endpoint): \(reply.status) \(reply.json)")
                if reply.status.code >= 400 {
                    #expect(reply.error != nil && reply["message"] is String, "round \(round) \(endpoint): no JSON error")
                }
            }
            #expect(counts.keys.allSatisfy { $0 < 500 })
            #expect((counts[400] ?? 0) > 500)
        }
    }

    /// The approval and confirmation bodies (whose `assertion` and `confirmation` once reached a
    /// Foundation call that traps on Linux), and the Polkadot account and message bodies, mutated
    /// the same ways: every answer a 4xx JSON error or a success, never a 5xx, never a trap.
    @Test func mutatedApprovalAndConfirmationBodiesGetOnly4xxJSONErrors() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var rng = SplitMix(seed: 0x6170_7072_6f76_616c)
            var (token, own) = try await client.newAccount("approver")
            let auth = Client.bearer(token)
            let created = try await client.call(.post, "/api/polkadot/accounts", json: ["name": "Main"], headers: auth)
            let address = try #require(created["address"] as? String)
            _ = try await client.call(.post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(authorize.tab)", nil), headers: auth)
            // A live nostr request needing a passkey, and a Polkadot one, each with its challenge asked.
            let request = try keyfobRequest(
                .signEvent, content: #"{"kind":22242,"content":"","tags":[],"created_at":1700000000}"#, transport: .keyfobLink)
            let (_, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
            let nostrID = String(try #require(location).dropFirst("/approve/".count))
            let raw: [String: Any] = ["address": address, "data": "0x1234", "type": "bytes"]
            let asked = try await client.call(
                .post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(bytes.sign)", raw), headers: auth)
            let polkadotID = try #require((asked["pending"] as? [String: Any])?["id"] as? String)
            var counts: [Int: Int] = [:]
            for round in 0..<600 {
                let assertion = try await client.freshAssertion(&own)["cred"] ?? [:]
                let (endpoint, body): (String, Any) =
                    switch round % 6 {
                    case 0: ("/api/requests/\(nostrID)/approve", ["remember": "once", "preset": "everyday", "assertion": assertion])
                    case 1: ("/api/polkadot/requests/\(polkadotID)/approve", ["assertion": assertion])
                    case 2: ("/api/confirmations", ["action": "passkey.remove", "target": "x"])
                    case 3: ("/logout?everywhere=1", ["confirmation": assertion])
                    case 4: ("/api/polkadot/accounts", ["name": "n", "network": 0, "type": "ed25519", "mnemonic": PolkadotBridgeTests.phrase])
                    default: ("/api/polkadot/message", PolkadotBridgeTests.message("pub(bytes.sign)", raw))
                    }
                var mutated = body
                for _ in 0...(rng.next() % 3) { mutated = Self.mutateJSON(mutated, &rng) }
                // In an array, so a top-level string or number is written too; then unwrapped.
                let bytes = Array(try JSONSerialization.data(withJSONObject: [mutated]).dropFirst().dropLast())
                let reply = try await client.call(.post, endpoint, body: bytes, headers: auth)
                counts[Int(reply.status.code), default: 0] += 1
                #expect(reply.status.code < 500, "round \(round) \(endpoint): \(reply.status) \(reply.json)")
                if reply.status.code >= 400 {
                    #expect(reply.error != nil && reply["message"] is String, "round \(round) \(endpoint): no JSON error")
                }
            }
            #expect(counts.keys.allSatisfy { $0 < 500 })
            #expect((counts[400] ?? 0) > 100)
        }
    }
}
