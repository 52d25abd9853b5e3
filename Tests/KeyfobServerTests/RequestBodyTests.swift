import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobCrypto
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer
@testable import KeyfobStore

/// Nothing an account holder sends stops the server: every value a request carries is read with
/// a throwing decoder. (On Linux `JSONSerialization.data(withJSONObject:)` traps on a top-level
/// string or number — `try?` cannot catch it — and these bodies once reached it.) A trap would end
/// this test process, so each case passing is the proof; the server is asked again after each.
@Suite struct RequestBodyTests {
    /// The values that once killed the process, as JSON: a string, numbers, a boolean, null.
    static var crashValues: [Any] { ["x", 1, true, NSNull(), 7] }

    @Test func anApprovalsAssertionOfAnyOtherShapeIsA400() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let auth = Client.bearer(token)
            // A kind that always needs a passkey confirmation (22242: a relay login).
            let request = try keyfobRequest(
                .signEvent, content: #"{"kind":22242,"content":"","tags":[["relay","wss://r.example"]],"created_at":1700000000}"#,
                transport: .keyfobLink)
            let (_, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
            let id = String(try #require(location).dropFirst("/approve/".count))
            #expect(try await client.call(.post, "/api/requests/\(id)/challenge", json: [:], headers: auth).status == .ok)
            for value in Self.crashValues {
                let reply = try await client.call(
                    .post, "/api/requests/\(id)/approve", json: ["remember": "once", "assertion": value], headers: auth)
                #expect((400..<500).contains(reply.status.code), "\(value): \(reply.status) \(reply.json)")
            }
            for value in Self.crashValues where !(value is NSNull) {
                let reply = try await client.call(.post, "/api/requests/\(id)/approve", json: ["remember": value], headers: auth)
                #expect(reply.status == .badRequest && reply.error == "invalid_request", "\(value): \(reply.json)")
            }
            // Still pending, still served.
            #expect(try await client.call(.get, "/api/requests/\(id)", headers: auth).status == .ok)
        }
    }

    /// `remember` and `preset` are closed sets: another value is refused before anything is
    /// decided, with a message that lists them (a preset for NIP-46 clients once failed on a
    /// redirect request only after the request was decided).
    @Test func rememberAndPresetAreClosedSetsCheckedBeforeDeciding() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("ida")
            let auth = Client.bearer(token)
            let request = try keyfobRequest(.signEvent, content: RedirectFlowTests.note, transport: .keyfobLink)
            let (_, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
            let id = String(try #require(location).dropFirst("/approve/".count))
            let week = try await client.call(.post, "/api/requests/\(id)/approve", json: ["remember": "week"], headers: auth)
            #expect(week.status == .badRequest && (week["message"] as? String)?.contains("once, hour, day or forever") == true)
            let rejectWeek = try await client.call(.post, "/api/requests/\(id)/reject", json: ["remember": "week"], headers: auth)
            #expect(rejectWeek.status == .badRequest, "\(rejectWeek.json)")
            let requested = try await client.call(.post, "/api/requests/\(id)/approve", json: ["preset": "requested"], headers: auth)
            #expect(requested.status == .badRequest && (requested["message"] as? String)?.contains("NIP-46") == true)
            #expect(try await client.call(.get, "/api/requests/\(id)", headers: auth).status == .ok)  // still pending
            let approved = try await client.call(.post, "/api/requests/\(id)/approve", json: ["remember": "hour"], headers: auth)
            #expect(approved.status == .ok, "\(approved.json)")
        }
    }

    @Test func aPolkadotApprovalsAssertionOfAnyOtherShapeIsA400() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("paula")
            let auth = Client.bearer(token)
            let id = try await client.pendingPolkadotSignature(token: token)
            #expect(try await client.call(.post, "/api/polkadot/requests/\(id)/challenge", json: [:], headers: auth).status == .ok)
            for value in Self.crashValues {
                let reply = try await client.call(.post, "/api/polkadot/requests/\(id)/approve", json: ["assertion": value], headers: auth)
                #expect((400..<500).contains(reply.status.code), "\(value): \(reply.status) \(reply.json)")
            }
            let state = try await client.call(.get, "/api/polkadot/requests/\(id)", headers: auth)
            #expect(state["state"] as? String == "pending")
        }
    }

    /// Every endpoint that takes a passkey `confirmation`: any other shape is a 400, never a trap.
    @Test func aConfirmationOfAnyOtherShapeIsA400Everywhere() async throws {
        try await Harness().run { client in
            let (token, authenticator) = try await client.newAccount("carol")
            let auth = Client.bearer(token)
            var endpoints = [
                "/logout?everywhere=1", "/account/credentials/\(Base64URL.encode(authenticator.credentialID))",
                "/api/signer/key", "/api/signer/key/export",
            ]
            for index in 0..<6 {
                if index == 4 {  // (the key cannot be replaced once Polkadot accounts are sealed with it)
                    let created = try await client.call(.post, "/api/polkadot/accounts", json: [:], headers: auth)
                    let account = try #require(created["id"] as? String)
                    endpoints += ["/api/polkadot/accounts/\(account)/export", "/api/polkadot/accounts/\(account)/remove"]
                }
                let path = endpoints[index]
                for value in Self.crashValues where !(value is NSNull) {
                    let method: HTTPRequest.Method = path.hasPrefix("/account/credentials") ? .delete : .post
                    let reply = try await client.call(method, path, json: ["confirmation": value, "password": "long enough"], headers: auth)
                    #expect(reply.status == .badRequest && reply.error == "invalid_request", "\(path) \(value): \(reply.status) \(reply.json)")
                }
            }
            #expect(try await client.call(.get, "/account/credentials", headers: auth).status == .ok)
        }
    }

    /// A Polkadot account's fields have one type each: a wrong one is a 400 and nothing is stored
    /// (a backup sent as a string once became a fresh random account named "Imported").
    @Test func aPolkadotAccountFieldOfTheWrongTypeIsRefusedWithNothingStored() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("dora")
            let auth = Client.bearer(token)
            let bodies: [[String: Any]] = [
                ["backup": #"{"encoded":"x"}"#, "password": "long enough"], ["mnemonic": ["bottom", "drive"]], ["path": 7],
                ["mnemonic": PolkadotBridgeTests.phrase, "path": 7], ["network": "2"], ["network": 2.5], ["type": 5],
                ["type": "rsa"], ["name": 3], ["backup": [1, 2]], ["mnemonic": PolkadotBridgeTests.phrase, "backup": [:]],
            ]
            for body in bodies {
                let reply = try await client.call(.post, "/api/polkadot/accounts", json: body, headers: auth)
                #expect(reply.status == .badRequest, "\(body): \(reply.status) \(reply.json)")
            }
            let list = try await client.call(.get, "/api/polkadot/accounts", headers: auth)
            #expect((list["accounts"] as? [Any])?.isEmpty == true, "\(list.json)")
        }
    }

    /// The server's one `JSONSerialization.data(withJSONObject:)` is `JSONText`, whose argument is
    /// a dictionary or an array checked with `isValidJSONObject`: any other call fails this test.
    @Test func noOtherCodeReserialisesFoundationValues() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        var found: [String] = []
        let files = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil)!
        for case let file as URL in files where file.pathExtension == "swift" && file.lastPathComponent != "JSONValue.swift" {
            let text = try String(contentsOf: file, encoding: .utf8)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where line.contains("JSONSerialization.data(") && !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                found.append("\(file.lastPathComponent):\(number + 1)")
            }
        }
        #expect(found.isEmpty, "use JSONText or a Codable type instead: \(found)")
    }

    @Test func jsonValueReadsWhatJSONSerializationReads() throws {
        let text = #"{"a":[1,2.5,"x",true,null,{"b":{}}],"n":-7}"#
        let value = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        let foundation = try #require(value.foundation as? [String: Any])
        let expected = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(NSDictionary(dictionary: foundation).isEqual(to: expected))
        #expect(foundation["n"] as? Int == -7)
    }
}

extension Client {
    /// A new Polkadot account, a dapp connected to it, and its `pub(bytes.sign)` request waiting
    /// for approval: the request's id.
    func pendingPolkadotSignature(token: String) async throws -> String {
        let auth = Client.bearer(token)
        let created = try await call(.post, "/api/polkadot/accounts", json: ["name": "Main"], headers: auth)
        let address = try #require(created["address"] as? String, "\(created.json)")
        _ = try await call(.post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(authorize.tab)", nil), headers: auth)
        let raw: [String: Any] = ["address": address, "data": "0x1234", "type": "bytes"]
        let asked = try await call(.post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(bytes.sign)", raw), headers: auth)
        return try #require((asked["pending"] as? [String: Any])?["id"] as? String, "\(asked.json)")
    }
}

/// A signature is never answered without its audit entry: when the entry cannot be written, the
/// operation answers 503 `store_unavailable` and the signature does not go out.
@Suite struct AuditFailureTests {
    /// Every audit write from now on fails, as on a full disk.
    static func breakAudit(_ store: SQLiteStore) throws {
        try store.write {
            try store.connection.execute(
                "CREATE TRIGGER no_audit BEFORE INSERT ON audit_log BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END")
        }
    }

    /// #55: `/healthz` said 200 while SQLite could not write; its probe writes, so it says 503.
    @Test func healthzSaysUnavailableWhenTheStoreCannotWrite() async throws {
        let harness = try Harness()
        try await harness.run { client in
            #expect(try await client.call(.get, "/healthz").status == .ok)
            try harness.store.write {
                try harness.store.connection.execute(
                    "CREATE TRIGGER no_meta BEFORE INSERT ON meta BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END")
            }
            try await Task.sleep(for: .milliseconds(1100))  // past the one second an answer is kept
            let down = try await client.call(.get, "/healthz")
            #expect(down.status == .serviceUnavailable && down["status"] as? String == "unavailable", "\(down.json)")
            #expect((down["reason"] as? String)?.contains("cannot read or write") == true)
        }
    }

    @Test func signEventAnswersNoSignatureWhenItsEntryCannotBeWritten() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (token, _) = try await client.newAccount("erin")
            try Self.breakAudit(harness.store)
            let reply = try await client.call(
                .post, "/api/signer/sign_event", json: ["event": ["kind": 1, "content": "hello"]], headers: Client.bearer(token))
            #expect(reply.status == .serviceUnavailable && reply.error == "store_unavailable", "\(reply.json)")
            #expect(reply["event"] == nil && reply["result"] == nil)
            #expect(reply.headers[.retryAfter] != nil)
        }
    }

    @Test func aRedirectApprovalAnswersNoSignatureWhenItsEntryCannotBeWritten() async throws {
        let harness = try Harness()
        try await harness.run { client in
            let (token, _) = try await client.newAccount("fred")
            let request = try keyfobRequest(.signEvent, content: RedirectFlowTests.note, transport: .keyfobLink)
            let (_, location, _) = try await client.open(serverTarget(SignerCodec.buildURL(request)), token: token)
            let id = String(try #require(location).dropFirst("/approve/".count))
            try Self.breakAudit(harness.store)
            let reply = try await client.call(.post, "/api/requests/\(id)/approve", json: ["remember": "once"], headers: Client.bearer(token))
            #expect(reply.status == .serviceUnavailable && reply.error == "store_unavailable", "\(reply.json)")
            #expect(reply["redirect"] == nil)
        }
    }

    @Test func aPolkadotApprovalStoresNoSignatureWhenItsEntryCannotBeWritten() async throws {
        let harness = try Harness()
        try await harness.run { client in
            var (token, authenticator) = try await client.newAccount("gina")
            let auth = Client.bearer(token)
            let id = try await client.pendingPolkadotSignature(token: token)
            try Self.breakAudit(harness.store)
            let reply = try await PolkadotBridgeTests.approve(id, client, token: token, &authenticator)
            #expect(reply.status == .serviceUnavailable && reply.error == "store_unavailable", "\(reply.json)")
            // Nothing for the dapp to collect: the request is still pending, with no result.
            let state = try await client.call(.get, "/api/polkadot/requests/\(id)", headers: auth)
            #expect(state["state"] as? String == "pending" && state["outcome"] == nil, "\(state.json)")
        }
    }
}

/// A raw message is shown exactly as it is (#42): characters that are invisible or reorder text
/// (bidi overrides, zero-width ones, controls) appear as `\uXXXX` where they are; the bytes are
/// also shown as hex. (`<Bytes>` wrapping is unchanged: polkadot-js's rules.)
@Suite struct RawMessageDisplayTests {
    typealias Details = PolkadotController.BytesDetails

    @Test func hiddenCharactersAreShownAsEscapes() throws {
        let plain = try #require(Details.visibleText(Array("Sign in to example.com\nnonce 42".utf8)))
        #expect(plain.text == "Sign in to example.com\nnonce 42" && !plain.escaped)
        let spoof = try #require(Details.visibleText(Array("Pay Alice \u{202E}0001 DOT".utf8)))
        #expect(spoof.text == #"Pay Alice \u202E0001 DOT"# && spoof.escaped)
        let zeroWidth = try #require(Details.visibleText(Array("a\u{200B}b\u{FEFF}c\u{0007}\u{2028}".utf8)))
        #expect(zeroWidth.text == #"a\u200Bb\uFEFFc\u0007\u2028"#)
        // With escapes on screen, a backslash the message holds is doubled: it cannot imitate one.
        let imitation = try #require(Details.visibleText(Array(#"x\u202E"#.utf8) + Array("\u{202E}".utf8)))
        #expect(imitation.text == #"x\\u202E\u202E"#)
        #expect(Details.visibleText([0xFF, 0xFE]) == nil)  // not UTF-8: hex only
    }

    @Test func thePageGetsTheEscapedTextAndTheHex() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("ivy")
            let auth = Client.bearer(token)
            let created = try await client.call(.post, "/api/polkadot/accounts", json: ["name": "Main"], headers: auth)
            let address = try #require(created["address"] as? String)
            _ = try await client.call(.post, "/api/polkadot/message", json: PolkadotBridgeTests.message("pub(authorize.tab)", nil), headers: auth)
            let data = "0x" + Hex.encode(Array("Pay \u{202E}KCOLB".utf8))
            let asked = try await client.call(
                .post, "/api/polkadot/message",
                json: PolkadotBridgeTests.message("pub(bytes.sign)", ["address": address, "data": data, "type": "bytes"]), headers: auth)
            let id = try #require((asked["pending"] as? [String: Any])?["id"] as? String, "\(asked.json)")
            let details = try await client.call(.get, "/api/polkadot/requests/\(id)/details", headers: auth)
            let bytes = try #require(details["bytes"] as? [String: Any], "\(details.json)")
            #expect(bytes["text"] as? String == #"Pay \u202EKCOLB"# && bytes["escaped"] as? Bool == true)
            #expect(bytes["hex"] as? String == data)
        }
    }
}
