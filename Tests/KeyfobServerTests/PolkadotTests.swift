import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobCrypto
import Nostr
import Polkadot
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

/// The Nova bridge's messages against a real router: authorize, list, sign with a passkey
/// confirmation bound to the payload, and every refusal signing nothing.
@Suite struct PolkadotBridgeTests {
    static let dapp = "https://dapp.example/app?x=1"
    static let phrase = "bottom drive obey lake curtain smoke basket hold race lonely fit walk"

    static func payload(
        address: String,
        extensions: [String] = KnownChains.polkadotRelay
    ) -> [String: Any] {
        [
            "address": address, "blockHash": "0xde8f69eeb5e065e18c6950ff708d7e551f68dc9bf59a07c52367c0280f805ec7",
            "blockNumber": "0x00231d30", "era": "0x0703",
            "genesisHash": "0x91b171bb158e2d3848fa23a9f1c25182fb8e20313b2c1eb49219da7a70ce90c3",
            "method": "0x0503008eaf04151687736326c9fea17e25fc5287613693c912909cb226aa4794f26a480700e40b5402",
            "nonce": "0x00000005", "signedExtensions": extensions, "specVersion": "0x000f4dfc",
            "tip": "0x00000000000000000000000000000000", "transactionVersion": "0x0000001a", "version": 4,
        ]
    }

    /// A bridge message as Nova's listener forwards it.
    static func message(_ type: String, _ request: Any?, url: String = dapp) -> [String: Any] {
        ["id": "1639543839750.1", "msgType": type, "origin": "dapp-request", "request": request ?? NSNull(), "url": url]
    }

    /// Approves request `id` with `authenticator`'s passkey over the committed bytes.
    static func approve(
        _ id: String, _ client: Client, token: String, _ authenticator: inout SoftwareAuthenticator, withPRF: Bool = true
    ) async throws -> Reply {
        let options = try await client.call(.post, "/api/polkadot/requests/\(id)/challenge", json: [:], headers: Client.bearer(token))
        let committed = try #require(options["committed"] as? String)
        let challenge = Base64URL.decode(options["challenge"] as! String)!
        #expect(challenge == sha256(Array(committed.utf8)))
        var fields = authenticator.authenticationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin)
        if withPRF, authenticator.prfSecret != nil, let salts = prfSalts(options.json, for: authenticator.credentialID) {
            (fields.prfSalt, fields.prfSecondSalt) = salts
        }
        fields.signCount += 1
        authenticator.signCount = fields.signCount
        return try await client.call(
            .post, "/api/polkadot/requests/\(id)/approve", json: ["assertion": try jsonObject(authenticator.authenticate(fields))],
            headers: Client.bearer(token))
    }

    @Test func aDappConnectsListsAndSignsAnExtrinsicConfirmedByThePasskey() async throws {
        try await Harness().run { client in
            var (token, authenticator) = try await client.newAccount("alice")
            let auth = Client.bearer(token)
            let phrase: [String: Any] = ["mnemonic": Self.phrase, "path": "//Alice", "name": "Alice", "network": 0]
            // Bringing a phrase in needs the passkey (a stolen session must not plant a known key).
            let unconfirmed = try await client.call(.post, "/api/polkadot/accounts", json: phrase, headers: auth)
            #expect(unconfirmed.status == .forbidden && unconfirmed.error == "confirmation_required", "\(unconfirmed.json)")
            let created = try await client.call(
                .post, "/api/polkadot/accounts",
                json: try await client.confirmed(phrase, "polkadot.import", by: &authenticator, token: token), headers: auth)
            #expect(created.status == .created, "\(created.json)")
            #expect(created["address"] as? String == "15oF4uVJwmo4TdGW7VfQxNLavjCXviqxT9S1MgbjMNHr6Sp5")

            // Not connected yet: nothing listed, nothing signed.
            let early = try await client.call(.post, "/api/polkadot/message", json: Self.message("pub(accounts.list)", nil), headers: auth)
            #expect(early.status == .forbidden && early.error == "permission_denied" && early["type"] as? String == "pub(accounts.list)")
            let authorized = try await client.call(.post, "/api/polkadot/message", json: Self.message("pub(authorize.tab)", nil), headers: auth)
            #expect(authorized["result"] as? Bool == true && authorized["type"] as? String == "pub(authorize.tab)")
            let list = try await client.call(.post, "/api/polkadot/message", json: Self.message("pub(accounts.list)", nil), headers: auth)
            let accounts = try #require(list["result"] as? [[String: Any]])
            #expect(accounts.count == 1 && accounts[0]["type"] as? String == "sr25519" && accounts[0]["name"] as? String == "Alice")

            // The dapp provides the runtime's V15 metadata and asks with the metadata check off
            // (mode 0): Keyfob sets mode 1 and its RFC-0078 hash, so the page states the call as fact.
            try await client.provideTestRuntime(token: token)
            let address = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
            let asked = try await client.call(
                .post, "/api/polkadot/message", json: Self.message("pub(extrinsic.sign)", TestRuntime.payload(address: address)),
                headers: auth)
            #expect(asked.status == .accepted, "\(asked.json)")
            let pending = try #require(asked["pending"] as? [String: Any])
            let id = try #require(pending["id"] as? String)
            #expect((pending["approvalUrl"] as? String)?.hasSuffix("/polkadot-approve.html?id=\(id)") == true)

            let details = try await client.call(.get, "/api/polkadot/requests/\(id)/details", headers: auth)
            let extrinsic = try #require(details["extrinsic"] as? [String: Any])
            #expect(extrinsic["chain"] as? String == "Polkadot" && extrinsic["nonce"] as? String == "5")
            #expect(extrinsic["verified"] as? Bool == true && (extrinsic["callNote"] as? String)?.hasPrefix("Checked") == true)
            let bob = "14E5nqKAp3oAJcmzgZhUD2RcptBeUBScxKHgJKU4HPNcKVf3"
            #expect(extrinsic["summary"] as? String == "Send 1 DOT to \(bob), keeping your account open", "\(extrinsic)")
            #expect(extrinsic["recipient"] as? String == bob)
            #expect(details["origin"] as? String == "https://dapp.example" && details["verifiedOrigin"] as? Bool == false)

            // Without the passkey: refused, nothing signed.
            let bare = try await client.call(.post, "/api/polkadot/requests/\(id)/approve", json: [:], headers: auth)
            #expect(bare.status == .forbidden)
            let approved = try await Self.approve(id, client, token: token, &authenticator)
            let result = try #require(approved["result"] as? [String: Any], "\(approved.json)")
            let signature = try #require(PolkadotHex.decode(result["signature"] as! String))
            // MultiSignature::Sr25519 (1), then the schnorrkel signature over the SCALE payload
            // with mode 1 and Keyfob's hash.
            #expect(signature.count == 65 && signature[0] == 1)
            let signed = try SignerPayload(json: TestRuntime.payload(address: address, hash: TestRuntime.hash)).signingBytes
            let alice = try #require(SS58.decode(address)).accountId
            #expect(Sr25519.verify(signature: Array(signature.dropFirst()), message: signed, publicKey: alice))
            // The dapp's payload (mode 0) is not what was signed: it gets the signed transaction,
            // written out here by hand from extrinsic v4's layout.
            let transaction = try #require(PolkadotHex.decode(result["signedTransaction"] as? String ?? ""), "\(result)")
            let body: [UInt8] =
                [0x84, 0x00] + alice + signature + [0x07, 0x03] + [5 << 2] + [0] + [1] + PolkadotHex.decode(TestRuntime.transfer)!
            #expect(transaction == SCALE.compact(UInt64(body.count)) + body)

            // The app polls the outcome; deciding twice is refused.
            let state = try await client.call(.get, "/api/polkadot/requests/\(id)", headers: auth)
            #expect(state["state"] as? String == "approved")
            #expect((state["outcome"] as? [String: Any])?["type"] as? String == "pub(extrinsic.sign)")
            #expect(try await client.call(.post, "/api/polkadot/requests/\(id)/reject", json: [:], headers: auth).status == .notFound)

            // The history keeps a receipt naming the payload's hash.
            let history = try await client.call(.get, "/api/signer/history", headers: auth)["entries"] as! [[String: Any]]
            let entry = try #require(history.first { $0["method"] as? String == "polkadot.sign_payload" && $0["outcome"] as? String == "approved" })
            let receipt = try await client.call(.get, "/api/signer/history/\(entry["id"] as! String)/receipt", headers: auth)
            #expect((receipt["committed"] as? String)?.contains("payload-blake2b256:\(Hex.encode(blake2b256(signed)))") == true)
        }
    }

    /// Calls-only metadata (polkadot-js's `metaCalls`, here Polkadot's V14) cannot be checked
    /// against the chain: the transaction is refused unless the account's owner allowed unchecked
    /// ones with a passkey, and then the page gives the call as the site's words, with no summary.
    @Test func unverifiedTransactionsAreRefusedUnlessTheOwnerAllowedThem() async throws {
        let metadata = try Data(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Vectors/polkadot/polkadot_v14_metadata.scale"))
        try await Harness().run { client in
            var (token, authenticator) = try await client.newAccount("erin")
            let auth = Client.bearer(token)
            let created = try await client.call(.post, "/api/polkadot/accounts", json: ["network": 0], headers: auth)
            let address = try #require(created["address"] as? String)
            let accountID = try #require(created["id"] as? String)
            #expect(created["acceptsUnverified"] as? Bool == false)
            _ = try await client.call(.post, "/api/polkadot/message", json: Self.message("pub(authorize.tab)", nil), headers: auth)
            let def: [String: Any] = [
                "chain": "Polkadot", "genesisHash": "0x91b171bb158e2d3848fa23a9f1c25182fb8e20313b2c1eb49219da7a70ce90c3",
                "specVersion": 9370, "ss58Format": 0, "tokenDecimals": 10, "tokenSymbol": "DOT", "icon": "", "types": [:],
                "metaCalls": metadata.base64EncodedString(),
            ]
            let provided = try await client.call(.post, "/api/polkadot/message", json: Self.message("pub(metadata.provide)", def), headers: auth)
            #expect(provided["result"] as? Bool == true, "\(provided.json)")
            var broken = def
            broken["metaCalls"] = Data("not metadata".utf8).base64EncodedString()
            #expect(
                try await client.call(.post, "/api/polkadot/message", json: Self.message("pub(metadata.provide)", broken), headers: auth).error
                    == "invalid_content")
            func ask(url: String = PolkadotBridgeTests.dapp) async throws -> Reply {
                try await client.call(
                    .post, "/api/polkadot/message", json: Self.message("pub(extrinsic.sign)", Self.payload(address: address), url: url),
                    headers: auth)
            }
            // Off by default: refused, saying what the site must do.
            let refused = try await ask()
            #expect(refused.status == .forbidden && refused.error == "unverified_transaction", "\(refused.json)")
            #expect((refused["message"] as? String)?.contains("rawMetadata") == true)
            // Turning it on takes a passkey assertion made for it.
            let unconfirmed = try await client.call(
                .post, "/api/polkadot/accounts/\(accountID)/settings", json: ["acceptUnverified": true], headers: auth)
            #expect(unconfirmed.error == "confirmation_required")
            let mistyped = try await client.call(
                .post, "/api/polkadot/accounts/\(accountID)/settings", json: ["acceptUnverified": "yes"], headers: auth)
            #expect(mistyped.status == .badRequest && mistyped.error == "invalid_request")
            let allowed = try await client.acceptUnverified(accountID, token: token, by: &authenticator)
            #expect(allowed["acceptsUnverified"] as? Bool == true, "\(allowed.json)")

            let asked = try await ask()
            let id = try #require((asked["pending"] as? [String: Any])?["id"] as? String, "\(asked.json)")
            let details = try await client.call(.get, "/api/polkadot/requests/\(id)/details", headers: auth)
            let extrinsic = try #require(details["extrinsic"] as? [String: Any])
            let bob = SS58.encode(
                accountId: Array(try #require(PolkadotHex.decode("0x8eaf04151687736326c9fea17e25fc5287613693c912909cb226aa4794f26a48"))), prefix: 0)
            #expect(extrinsic["verified"] as? Bool == false && extrinsic["summary"] == nil && extrinsic["decodedCall"] == nil)
            #expect(extrinsic["siteDescription"] as? String == "Balances.transfer_keep_alive(dest: Id(\(bob)), value: 1 DOT)")
            #expect((extrinsic["callNote"] as? String)?.hasPrefix("Not checked: the site provided only the calls' metadata") == true)
            // Another site's metadata describes nothing for this one.
            let other = try await client.call(
                .post, "/api/polkadot/message",
                json: Self.message("pub(authorize.tab)", nil, url: "https://other.example"), headers: auth)
            #expect(other["result"] as? Bool == true)
            let id2 = try #require((try await ask(url: "https://other.example")["pending"] as? [String: Any])?["id"] as? String)
            let details2 = try await client.call(.get, "/api/polkadot/requests/\(id2)/details", headers: auth)
            #expect((details2["extrinsic"] as? [String: Any])?["siteDescription"] == nil)

            // Signed as the site sent it (mode 0), with no transaction handed back.
            let approved = try await Self.approve(id, client, token: token, &authenticator)
            let result = try #require(approved["result"] as? [String: Any], "\(approved.json)")
            #expect(result["signedTransaction"] == nil)
            let signature = try #require(PolkadotHex.decode(result["signature"] as! String))
            let signed = try SignerPayload(json: Self.payload(address: address)).signingBytes
            #expect(Sr25519.verify(signature: Array(signature.dropFirst()), message: signed, publicKey: try #require(SS58.decode(address)).accountId))
            // Turned off again (with the passkey too), a waiting unchecked request is not signed.
            let id3 = try #require((try await ask()["pending"] as? [String: Any])?["id"] as? String)
            let off = try await client.acceptUnverified(accountID, false, token: token, by: &authenticator)
            #expect(off["acceptsUnverified"] as? Bool == false)
            let late = try await Self.approve(id3, client, token: token, &authenticator)
            #expect(late.error == "unverified_transaction", "\(late.json)")
        }
    }

    /// A key sealed by passkeys: after the kill switch, only the confirming sealing passkey's PRF
    /// output opens it — with the same one prompt.
    @Test func aSealedAccountSignsOnlyWithTheSealingPasskeysPRF() async throws {
        try await Harness().run { client in
            var authenticator = SoftwareAuthenticator.withPRF()
            let token = try #require(try await client.signUp(&authenticator, username: "sealy")["token"] as? String)
            let auth = Client.bearer(token)
            #expect(try await client.seal(&authenticator, token: token).status == .ok)
            let created = try await client.call(.post, "/api/polkadot/accounts", json: [:], headers: auth)
            let address = try #require(created["address"] as? String, "\(created.json)")
            _ = try await client.call(.post, "/api/polkadot/message", json: Self.message("pub(authorize.tab)", nil), headers: auth)
            try await client.provideTestRuntime(token: token)
            let asked = try await client.call(
                .post, "/api/polkadot/message", json: Self.message("pub(extrinsic.sign)", TestRuntime.payload(address: address)),
                headers: auth)
            let id = try #require((asked["pending"] as? [String: Any])?["id"] as? String)
            _ = try await client.harness.store.lockAllSessions()
            let withoutPRF = try await Self.approve(id, client, token: token, &authenticator, withPRF: false)
            #expect(withoutPRF.status == .forbidden && withoutPRF.error == "signer_locked", "\(withoutPRF.json)")
            let approved = try await Self.approve(id, client, token: token, &authenticator)
            let signature = try #require(PolkadotHex.decode((approved["result"] as? [String: Any])?["signature"] as? String ?? ""))
            let signed = try SignerPayload(json: TestRuntime.payload(address: address, hash: TestRuntime.hash)).signingBytes
            #expect(Sr25519.verify(signature: Array(signature.dropFirst()), message: signed, publicKey: try #require(SS58.decode(address)).accountId))
        }
    }

    @Test func theProviderScriptLoadsFromAnySite() async throws {
        try await Harness().run { client in
            let script = try await client.call(.get, "/polkadot.js")
            #expect(script.status == .ok && script.headers[.accessControlAllowOrigin] == "*")
            #expect(try await client.call(.get, "/polkadot-approve.html").headers[.accessControlAllowOrigin] == nil)
        }
    }

    @Test func rawBytesAreSignedWrappedAndWithoutATypeByte() async throws {
        try await Harness().run { client in
            var (token, authenticator) = try await client.newAccount("bob")
            let auth = Client.bearer(token)
            let created = try await client.call(.post, "/api/polkadot/accounts", json: ["type": "ed25519"], headers: auth)
            let address = try #require(created["address"] as? String)
            _ = try await client.call(.post, "/api/polkadot/message", json: Self.message("pub(authorize.tab)", nil), headers: auth)
            let data = Array("Sign in to dapp.example".utf8)
            let asked = try await client.call(
                .post, "/api/polkadot/message",
                json: Self.message("pub(bytes.sign)", ["address": address, "data": PolkadotHex.encode(data), "type": "bytes"]), headers: auth)
            let id = try #require((asked["pending"] as? [String: Any])?["id"] as? String)
            let details = try await client.call(.get, "/api/polkadot/requests/\(id)/details", headers: auth)
            #expect((details["bytes"] as? [String: Any])?["text"] as? String == "Sign in to dapp.example")
            let approved = try await Self.approve(id, client, token: token, &authenticator)
            let signature = try #require(PolkadotHex.decode((approved["result"] as! [String: Any])["signature"] as! String))
            let publicKey = try #require(SS58.decode(address)).accountId
            #expect(signature.count == 64)
            #expect(Ed25519.verify(signature: signature, message: Array("<Bytes>".utf8) + data + Array("</Bytes>".utf8), publicKey: publicKey))
        }
    }

    @Test func refusalsHaveCodesAndSignNothing() async throws {
        try await Harness().run { client in
            var (token, authenticator) = try await client.newAccount("carol")
            let auth = Client.bearer(token)
            let created = try await client.call(.post, "/api/polkadot/accounts", json: [:], headers: auth)
            let address = try #require(created["address"] as? String)
            _ = try await client.call(.post, "/api/polkadot/message", json: Self.message("pub(authorize.tab)", nil), headers: auth)
            func refused(_ request: [String: Any], type: String = "pub(extrinsic.sign)") async throws -> Reply {
                try await client.call(.post, "/api/polkadot/message", json: Self.message(type, request), headers: auth)
            }
            let unknown = try await refused(Self.payload(address: address, extensions: ["CheckNonce", "CheckSomethingNew"]))
            #expect(unknown.status == .badRequest && unknown.error == "unsupported_type")
            #expect((unknown["message"] as? String)?.contains("CheckSomethingNew") == true)
            var badHex = Self.payload(address: address)
            badHex["method"] = "0x05zz"
            #expect(try await refused(badHex).error == "invalid_content")
            let stranger = try await refused(Self.payload(address: "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"))
            #expect(stranger.error == "invalid_pubkey")
            #expect(try await refused(["address": address, "data": "not hex"], type: "pub(bytes.sign)").error == "invalid_content")
            let otherSite = try await client.call(
                .post, "/api/polkadot/message",
                json: Self.message("pub(bytes.sign)", ["address": address, "data": "0x00"], url: "https://evil.example"), headers: auth)
            #expect(otherSite.error == "permission_denied")
            #expect(try await refused([:], type: "pub(nonsense)").error == "unsupported_type")
            // Only metadata may be large: a signing message keeps the usual body limit.
            var huge = Self.payload(address: address)
            huge["method"] = "0x" + String(repeating: "00", count: 100_000)
            let tooLarge = try await refused(huge)
            #expect(tooLarge.status == .contentTooLarge && tooLarge.error == "payload_too_large")
            #expect(
                try await client.call(.post, "/api/polkadot/message", json: ["msgType": "pub(accounts.list)"], headers: auth).error
                    == "invalid_request")

            // A locked signer (the kill switch): the request waits, approving it is refused.
            try await client.provideTestRuntime(token: token)
            let asked = try await refused(TestRuntime.payload(address: address))
            let id = try #require((asked["pending"] as? [String: Any])?["id"] as? String)
            _ = try await client.harness.store.lockAllSessions()
            let locked = try await client.call(.post, "/api/polkadot/requests/\(id)/approve", json: [:], headers: auth)
            #expect(locked.error == "signer_locked")
            #expect(try await client.call(.get, "/api/polkadot/requests/\(id)", headers: auth)["state"] as? String == "pending")
            // The request's own passkey confirmation is presence: it unlocks and signs (one prompt).
            let approved = try await Self.approve(id, client, token: token, &authenticator)
            #expect(approved["result"] != nil, "\(approved.json)")
            #expect(try await client.call(.get, "/session", headers: auth)["signerLocked"] as? Bool == false)
        }
    }

    @Test func accountsExportAsPolkadotJsBackupsAndNeedThePasskeyToLeave() async throws {
        try await Harness().run { client in
            var (token, authenticator) = try await client.newAccount("dave")
            let auth = Client.bearer(token)
            let created = try await client.call(
                .post, "/api/polkadot/accounts",
                json: try await client.confirmed(
                    ["mnemonic": Self.phrase, "path": "//foo/bar"], "polkadot.import", by: &authenticator, token: token),
                headers: auth)
            #expect(created["address"] as? String == "5DLU27is5iViNopQb2KxsTyPx6j4vCu8X3sk3j3NNLkPCqKM")
            let id = try #require(created["id"] as? String)
            let unconfirmed = try await client.call(.post, "/api/polkadot/accounts/\(id)/export", json: ["password": "long enough"], headers: auth)
            #expect(unconfirmed.error == "confirmation_required")
            let body = try await client.confirmed(["password": "long enough"], "polkadot.export", target: id, by: &authenticator, token: token)
            let file = try await client.call(.post, "/api/polkadot/accounts/\(id)/export", json: body, headers: auth)
            #expect((file["encoding"] as? [String: Any])?["version"] as? String == "3")
            let key = try JSONBackup.importKey(
                JSONDecoder().decode(JSONBackup.File.self, from: JSONSerialization.data(withJSONObject: file.json)), password: "long enough")
            #expect(key.address(prefix: 42) == "5DLU27is5iViNopQb2KxsTyPx6j4vCu8X3sk3j3NNLkPCqKM")
            // Imported back (as another account of the same user), the backup gives the same address.
            let again = try await client.call(
                .post, "/api/polkadot/accounts",
                json: try await client.confirmed(
                    ["backup": file.json, "password": "long enough"], "polkadot.import", by: &authenticator, token: token),
                headers: auth)
            #expect(again["address"] as? String == "5DLU27is5iViNopQb2KxsTyPx6j4vCu8X3sk3j3NNLkPCqKM")
            let wrong = try await client.call(
                .post, "/api/polkadot/accounts",
                json: try await client.confirmed(["backup": file.json, "password": "nope"], "polkadot.import", by: &authenticator, token: token),
                headers: auth)
            #expect(wrong.error == "decrypt_failed")
            // The nostr key cannot be replaced from under them.
            let replace = try await client.importKey(["secret": String(repeating: "11", count: 32)], token: token, by: &authenticator)
            #expect(replace.status == .conflict)
            let removed = try await client.call(
                .post, "/api/polkadot/accounts/\(id)/remove",
                json: try await client.confirmed([:], "polkadot.remove", target: id, by: &authenticator, token: token), headers: auth)
            #expect(removed["removed"] as? Bool == true)
            // Nothing secret reached a log line.
            let logged = client.harness.logs.lines.joined(separator: "\n")
            #expect(!logged.contains("bottom drive") && !logged.contains("long enough"))
        }
    }
}
