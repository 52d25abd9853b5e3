import Foundation
import HTTPTypes
import KeyfobCodecs
import KeyfobStore
import Nostr
import Testing
import WebAuthn
import WebAuthnTestSupport

@testable import KeyfobServer

/// Query strings read the way the other side writes them (issue #23, interop): each request is
/// built by a real encoder — Node's `URLSearchParams`, Python's `urlencode`, Swift's
/// `URLComponents` — and what Keyfob shows for approval must be exactly what was sent.
@Suite struct QueryInteropTests {
    static let text = #"meet me at 5 pm & bring "snacks" = 100% fun; 1+1=2 ✓"#
    static let peer = try! SecretKey(hex: String(repeating: "42", count: 32)).publicKey

    /// The query `encoder` writes for `pairs`.
    static func encode(_ encoder: String, _ pairs: [(String, String)]) throws -> String {
        switch encoder {
        case "URLComponents":
            var components = URLComponents()
            components.queryItems = pairs.map { URLQueryItem(name: $0.0, value: $0.1) }
            // URLComponents leaves "+" as it is, which every form reader (URLSearchParams, PHP,
            // Keyfob) takes for a space: Apple's documented advice is to encode it yourself.
            return components.percentEncodedQuery!.replacingOccurrences(of: "+", with: "%2B")
        default:
            let json = String(data: try JSONSerialization.data(withJSONObject: pairs.map { [$0.0, $0.1] }), encoding: .utf8)!
            let (program, arguments): (String, [String]) =
                encoder == "node"
                ? ("/usr/bin/env", ["node", "-e", "process.stdout.write(new URLSearchParams(JSON.parse(process.argv[1])).toString())", json])
                : (
                    "/usr/bin/env",
                    [
                        "python3", "-c",
                        "import sys, json, urllib.parse; sys.stdout.write(urllib.parse.urlencode([tuple(p) for p in json.loads(sys.argv[1])]))", json,
                    ]
                )
            let process = Process()
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = arguments
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let output = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw TestFailure("\(encoder) failed") }
            return String(decoding: output, as: UTF8.self)
        }
    }

    @Test(arguments: ["node", "python", "URLComponents"])
    func whatAnEncoderWroteIsWhatIsShownAndSigned(_ encoder: String) async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let event =
                #"{"kind":1,"content":"\#(Self.text.replacingOccurrences(of: "\"", with: "\\\""))","tags":[["t","a b"]],"created_at":1700000000}"#
            let cb = "https://client.example/cb"
            let requests: [(String, [(String, String)], String)] = [
                ("/nostrsigner", [("type", "sign_event"), ("event", event), ("x-success", cb), ("x-source", "My App + more")], "event"),
                ("/nostrsigner", [("type", "nip44_encrypt"), ("plaintext", Self.text), ("pubkey", Self.peer.hex), ("x-success", cb)], "plaintext"),
                ("/app/sign", [("payload", Base64URL.encode(Array(event.utf8))), ("cb", cb), ("origin", "My App")], "event"),
            ]
            for (path, pairs, field) in requests {
                let target = path + "?" + (try Self.encode(encoder, pairs))
                let (reply, location, body) = try await client.open(target, token: token)
                #expect(reply.status == .seeOther, "\(encoder) \(path): \(reply.status) \(body.prefix(200))")
                guard let location, location.hasPrefix("/approve/") else { continue }
                let shown = try await client.call(.get, "/api/requests/\(location.dropFirst("/approve/".count))", headers: Client.bearer(token))
                if field == "event" {
                    let shownEvent = try #require(shown["event"] as? [String: Any])
                    #expect(shownEvent["content"] as? String == Self.text, "\(encoder) \(path)")
                    #expect(shownEvent["tags"] as? [[String]] == [["t", "a b"]], "\(encoder) \(path)")
                } else {
                    #expect(shown[field] as? String == Self.text, "\(encoder) \(path)")
                }
                if path == "/nostrsigner", pairs.contains(where: { $0.0 == "x-source" }) {
                    #expect(shown["clientName"] as? String == "My App + more", "\(encoder)")
                }
            }
        }
    }

    /// `nip04_decrypt` / `nip44_decrypt` with no `encryptedText`, or an empty one, is a 400 with a
    /// link back to `x-error`, never the approval page (there is nothing to approve).
    @Test(arguments: ["nip04_decrypt", "nip44_decrypt"])
    func aDecryptionWithoutCiphertextIsRefusedWithALinkBack(_ method: String) async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            // Both path forms (`nostrsigner:?…` and the draft's `nostrsigner://<method>?…`), the query
            // written by Foundation's own encoder.
            for (path, extra) in [("/nostrsigner", ""), ("/nostrsigner", "&encryptedText="), ("/nostrsigner/\(method)", "")] {
                var components = URLComponents()
                components.queryItems = [
                    URLQueryItem(name: "type", value: method), URLQueryItem(name: "pubkey", value: Self.peer.hex),
                    URLQueryItem(name: "returnType", value: "plaintext"), URLQueryItem(name: "id", value: "7"),
                    URLQueryItem(name: "x-success", value: "https://client.example/cb"),
                    URLQueryItem(name: "x-error", value: "https://client.example/err"),
                ]
                let target = path + "?" + (components.percentEncodedQuery ?? "") + extra
                let (reply, location, body) = try await client.open(target, token: token)
                #expect(reply.status == .badRequest && location == nil, "\(target): \(reply.status) \(location ?? "")")
                #expect(
                    body.contains(#"id="back""#) && body.contains("https://client.example/err?code=invalid_request"),
                    "\(body.prefix(600))")
            }
        }
    }

    /// DIP-05 never signs kinds 14 and 15 (unsigned rumors): refused before the page, with DIP-05's
    /// `invalid_content` — the user rejected nothing.
    @Test(arguments: [14, 15])
    func dip05RumorKindsAreRefusedUpFrontAsInvalidContent(_ kind: Int) async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("alice")
            let event = #"{"kind":\#(kind),"content":"hi","tags":[]}"#
            let target =
                "/nostrsigner/" + event.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                + "?type=sign_event&callbackUrl=" + "primal://nostrsigner".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let (reply, location, body) = try await client.open(target, token: token)
            #expect(reply.status != .seeOther || location?.hasPrefix("/approve/") != true, "shown for approval")
            #expect(body.contains("error=invalid_content"), "\(reply.status) \(location ?? "") \(body.prefix(400))")
            #expect(!body.contains("user_rejected"))
        }
    }
}
