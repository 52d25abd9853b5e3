import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import KeyfobCodecs
import KeyfobCrypto
import KeyfobServer
import KeyfobStore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import WebAuthn
import WebAuthnTestSupport

/// A clock tests can move.
final class TestClock: Sendable {
    private let value = NIOLockedValueBox(Date(timeIntervalSince1970: 1_800_000_000))
    var now: Date { value.withLockedValue { $0 } }
    func advance(_ seconds: TimeInterval) { value.withLockedValue { $0 += seconds } }
}

/// One application over an in-memory SQLite store, with helpers per endpoint.
struct Harness {
    static let origin = "http://localhost:8080"
    let configuration: ServerConfiguration
    let store: SQLiteStore
    let clock = TestClock()
    let vault: KeyVault
    /// Every log line the application wrote, for the no-secrets-in-logs checks.
    let logs = LogCapture()

    /// `databasePath`: a SQLite file instead of memory (tests that read the file itself).
    init(databasePath: String? = nil, _ edit: (inout ServerConfiguration) -> Void = { _ in }) throws {
        var c = ServerConfiguration()
        c.database = ":memory:"
        // Router tests all come from one unknown address: per-IP limits get their own tests.
        c.ipRate = 1_000_000
        c.ipBurst = 1_000_000
        c.signUpsPerHour = 1_000_000
        c.signUpBurst = 1_000_000
        c.maxChallengesPerIP = 1_000_000
        c.publicDirectory =
            URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Public").path
        edit(&c)
        configuration = c
        store = try SQLiteStore(path: databasePath ?? ":memory:", maxLiveChallenges: c.maxLiveChallenges)
        vault = try KeyVault(masterKey: c.masterKey ?? randomBytes(32))
    }

    /// Another instance of `other`'s deployment: the same store, master key and configuration, its
    /// own router and clock (a ceremony begun on one finishes on the other).
    init(sharing other: Harness) {
        (configuration, store, vault) = (other.configuration, other.store, other.vault)
    }

    /// `.router` calls the router directly; `.live` runs a real server on a loopback port (the
    /// socket peer is then 127.0.0.1, for the per-IP tests).
    func run(
        _ framework: TestingSetup = .router, admins: Admins? = nil, hub: RelayHub = RelayHub(),
        _ test: @escaping @Sendable (Client) async throws -> Void
    ) async throws {
        let clock = self.clock
        let logs = self.logs
        var logger = Logger(label: "keyfob") { _ in logs }
        logger.logLevel = .trace
        let services = RouterServices()
        let router = buildRouter(
            configuration: configuration, store: store, vault: vault, clock: { clock.now }, logger: logger,
            admins: admins, hub: hub, services: services)
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), services: services.all)
        try await app.test(framework) { client in try await test(Client(raw: client, harness: self)) }
    }

    /// Every route the router registers (the OpenAPI document's and the extension scope's walks).
    func routes() -> [(method: HTTPRequest.Method, path: String)] {
        buildRouter(configuration: configuration, store: store, vault: vault).routes.map { ($0.method, $0.path.description) }
    }

    /// Users and credentials in the store: what "nothing was written" is checked against.
    func counts() async throws -> [Int] {
        let (users, credentials) = try await store.countUsersAndCredentials()
        return [users, credentials]
    }
}

/// A decoded JSON response.
struct Reply: @unchecked Sendable {
    let status: HTTPResponse.Status
    let headers: HTTPFields
    let json: [String: Any]

    var error: String? { json["error"] as? String }
    subscript(key: String) -> Any? { json[key] }
}

struct Client: Sendable {
    let raw: any TestClientProtocol
    let harness: Harness

    func call(
        _ method: HTTPRequest.Method, _ uri: String, json: Any? = nil, body: [UInt8]? = nil,
        contentType: String? = "application/json", headers: HTTPFields = [:]
    ) async throws -> Reply {
        var fields = headers
        var buffer: ByteBuffer?
        if let json { buffer = ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json)) }
        if let body { buffer = ByteBuffer(bytes: body) }
        if buffer != nil, let contentType { fields[.contentType] = contentType }
        let response = try await raw.execute(uri: uri, method: method, headers: fields, body: buffer)
        let object = (try? JSONSerialization.jsonObject(with: Data(response.body.readableBytesView))) as? [String: Any]
        return Reply(status: response.status, headers: response.headers, json: object ?? [:])
    }

    static func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)"] }

    // MARK: One helper per endpoint

    func registrationOptions(username: String? = nil, headers: HTTPFields = [:], confirmation: Any? = nil) async throws -> Reply {
        if let confirmation {
            return try await call(
                .post, "/generate-registration-options", json: ["username": username ?? "", "confirmation": confirmation],
                headers: headers)
        }
        let query = username.map { "?username=\($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0)" } ?? ""
        return try await call(.get, "/generate-registration-options" + query, headers: headers)
    }

    /// A bearer client asks for its session token (browsers get only the cookie).
    static let wantsToken: HTTPFields = [HTTPField.Name("Keyfob-Session")!: "bearer"]

    func verifyRegistration(
        _ credential: RegistrationCredential, username: String? = nil, challengeKey: String? = nil,
        headers: HTTPFields = [:]
    ) async throws -> Reply {
        var body: [String: Any] = ["cred": try jsonObject(credential)]
        if let username { body["username"] = username }
        if let challengeKey { body["challengeKey"] = challengeKey }
        var fields = headers
        fields.append(contentsOf: Self.wantsToken)
        return try await call(.post, "/verify-registration", json: body, headers: fields)
    }

    func authenticationOptions(username: String? = nil) async throws -> Reply {
        try await call(.get, "/generate-authentication-options" + (username.map { "?username=\($0)" } ?? ""))
    }

    func verifyAuthentication(_ credential: AuthenticationCredential, challengeKey: String? = nil) async throws -> Reply {
        var body: [String: Any] = ["cred": try jsonObject(credential)]
        if let challengeKey { body["challengeKey"] = challengeKey }
        return try await call(.post, "/verify-authentication", json: body, headers: Self.wantsToken)
    }

    /// Adds `new` to `username`'s account, confirmed by `owner` (a passkey older than the session).
    func addPasskey(
        _ new: inout SoftwareAuthenticator, username: String, token: String,
        by owner: inout SoftwareAuthenticator
    ) async throws -> Reply {
        let confirmation = try await confirmation("passkey.add", by: &owner, token: token)
        return try await signUp(&new, username: username, headers: Client.bearer(token), confirmation: confirmation)
    }

    /// `POST /api/signer/key` (import), confirmed by `owner`.
    func importKey(_ body: [String: Any], token: String, by owner: inout SoftwareAuthenticator) async throws -> Reply {
        try await call(
            .post, "/api/signer/key", json: try await confirmed(body, "key.import", by: &owner, token: token),
            headers: Client.bearer(token))
    }

    /// `body` with a `confirmation` for `action` on `target` made by `owner`.
    func confirmed(
        _ body: [String: Any], _ action: String, target: String = "", by owner: inout SoftwareAuthenticator,
        token: String
    ) async throws -> [String: Any] {
        var body = body
        body["confirmation"] = try await confirmation(action, target: target, by: &owner, token: token)
        return body
    }

    /// An assertion made for `action` on `target` by `authenticator` (one of the account's older
    /// passkeys), as `/api/confirmations` asks: the `confirmation` to send with the action.
    func confirmation(
        _ action: String, target: String = "", by authenticator: inout SoftwareAuthenticator, token: String,
        headers: HTTPFields = [:]
    ) async throws -> Any {
        var fields = headers
        fields.append(contentsOf: Self.bearer(token))
        let reply = try await call(.post, "/api/confirmations", json: ["action": action, "target": target], headers: fields)
        guard reply.status == .ok, let options = reply["options"] as? [String: Any],
            let challenge = (options["challenge"] as? String).flatMap(Base64URL.decode)
        else {
            throw TestFailure("no confirmation options: \(reply)")
        }
        var assertion = authenticator.authenticationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin)
        if authenticator.prfSecret != nil, let salts = prfSalts(options, for: authenticator.credentialID) {
            (assertion.prfSalt, assertion.prfSecondSalt) = salts
        }
        let credential = authenticator.authenticate(assertion)
        authenticator.signCount = assertion.signCount
        return try jsonObject(credential)
    }

    // MARK: Whole ceremonies

    /// Options, then a response from `authenticator` (edited by `edit`), then verification.
    func signUp(
        _ authenticator: inout SoftwareAuthenticator, username: String? = nil, headers: HTTPFields = [:],
        confirmation: Any? = nil,
        edit: (inout SoftwareAuthenticator.Fields) -> Void = { _ in }
    ) async throws -> Reply {
        let options = try await registrationOptions(username: username, headers: headers, confirmation: confirmation)
        guard options.status == .ok else { return options }
        let challenge = Base64URL.decode(options["challenge"] as! String)!
        authenticator.userHandle = Base64URL.decode((options["user"] as! [String: Any])["id"] as! String)
        var fields = authenticator.registrationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin)
        if authenticator.prfSecret != nil { fields.prfSalt = prfSalt(options) }
        edit(&fields)
        return try await verifyRegistration(
            authenticator.register(fields), username: username,
            challengeKey: options["challengeKey"] as? String, headers: headers)
    }

    /// Usernameless sign-in; the authenticator's counter moves forward when it succeeds.
    func signIn(
        _ authenticator: inout SoftwareAuthenticator, username: String? = nil,
        edit: (inout SoftwareAuthenticator.Fields) -> Void = { _ in }
    ) async throws -> Reply {
        let options = try await authenticationOptions(username: username)
        let challenge = Base64URL.decode(options["challenge"] as! String)!
        var fields = authenticator.authenticationFields(challenge: challenge, rpID: "localhost", origin: Harness.origin)
        if authenticator.prfSecret != nil { fields.prfSalt = prfSalt(options) }
        edit(&fields)
        let reply = try await verifyAuthentication(authenticator.authenticate(fields))
        if reply.status == .ok { authenticator.signCount = fields.signCount }
        return reply
    }
}

/// The PRF inputs options give one credential (`extensions.prf.evalByCredential[id]`).
func prfSalts(_ options: [String: Any], for credentialID: [UInt8]) -> (first: [UInt8]?, second: [UInt8]?)? {
    let prf = (options["extensions"] as? [String: Any])?["prf"] as? [String: Any]
    guard let values = (prf?["evalByCredential"] as? [String: Any])?[Base64URL.encode(credentialID)] as? [String: Any] else { return nil }
    return ((values["first"] as? String).flatMap(Base64URL.decode), (values["second"] as? String).flatMap(Base64URL.decode))
}

/// The PRF input the options ask for (`extensions.prf.eval.first`).
func prfSalt(_ options: Reply) -> [UInt8]? {
    let prf = (options["extensions"] as? [String: Any])?["prf"] as? [String: Any]
    return ((prf?["eval"] as? [String: Any])?["first"] as? String).flatMap(Base64URL.decode)
}

func jsonObject(_ value: some Encodable) throws -> Any {
    try JSONSerialization.jsonObject(with: JSONEncoder().encode(value))
}

/// A log handler that keeps every line (message and metadata) in memory.
final class LogCapture: LogHandler, @unchecked Sendable {
    private let box = NIOLockedValueBox<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = self.metadata.merging(event.metadata ?? [:]) { $1 }
        box.withLockedValue { $0.append("\(event.level) \(event.message) \(merged)") }
    }

    var lines: [String] { box.withLockedValue { $0 } }
}
