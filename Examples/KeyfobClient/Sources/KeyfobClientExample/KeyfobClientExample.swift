import Foundation
import HTTPTypes
import OpenAPIRuntime
import OpenAPIURLSession

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Signs up and signs in with a software passkey through the client swift-openapi-generator made
/// from docs/openapi.json, then signs a nostr note: the REST flow of a mobile app, end to end.
///
///     swift run KeyfobClientExample http://localhost:8080 http://localhost:8080 [username]
///
/// The first address is where Keyfob listens, the second the origin its passkeys belong to
/// (`--origin`; for `keyfob serve` on its defaults both are http://localhost:8080). Prints one
/// JSON line: the account, its public key and the signed event.
@main
struct KeyfobClientExample {
    static func main() async throws {
        let arguments = CommandLine.arguments
        guard arguments.count >= 3, let server = URL(string: arguments[1]) else {
            FileHandle.standardError.write(Data("usage: KeyfobClientExample <server URL> <origin> [username]\n".utf8))
            exit(2)
        }
        let origin = arguments[2]
        let username = arguments.count > 3 ? arguments[3] : "example-\(UInt32.random(in: 0...UInt32.max))"
        let transport = URLSessionTransport()
        let anonymous = Client(serverURL: server, transport: transport)
        var passkey = SoftwarePasskey()

        // Sign up: creation options, the passkey's answer, the session token (asked for with
        // Keyfob-Session: bearer, as an app that is not a browser does).
        let creation = try await anonymous.registrationOptions(query: .init(username: username)).ok.body.json
        let rpID = creation.rp.id ?? "localhost"
        let made = passkey.register(challenge: creation.challenge, rpID: rpID, origin: origin)
        let credentialID = Base64URL.encode(passkey.credentialID)
        let registered = try await anonymous.verifyRegistration(
            headers: .init(keyfobSession: .bearer),
            body: .json(
                .init(
                    username: username, challengeKey: creation.challengeKey,
                    cred: .init(
                        id: credentialID, rawId: credentialID, _type: "public-key",
                        response: .init(
                            clientDataJSON: Base64URL.encode(made.clientData), attestationObject: Base64URL.encode(made.attestation),
                            transports: ["internal"]))))
        ).ok.body.json
        guard registered.verified else { throw ExampleError("the registration was not verified") }

        // Sign in again with the same passkey: request options, an assertion, a new token.
        let request = try await anonymous.authenticationOptions().ok.body.json
        let asserted = try passkey.assert(challenge: request.challenge, rpID: request.rpId ?? rpID, origin: origin)
        let signedIn = try await anonymous.verifyAuthentication(
            headers: .init(keyfobSession: .bearer),
            body: .json(
                .init(
                    cred: .init(
                        id: credentialID, rawId: credentialID, _type: "public-key",
                        response: .init(
                            clientDataJSON: Base64URL.encode(asserted.clientData), authenticatorData: Base64URL.encode(asserted.authData),
                            signature: Base64URL.encode(asserted.signature), userHandle: creation.user.id)),
                    challengeKey: request.challengeKey))
        ).ok.body.json
        guard let token = signedIn.token else { throw ExampleError("no session token came back") }

        // Sign a note with the session (a passkey sign-in unlocks the signer).
        let client = Client(serverURL: server, transport: transport, middlewares: [BearerToken(token: token)])
        let session = try await client.session().ok.body.json
        let signed = try await client.signEvent(
            body: .json(.init(id: "note-1", event: .case1(.init(kind: 1, content: "hello from a generated client", tags: []))))
        ).ok.body.json
        let event = try JSONEncoder().encode(signed.event)
        let line = #"{"username":"\#(signedIn.username)","pubkey":"\#(session.pubkey)","event":\#(String(decoding: event, as: UTF8.self))}"#
        print(line)
    }
}

/// Sends the session token with every call, as `Authorization: Bearer <token>`.
struct BearerToken: ClientMiddleware {
    let token: String
    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[.authorization] = "Bearer \(token)"
        return try await next(request, body, baseURL)
    }
}

struct ExampleError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
