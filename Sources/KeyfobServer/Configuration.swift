import Foundation
import KeyfobPostgres
import WebAuthn

/// Every setting of DESIGN.md §6. `keyfob serve` fills it from flags, `KEYFOB_*`
/// variables and an optional config file; tests build it directly.
public struct ServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port = 8080
    /// The built-in NIP-46 relay's own listener (`wss://<host>/nip46` behind the TLS proxy):
    /// nil means `port + 10`; 0 turns it off.
    public var nip46Port: Int?
    /// The port the NIP-46 relay listens on, or nil when it is off.
    public var effectiveNIP46Port: Int? {
        let chosen = nip46Port ?? port + 10
        return chosen == 0 || chosen > 65535 ? nil : chosen
    }
    public var rpID = "localhost"
    public var rpName = "Keyfob"
    /// Allowed origins; empty means `http://localhost:<port>` for rpId localhost, else `https://<rpId>`.
    public var origins: [String] = []
    public var dataDirectory = "./data"
    /// `sqlite` (a file in the data directory), `sqlite:PATH`, or `:memory:` for tests.
    public var database = "sqlite"
    /// Seconds a ceremony's challenge stays valid (the options' `timeout`).
    public var challengeTimeout = 60
    /// Seconds a session lasts.
    public var sessionTTL = 12 * 3600
    /// Seconds the signer stays unlocked after a passkey assertion with user verification.
    public var signerUnlockTTL = 600
    public var admins: [String] = []
    /// Addresses of reverse proxies whose X-Forwarded-For is believed.
    public var trustedProxies: [String] = []
    /// Folder of the static web UI.
    public var publicDirectory = "Public"
    /// Require user verification in ceremonies (DESIGN.md default: yes).
    public var requireUserVerification = true
    /// COSE algorithms offered at registration.
    public var algorithms: [COSEAlgorithm] = COSEAlgorithm.serverDefaults
    /// Largest request body accepted, in bytes.
    public var maxBodySize = 64 * 1024
    /// The master key file; nil means `<data-dir>/master.key`.
    public var masterKeyFile: String?
    /// The master key itself (from `KEYFOB_MASTER_KEY`, or tests); beats the file when set.
    public var masterKey: [UInt8]?
    /// Signer operations a session may run per minute.
    public var signRate = 120
    /// Options and verify requests per minute per client IP (each kind its own bucket)...
    /// (Defaults sized for a few hundred people behind one NAT signing in at once:
    /// docs/configuration.md, "Per-address limits".)
    public var ipRate = 600
    /// ...in bursts of up to this many.
    public var ipBurst = 300
    /// New accounts (registration options for a new user) per client IP per hour.
    public var signUpsPerHour = 300
    /// ...of which this many at once.
    public var signUpBurst = 100
    /// Unfinished ceremonies (live challenges) a client IP may hold.
    public var maxChallengesPerIP = 600
    /// IPv6 clients are counted by this prefix for every per-address limit and cap.
    public var ipv6Prefix = 64
    /// Unfinished ceremonies the whole server holds (SQLite keeps them in memory, 0.25–0.4 KB each).
    public var maxLiveChallenges = 250_000
    /// Folder with one subfolder of PEM root certificates per attestation format (`packed/`, `tpm/`, …).
    public var attestationRootsDirectory: String?
    /// Accept RS1 and RSA keys under 2048 bits (old TPMs).
    public var allowLegacyAlgorithms = false
    /// DER roots per attestation format, read at start-up from `attestationRootsDirectory`.
    public var trustAnchors: [String: [[UInt8]]] = [:]

    public var attestationPolicy: AttestationPolicy {
        AttestationPolicy(trustAnchors: trustAnchors, allowLegacyAlgorithms: allowLegacyAlgorithms)
    }
    /// Seconds a client has to send a request's headers (after connecting or after the previous
    /// response; this also closes idle keep-alive connections)...
    public var headerTimeout = 15
    /// ...and its body, after the headers.
    public var bodyTimeout = 30
    /// Connections held at once; nil: just below the descriptor limit.
    public var maxConnections: Int?
    /// HTTP connections one client address may hold at once (nil: a quarter of the HTTP share, at
    /// least 8). Loopback and trusted proxies are not capped.
    public var maxConnectionsPerAddress: Int?
    /// The load harness's ceiling: `POST`/`GET /bench/echo` answer at once (hidden `--bench-echo`).
    public var benchEcho = false
    /// Only with `benchEcho`, to measure what each layer costs (BENCHMARKS.md): the layers left out,
    /// of "log", "metrics", "headers", "files", "guard".
    public var benchWithout: Set<String> = []
    /// Every approval (not only dangerous kinds) needs a fresh passkey assertion bound to the request.
    public var confirmWithPasskey = false
    /// Apple app ids (`TEAMID.bundle.id`) for /.well-known/apple-app-site-association.
    public var appleAppIDs: [String] = []
    /// Android package and signing-certificate SHA-256 fingerprints for /.well-known/assetlinks.json.
    public var androidPackage: String?
    public var androidCertFingerprints: [String] = []
    /// Related origins (WebAuthn L3 §5.11): other sites whose pages may use this rpId; listed at
    /// /.well-known/webauthn and accepted in ceremonies.
    public var relatedOrigins: [String] = []
    /// External relays (`wss://…`) the NIP-46 bunker also listens and answers on, besides its own.
    public var relays: [String] = []
    /// Addresses (besides loopback) allowed to read /metrics.
    public var metricsFrom: [String] = []
    /// Seconds between sweeps of expired challenges and sessions.
    public var sweepInterval: TimeInterval = 30
    /// Highest NIP-49 log_n accepted when importing an ncryptsec (scrypt memory is 2^(log_n+10) bytes).
    public var maxImportLogN: UInt8 = 18

    public init() {}

    /// The origins in force: the configured ones, or the local default.
    public var effectiveOrigins: [String] {
        guard origins.isEmpty else { return origins }
        return rpID == "localhost" ? ["http://localhost:\(port)"] : ["https://\(rpID)"]
    }

    public var relyingParty: RelyingParty {
        RelyingParty(id: rpID, name: rpName, origins: effectiveOrigins + relatedOrigins)
    }

    /// The master key file in force.
    public var effectiveMasterKeyFile: String {
        masterKeyFile ?? (dataDirectory as NSString).appendingPathComponent("master.key")
    }

    /// The SQLite path the `database` setting names.
    public var sqlitePath: String {
        if database == ":memory:" { return ":memory:" }
        if database.hasPrefix("sqlite:") { return String(database.dropFirst("sqlite:".count)) }
        return (dataDirectory as NSString).appendingPathComponent("keyfob.sqlite")
    }

    /// A setting that cannot work, with what to do about it.
    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    /// Checks the settings before anything starts.
    public func validate() throws(Invalid) {
        guard !rpID.isEmpty, !rpID.contains("/"), !rpID.contains(":") else {
            throw Invalid(description: "--rp-id \"\(rpID)\" must be a bare domain such as example.com (no scheme, port or path)")
        }
        for origin in effectiveOrigins where !RelyingParty.origin(origin, fitsRPID: rpID) {
            throw Invalid(
                description: """
                    origin "\(origin)" does not belong to rpId "\(rpID)": its host must be \(rpID) or end with .\(rpID) \
                    (set --rp-id to the registrable domain, or fix --origin)
                    """)
        }
        // Each setting's own rule is declared with it (Setting+all.swift); the rules between settings follow.
        for setting in Setting.all { try setting.check(self) }
        if let nip46Port, nip46Port == port {
            throw Invalid(description: "--nip46-port \(nip46Port) must not be --port (0 turns the relay off)")
        }
        guard signerUnlockTTL <= sessionTTL else {
            throw Invalid(description: "--signer-unlock-ttl must be between 0 and --session-ttl")
        }
        if !benchWithout.isEmpty && !benchEcho {
            throw Invalid(description: "--bench-without is for the load harness: it needs --bench-echo")
        }
        if androidPackage != nil && androidCertFingerprints.isEmpty {
            throw Invalid(description: "--android-package needs --android-cert-fingerprint (the app's signing certificate SHA-256, AA:BB:…)")
        }
        if let masterKey, masterKey.count != KeyVault.masterKeyLength {
            throw Invalid(description: "the master key must be 32 bytes (KEYFOB_MASTER_KEY is their base64)")
        }
        guard !algorithms.isEmpty else { throw Invalid(description: "at least one algorithm must be offered") }
        guard database == "sqlite" || database == ":memory:" || database.hasPrefix("sqlite:") || isPostgres else {
            throw Invalid(
                description: """
                    --database "\(database)" is not one Keyfob knows: use "sqlite" (a file in --data-dir), "sqlite:/path/to/file" \
                    or "postgres://user:password@host:5432/database"
                    """)
        }
        _ = try postgresSettings()
    }

    /// Whether `database` names a PostgreSQL server.
    public var isPostgres: Bool { PostgresSettings.isPostgresURL(database) }

    /// The PostgreSQL settings `database` gives, or nil for SQLite.
    public func postgresSettings() throws(Invalid) -> PostgresSettings? {
        guard isPostgres else { return nil }
        do { return try PostgresSettings(url: database) } catch { throw Invalid(description: "--database: \(error)") }
    }

    /// The database, as logs may show it (never a password).
    public var databaseDescription: String {
        (try? postgresSettings())??.redacted ?? sqlitePath
    }

    /// Creates the data directories (database, master key file) if needed and checks they are writable.
    public func prepareDataDirectory() throws(Invalid) {
        var paths: [String] = []
        if sqlitePath != ":memory:" && !isPostgres { paths.append(sqlitePath) }
        if masterKey == nil { paths.append(effectiveMasterKeyFile) }
        for path in paths { try prepareDirectory(of: path) }
    }

    private func prepareDirectory(of path: String) throws(Invalid) {
        let directory = (path as NSString).deletingLastPathComponent
        let dir = directory.isEmpty ? "." : directory
        do {
            try FileManager.default.createDirectory(
                atPath: dir, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        } catch {
            throw Invalid(description: "cannot create data directory \(dir): \(error.localizedDescription) (set --data-dir to a writable folder)")
        }
        // The data directory is 0700 whatever the umask, also when it existed: it holds the master
        // key. (Folders named only through sqlite:/path or --master-key-file are the operator's.)
        if dir != ".", (dir as NSString).standardizingPath == (dataDirectory as NSString).standardizingPath {
            chmod(dir, 0o700)
        }
        guard FileManager.default.isWritableFile(atPath: dir) else {
            throw Invalid(description: "data directory \(dir) is not writable (set --data-dir to a writable folder)")
        }
    }
}
