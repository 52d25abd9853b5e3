import Foundation
import HTTPTypes
import Nostr
import Testing

@testable import KeyfobServer

/// #58: docs/openapi.json is the REST contract clients generate from. The server serves exactly
/// it, and its operations are exactly the routes the router registers: a route added without
/// its description, or a description left after its route went, fails here.
@Suite struct OpenAPIContractTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static func document() throws -> [String: Any] {
        let data = try Data(contentsOf: root.appendingPathComponent("docs/openapi.json"))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// "METHOD /path" with every path parameter (and Hummingbird's `**`) written `{}`.
    static func shape(_ method: String, _ path: String) -> String {
        let path = path.replacingOccurrences(of: #"\{[^}/]*\}"#, with: "{}", options: .regularExpression)
            .replacingOccurrences(of: "**", with: "{}")
        return "\(method.uppercased()) \(path)"
    }

    @Test func theServedDocumentIsTheCommittedOne() async throws {
        let committed = try Data(contentsOf: Self.root.appendingPathComponent("docs/openapi.json"))
        try await Harness().run { client in
            let served = try await client.raw.execute(uri: "/openapi.json", method: .get, headers: [:], body: nil)
            #expect(served.status == .ok)
            #expect(served.headers[.contentType]?.hasPrefix("application/json") == true)
            #expect(Data(served.body.readableBytesView) == committed, "Public/openapi.json differs from docs/openapi.json: run make openapi")
        }
        let document = try Self.document()
        #expect(document["openapi"] as? String == "3.1.0")
    }

    @Test func everyRouteIsDescribedAndEveryDescriptionIsARoute() throws {
        let routes = Set(try Harness().routes().map { Self.shape($0.method.rawValue, $0.path) })
        let paths = try #require(try Self.document()["paths"] as? [String: [String: Any]])
        var described = Set<String>()
        for (path, operations) in paths {
            for method in operations.keys { described.insert(Self.shape(method, path)) }
        }
        // The REST signer is one route, `POST /api/signer/{method}`, described method by method
        // so that generated clients get one call each.
        let signer = Set(SignerMethod.allCases.map { "POST /api/signer/\($0.rawValue)" })
        #expect(signer.isSubset(of: described), "missing: \(signer.subtracting(described).sorted())")
        described.subtract(signer)
        described.insert("POST /api/signer/{}")
        #expect(routes.subtracting(described).isEmpty, "routes the document does not describe: \(routes.subtracting(described).sorted())")
        #expect(described.subtracting(routes).isEmpty, "descriptions with no route: \(described.subtracting(routes).sorted())")
        #expect(routes.count >= 70)
    }

    /// A path with routes but not this method answers 405 with `Allow` (what the document does
    /// not declare is refused as HTTP says); a path with no route stays 404.
    @Test func anUndeclaredMethodIs405WithAllow() async throws {
        try await Harness().run { client in
            let trace = try await client.call(.trace, "/session")
            #expect(trace.status == .methodNotAllowed && trace.headers[.allow] == "GET" && trace.error == "invalid_request", "\(trace.json)")
            let delete = try await client.call(.delete, "/generate-registration-options")
            #expect(delete.status == .methodNotAllowed && delete.headers[.allow] == "GET, POST")
            let put = try await client.call(.put, "/api/requests/abc/approve", json: [:])
            #expect(put.status == .methodNotAllowed && put.headers[.allow] == "POST")
            let wildcard = try await client.call(.post, "/connect/nostrconnect://x/y")
            #expect(wildcard.status == .methodNotAllowed && wildcard.headers[.allow] == "GET")
            let signer = try await client.call(.post, "/api/signer/bunker", json: [:])
            #expect(signer.status == .methodNotAllowed && signer.headers[.allow] == "GET", "\(signer.json)")
            #expect(try await client.call(.get, "/no/such/address").status == .notFound)
            #expect(try await client.call(.get, "/style.css").status == .ok)  // Public/'s files are still served
        }
    }

    /// What schemathesis found in /logout: a value of `everywhere` other than 1 or true was read as
    /// "this session only", and any body passed. Now both are 400; everywhere with no session is 401.
    @Test func logoutTakesOnlyWhatItDocuments() async throws {
        try await Harness().run { client in
            let (token, _) = try await client.newAccount("lou")
            let auth = Client.bearer(token)
            #expect(try await client.call(.post, "/logout?everywhere=yes", json: [:], headers: auth).error == "invalid_request")
            for body in ["false", "5", "[]", "\"x\""] {
                let reply = try await client.call(.post, "/logout", body: Array(body.utf8), headers: auth)
                #expect(reply.status == .badRequest, "\(body): \(reply.json)")
            }
            #expect(try await client.session(token)["username"] as? String == "lou")  // still signed in
            #expect(try await client.call(.post, "/logout?everywhere=1", json: [:]).status == .unauthorized)
            #expect(try await client.call(.post, "/logout", headers: auth).status == .ok)
            #expect(try await client.call(.get, "/session", headers: auth).status == .unauthorized)
        }
    }

    /// Every operation names its errors with the error object, and each has an id a generator can use.
    @Test func everyOperationHasAnIdAndTheErrorObject() throws {
        let paths = try #require(try Self.document()["paths"] as? [String: [String: [String: Any]]])
        var ids = Set<String>()
        for (path, operations) in paths {
            for (method, operation) in operations {
                let id = try #require(operation["operationId"] as? String, "\(method) \(path)")
                #expect(ids.insert(id).inserted, "\(id) twice")
                let responses = try #require(operation["responses"] as? [String: Any], "\(method) \(path)")
                #expect(responses.keys.contains { $0.hasPrefix("2") || $0.hasPrefix("3") }, "\(method) \(path) has no success")
                #expect(responses.keys.contains { $0.hasPrefix("4") || $0.hasPrefix("5") }, "\(method) \(path) has no error")
            }
        }
    }
}
