import ArgumentParser
import CMalloc
import Foundation
import Hummingbird
import KeyfobServer
import KeyfobStore
import Logging
import NIOCore
import NIOPosix
import WebAuthn

@main
struct Keyfob: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keyfob",
        abstract: "A passkey (WebAuthn) relying party that holds nostr keys and signs only after a passkey check.",
        subcommands: [Serve.self, Users.self, Sessions.self, AdminTokenCommand.self, RotateMasterKey.self, MigrateStore.self])

    /// Swift's tasks run on NIO's event loop threads, the ones that read and write the sockets:
    /// a request no longer goes from an event loop to the concurrency pool and back (two thread
    /// switches and wake-ups each). Installed first, on the main thread, as NIO requires.
    static func main() async {
        NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        #if os(Linux)
        // A fixed threshold: blocks of 128 KiB and more (a growing dictionary's storage) are mapped
        // on their own and go back to the system when freed. glibc otherwise raises the threshold
        // after the first such free, and later ones stay in the heap for good (an options flood
        // peaked at 157 MB of RSS instead of 137).
        mallopt(M_MMAP_THRESHOLD, 128 * 1024)
        #endif
        await main(nil)
    }
}

/// `keyfob serve`: every setting by flag, `KEYFOB_*` variable or config file (in that order of precedence).
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the Keyfob server.",
        discussion: """
            With no settings it serves http://localhost:8080 for rpId localhost, with SQLite under ./data/. \
            Open http://localhost:8080 (not 127.0.0.1: browsers refuse passkeys on a bare IP).

            Every option can also come from the environment variable shown beside it, or from a JSON \
            config file (--config) whose keys are the option names, e.g. \
            {"rp-id": "example.com", "origin": ["https://example.com"]}. \
            Flags beat variables, variables beat the file.
            """)

    @Option(help: "JSON config file. (env: KEYFOB_CONFIG)") var config: String?
    @Option(help: "Address to listen on. (env: KEYFOB_HOST; default 127.0.0.1)") var host: String?
    @Option(help: "Port to listen on. (env: KEYFOB_PORT; default 8080)") var port: Int?
    @Option(name: .customLong("nip46-port"), help: "Port of the built-in NIP-46 relay (ws://HOST:PORT/nip46; put it behind your TLS proxy as wss://<host>/nip46). 0 turns it off. (env: KEYFOB_NIP46_PORT; default --port + 10)")
    var nip46Port: Int?
    @Option(name: .customLong("rp-id"), help: "WebAuthn relying party id: your registrable domain. (env: KEYFOB_RP_ID; default localhost)")
    var rpID: String?
    @Option(name: .customLong("rp-name"), help: "Name authenticators show. (env: KEYFOB_RP_NAME; default Keyfob)")
    var rpName: String?
    @Option(name: .customLong("origin"), help: "Allowed origin, repeatable; host must be the rpId or a subdomain. (env: KEYFOB_ORIGINS, comma-separated; default http://localhost:PORT)")
    var origins: [String] = []
    @Option(name: .customLong("data-dir"), help: "Folder for the database and key files. (env: KEYFOB_DATA_DIR; default ./data)")
    var dataDir: String?
    @Option(help: "Storage: sqlite (a file in --data-dir), sqlite:/path/file, or postgres://user:password@host:5432/db[?sslmode=require] for several instances on one database. (env: KEYFOB_DATABASE; default sqlite)")
    var database: String?
    @Option(name: .customLong("challenge-timeout"), help: "Seconds a ceremony may take. (env: KEYFOB_CHALLENGE_TIMEOUT; default 60)")
    var challengeTimeout: Int?
    @Option(name: .customLong("session-ttl"), help: "Seconds a session lasts. (env: KEYFOB_SESSION_TTL; default 43200)")
    var sessionTTL: Int?
    @Option(name: .customLong("signer-unlock-ttl"), help: "Seconds the signer stays unlocked after a passkey check. (env: KEYFOB_SIGNER_UNLOCK_TTL; default 600)")
    var signerUnlockTTL: Int?
    @Option(name: .customLong("admin"), help: "Operator username, repeatable. (env: KEYFOB_ADMINS, comma-separated)")
    var admins: [String] = []
    @Option(name: .customLong("trusted-proxy"), help: "Reverse proxy address whose X-Forwarded-For is believed, repeatable. (env: KEYFOB_TRUSTED_PROXIES)")
    var trustedProxies: [String] = []
    @Option(name: .customLong("public-dir"), help: "Folder of the web pages. (env: KEYFOB_PUBLIC_DIR; default ./Public)")
    var publicDir: String?
    @Option(name: .customLong("user-verification"), help: "required or preferred. (env: KEYFOB_USER_VERIFICATION; default required)")
    var userVerification: String?
    @Option(name: .customLong("master-key-file"), help: "File of 32 random bytes that seals every stored nostr key; created with mode 0600 on first start, refused if group or others can read it. Back it up. (env: KEYFOB_MASTER_KEY_FILE; default <data-dir>/master.key; KEYFOB_MASTER_KEY=<base64> gives the key itself instead)")
    var masterKeyFile: String?
    @Option(name: .customLong("sign-rate"), help: "Signer operations a session may run per minute. (env: KEYFOB_SIGN_RATE; default 120)")
    var signRate: Int?
    @Option(name: .customLong("ip-rate"), help: "Ceremony requests (options, verify; each its own budget) per client IP per minute, in bursts of --ip-burst. (env: KEYFOB_IP_RATE; default 600)")
    var ipRate: Int?
    @Option(name: .customLong("ip-burst"), help: "Burst size of --ip-rate. (env: KEYFOB_IP_BURST; default 300)")
    var ipBurst: Int?
    @Option(name: .customLong("signup-burst"), help: "Burst size of --signups-per-hour. (env: KEYFOB_SIGNUP_BURST; default 100)")
    var signUpBurst: Int?
    @Option(name: .customLong("ipv6-prefix"), help: "IPv6 clients are counted by this prefix for every per-address limit and cap. (env: KEYFOB_IPV6_PREFIX; default 64)")
    var ipv6Prefix: Int?
    @Option(name: .customLong("max-challenges-per-ip"), help: "Unfinished ceremonies a client IP may hold. (env: KEYFOB_MAX_CHALLENGES_PER_IP; default 600)")
    var maxChallengesPerIP: Int?
    @Option(name: .customLong("max-live-challenges"), help: "Unfinished ceremonies the whole server may hold; past it new options get 429 until some finish or expire. About 0.25–0.4 KB each in memory with SQLite. (env: KEYFOB_MAX_LIVE_CHALLENGES; default 250000)")
    var maxLiveChallenges: Int?
    @Option(name: .customLong("signups-per-hour"), help: "New accounts per client IP per hour. (env: KEYFOB_SIGNUPS_PER_HOUR; default 300)")
    var signUpsPerHour: Int?
    @Option(name: .customLong("attestation-roots"), help: "Folder of PEM trust anchors, one subfolder per format (packed/, tpm/, apple/, android-key/, android-safetynet/, fido-u2f/). Without it attestation is recorded as the client claimed it (attestationTrusted: false). (env: KEYFOB_ATTESTATION_ROOTS)")
    var attestationRoots: String?
    @Flag(name: .customLong("allow-legacy-algorithms"), help: "Accept RS1 (SHA-1) and RSA keys under 2048 bits, for old TPMs. (env: KEYFOB_ALLOW_LEGACY_ALGORITHMS=1)")
    var allowLegacyAlgorithms = false
    @Option(name: .customLong("header-timeout"), help: "Seconds a client has to send a request's headers, after connecting or after the previous response (closes idle keep-alive connections too). (env: KEYFOB_HEADER_TIMEOUT; default 15)")
    var headerTimeout: Int?
    @Option(name: .customLong("body-timeout"), help: "Seconds a client has to send a request's body after its headers. (env: KEYFOB_BODY_TIMEOUT; default 30)")
    var bodyTimeout: Int?
    @Flag(name: .customLong("confirm-with-passkey"), help: "Every approval of an app's request needs a fresh passkey assertion bound to what is signed, kept as a receipt (dangerous kinds always do). (env: KEYFOB_CONFIRM_WITH_PASSKEY=1)")
    var confirmWithPasskey = false
    @Option(name: .customLong("apple-app-id"), help: "iOS app id (TEAMID.bundle.id) for /.well-known/apple-app-site-association, repeatable. (env: KEYFOB_APPLE_APP_IDS)")
    var appleAppIDs: [String] = []
    @Option(name: .customLong("android-package"), help: "Android package name for /.well-known/assetlinks.json. (env: KEYFOB_ANDROID_PACKAGE)")
    var androidPackage: String?
    @Option(name: .customLong("android-cert-fingerprint"), help: "SHA-256 fingerprint of the Android app's signing certificate, repeatable. (env: KEYFOB_ANDROID_CERT_FINGERPRINTS)")
    var androidCertFingerprints: [String] = []
    @Option(name: .customLong("related-origin"), help: "Another site's origin allowed to use this rpId (WebAuthn related origins), repeatable; served at /.well-known/webauthn. (env: KEYFOB_RELATED_ORIGINS)")
    var relatedOrigins: [String] = []
    @Option(name: .customLong("relay"), help: "A public relay (wss://…) the NIP-46 bunker also listens and answers on, besides its own /nip46 endpoint; repeatable. (env: KEYFOB_RELAYS)")
    var relays: [String] = []
    @Option(name: .customLong("metrics-from"), help: "Address (besides loopback) allowed to read /metrics, repeatable. (env: KEYFOB_METRICS_FROM)")
    var metricsFrom: [String] = []
    @Option(name: .customLong("max-connections"), help: "Connections held at once. (env: KEYFOB_MAX_CONNECTIONS; default: just below the open-file limit)")
    var maxConnections: Int?
    @Flag(name: .customLong("bench-echo"), help: .hidden) var benchEcho = false
    @Option(name: .customLong("bench-without"), help: .hidden) var benchWithout: [String] = []

    func run() async throws {
        let settings: ServerConfiguration
        do { settings = try resolve() } catch {
            throw ValidationError("\(error)")
        }
        do {
            try settings.validate()
            try settings.prepareDataDirectory()
        } catch {
            throw ValidationError(error.description)
        }
        // Logs go to stdout, one line per request and per event (DESIGN.md §5).
        // Buffered and written by a thread of its own: a request never waits on a write(2).
        LoggingSystem.bootstrap { LineLogHandler(label: $0) }
        var logger = Logger(label: "keyfob")
        logger.logLevel = .info
        let app: any ApplicationProtocol
        do {
            app = try await buildApplication(configuration: settings, logger: logger)
        } catch let error as ServerConfiguration.Invalid {
            FileHandle.standardError.write(Data("keyfob serve: \(error.description)\n".utf8))
            throw ExitCode.failure
        }
        for origin in settings.effectiveOrigins where settings.rpID == "localhost" {
            if let port = URL(string: origin)?.port, port != settings.port {
                logger.warning("origin \(origin) has port \(port) but Keyfob listens on \(settings.port): browsers on that origin reach another server (or set --port \(port))")
            }
        }
        let open = settings.rpID == "localhost" ? "http://localhost:\(settings.port)" : settings.effectiveOrigins.first ?? ""
        logger.info("keyfob serving — open \(open)\(settings.rpID == "localhost" ? " (localhost, not 127.0.0.1: browsers refuse passkeys on a bare IP)" : "")", metadata: [
            "address": "http://\(settings.host):\(settings.port)", "rpId": "\(settings.rpID)",
            "origins": "\(settings.effectiveOrigins.joined(separator: ","))", "database": "\(settings.databaseDescription)",
            "pages": "\(settings.publicDirectory)",
        ])
        // Whatever ends the server, the buffered lines are written before the process exits.
        defer { LogOutput.standardOutput.flush() }
        do {
            try await serve(app, logger: logger)
        } catch where "\(error)".contains("Address already in use") || "\(error)".contains("EADDRINUSE") {
            FileHandle.standardError.write(Data("keyfob serve: port \(settings.port) on \(settings.host) is already in use (another keyfob?): stop that program or choose another port with --port\n".utf8))
            throw ExitCode.failure
        }
    }

    /// The web pages: --public-dir, else ./Public, else Public next to the executable or in the
    /// package it was built in (.build/<config>/keyfob), so `keyfob serve` works from any folder.
    static func findPublicDirectory() -> String? {
        var candidates = ["Public"]
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for up in 0...3 {
            var url = executable
            for _ in 0..<up { url = url.deletingLastPathComponent() }
            candidates.append(url.appendingPathComponent("Public").path)
        }
        candidates.append("/usr/share/keyfob/Public")
        return candidates.first { FileManager.default.fileExists(atPath: ($0 as NSString).appendingPathComponent("index.html")) }
    }

    /// Config-file keys and the JSON type each must have.
    static let fileKeys: [String: String] = [
        "host": "string", "port": "number", "nip46-port": "number", "rp-id": "string", "rp-name": "string", "origin": "list", "data-dir": "string",
        "database": "string", "challenge-timeout": "number", "session-ttl": "number", "signer-unlock-ttl": "number",
        "admin": "list", "trusted-proxy": "list", "public-dir": "string", "user-verification": "string",
        "master-key-file": "string", "sign-rate": "number", "ip-rate": "number", "ip-burst": "number",
        "signups-per-hour": "number", "signup-burst": "number", "ipv6-prefix": "number", "max-challenges-per-ip": "number", "max-live-challenges": "number", "attestation-roots": "string", "allow-legacy-algorithms": "bool",
        "header-timeout": "number", "body-timeout": "number", "max-connections": "number", "confirm-with-passkey": "bool",
        "apple-app-id": "list", "metrics-from": "list", "android-package": "string", "android-cert-fingerprint": "list", "related-origin": "list", "relay": "list",
    ]

    static func checkFile(_ object: [String: Any], path: String) throws {
        for (key, value) in object.sorted(by: { $0.key < $1.key }) {
            guard let type = fileKeys[key] else {
                throw ValidationError("config file \(path): unknown key \"\(key)\" (known: \(fileKeys.keys.sorted().joined(separator: ", ")))")
            }
            let number = value as? NSNumber
            let isBool = number.map { ["c", "B"].contains(String(cString: $0.objCType)) } ?? false
            let ok = switch type {
            case "string": value is String
            case "number": number != nil && !isBool && number!.doubleValue == number!.doubleValue.rounded()
            case "bool": isBool
            default: value is String || (value as? [Any])?.allSatisfy { $0 is String } == true
            }
            guard ok else {
                let expected = ["list": "a string or a list of strings", "number": "a whole number", "bool": "true or false"][type] ?? "a string"
                throw ValidationError("config file \(path): \"\(key)\" must be \(expected)")
            }
        }
    }

    /// Flags, then `KEYFOB_*`, then the config file, then defaults.
    func resolve() throws -> ServerConfiguration {
        let env = ProcessInfo.processInfo.environment
        var file: [String: Any] = [:]
        if let path = config ?? env["KEYFOB_CONFIG"] {
            guard let data = FileManager.default.contents(atPath: path),
                  let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw ValidationError("config file \(path) is missing or not a JSON object")
            }
            try Self.checkFile(object, path: path)
            file = object
        }
        func string(_ flag: String?, _ variable: String, _ key: String) -> String? {
            flag ?? env[variable] ?? (file[key] as? String)
        }
        func int(_ flag: Int?, _ variable: String, _ key: String) throws -> Int? {
            if let flag { return flag }
            if let text = env[variable] {
                guard let value = Int(text) else { throw ValidationError("\(variable)=\(text) is not a whole number") }
                return value
            }
            return file[key] as? Int
        }
        func list(_ flag: [String], _ variable: String, _ key: String) -> [String]? {
            if !flag.isEmpty { return flag }
            if let text = env[variable] {
                return text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            }
            return (file[key] as? [String]) ?? (file[key] as? String).map { [$0] }
        }

        var c = ServerConfiguration()
        c.host = string(host, "KEYFOB_HOST", "host") ?? c.host
        c.port = try int(port, "KEYFOB_PORT", "port") ?? c.port
        c.nip46Port = try int(nip46Port, "KEYFOB_NIP46_PORT", "nip46-port")
        c.rpID = string(rpID, "KEYFOB_RP_ID", "rp-id") ?? c.rpID
        c.rpName = string(rpName, "KEYFOB_RP_NAME", "rp-name") ?? c.rpName
        c.origins = list(origins, "KEYFOB_ORIGINS", "origin") ?? []
        c.dataDirectory = string(dataDir, "KEYFOB_DATA_DIR", "data-dir") ?? c.dataDirectory
        c.database = string(database, "KEYFOB_DATABASE", "database") ?? c.database
        c.challengeTimeout = try int(challengeTimeout, "KEYFOB_CHALLENGE_TIMEOUT", "challenge-timeout") ?? c.challengeTimeout
        c.sessionTTL = try int(sessionTTL, "KEYFOB_SESSION_TTL", "session-ttl") ?? c.sessionTTL
        c.signerUnlockTTL = try int(signerUnlockTTL, "KEYFOB_SIGNER_UNLOCK_TTL", "signer-unlock-ttl") ?? c.signerUnlockTTL
        c.admins = list(admins, "KEYFOB_ADMINS", "admin") ?? []
        c.trustedProxies = list(trustedProxies, "KEYFOB_TRUSTED_PROXIES", "trusted-proxy") ?? []
        if let directory = string(publicDir, "KEYFOB_PUBLIC_DIR", "public-dir") {
            c.publicDirectory = directory
        } else if let found = Self.findPublicDirectory() {
            c.publicDirectory = found
        }
        guard FileManager.default.fileExists(atPath: (c.publicDirectory as NSString).appendingPathComponent("index.html")) else {
            throw ValidationError("the web pages (index.html) are not in \(c.publicDirectory): set --public-dir to the repository's Public folder")
        }
        c.masterKeyFile = string(masterKeyFile, "KEYFOB_MASTER_KEY_FILE", "master-key-file")
        if let base64 = env["KEYFOB_MASTER_KEY"] { c.masterKey = try MasterKeyFile.decode(base64: base64) }
        c.signRate = try int(signRate, "KEYFOB_SIGN_RATE", "sign-rate") ?? c.signRate
        c.ipRate = try int(ipRate, "KEYFOB_IP_RATE", "ip-rate") ?? c.ipRate
        c.ipBurst = try int(ipBurst, "KEYFOB_IP_BURST", "ip-burst") ?? c.ipBurst
        c.signUpsPerHour = try int(signUpsPerHour, "KEYFOB_SIGNUPS_PER_HOUR", "signups-per-hour") ?? c.signUpsPerHour
        c.maxChallengesPerIP = try int(maxChallengesPerIP, "KEYFOB_MAX_CHALLENGES_PER_IP", "max-challenges-per-ip") ?? c.maxChallengesPerIP
        c.signUpBurst = try int(signUpBurst, "KEYFOB_SIGNUP_BURST", "signup-burst") ?? c.signUpBurst
        c.ipv6Prefix = try int(ipv6Prefix, "KEYFOB_IPV6_PREFIX", "ipv6-prefix") ?? c.ipv6Prefix
        c.maxLiveChallenges = try int(maxLiveChallenges, "KEYFOB_MAX_LIVE_CHALLENGES", "max-live-challenges") ?? c.maxLiveChallenges
        c.attestationRootsDirectory = string(attestationRoots, "KEYFOB_ATTESTATION_ROOTS", "attestation-roots")
        c.allowLegacyAlgorithms = allowLegacyAlgorithms || ["1", "true"].contains(env["KEYFOB_ALLOW_LEGACY_ALGORITHMS"] ?? "")
            || (file["allow-legacy-algorithms"] as? Bool ?? false)
        c.maxConnections = try int(maxConnections, "KEYFOB_MAX_CONNECTIONS", "max-connections")
        c.benchEcho = benchEcho
        c.benchWithout = Set(benchWithout.flatMap { $0.split(separator: ",").map(String.init) })
        if !c.benchWithout.isEmpty && !benchEcho { throw ValidationError("--bench-without is for the load harness: it needs --bench-echo") }
        c.appleAppIDs = list(appleAppIDs, "KEYFOB_APPLE_APP_IDS", "apple-app-id") ?? []
        c.androidPackage = string(androidPackage, "KEYFOB_ANDROID_PACKAGE", "android-package")
        c.androidCertFingerprints = list(androidCertFingerprints, "KEYFOB_ANDROID_CERT_FINGERPRINTS", "android-cert-fingerprint") ?? []
        c.relatedOrigins = list(relatedOrigins, "KEYFOB_RELATED_ORIGINS", "related-origin") ?? []
        c.metricsFrom = list(metricsFrom, "KEYFOB_METRICS_FROM", "metrics-from") ?? []
        c.relays = list(relays, "KEYFOB_RELAYS", "relay") ?? []
        c.confirmWithPasskey = confirmWithPasskey || ["1", "true"].contains(env["KEYFOB_CONFIRM_WITH_PASSKEY"] ?? "")
            || (file["confirm-with-passkey"] as? Bool ?? false)
        c.headerTimeout = try int(headerTimeout, "KEYFOB_HEADER_TIMEOUT", "header-timeout") ?? c.headerTimeout
        c.bodyTimeout = try int(bodyTimeout, "KEYFOB_BODY_TIMEOUT", "body-timeout") ?? c.bodyTimeout
        switch string(userVerification, "KEYFOB_USER_VERIFICATION", "user-verification") ?? "required" {
        case "required": c.requireUserVerification = true
        case "preferred": c.requireUserVerification = false
        case let other: throw ValidationError("user verification \"\(other)\" must be required or preferred")
        }
        return c
    }
}

/// `keyfob rotate-master-key`: re-seals every stored nostr key under a new master key.
struct RotateMasterKey: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate-master-key",
        abstract: "Re-seal every stored nostr key under a new master key, in one transaction.",
        discussion: """
            Stop the server first. The new key is written to <master-key-file>.new (mode 0600), the database \
            is re-sealed in one transaction, then the new file replaces the old one. If this is interrupted \
            after the database changed, start-up says so: move master.key.new over master.key. \
            With KEYFOB_MASTER_KEY the new key is written to --new-master-key-file and you update the variable.
            """)

    @Option(name: .customLong("data-dir"), help: "Folder of the database and key file. (env: KEYFOB_DATA_DIR; default ./data)")
    var dataDir: String?
    @Option(help: "Storage: sqlite, sqlite:/path/file or postgres://user:password@host:5432/db. (env: KEYFOB_DATABASE; default sqlite)")
    var database: String?
    @Option(name: .customLong("master-key-file"), help: "The current master key file. (env: KEYFOB_MASTER_KEY_FILE; default <data-dir>/master.key)")
    var masterKeyFile: String?
    @Option(name: .customLong("new-master-key-file"), help: "Where to write the new key (required with KEYFOB_MASTER_KEY; default <master-key-file>.new, then renamed over the old file).")
    var newMasterKeyFile: String?

    func run() async throws {
        let env = ProcessInfo.processInfo.environment
        var c = ServerConfiguration()
        c.dataDirectory = dataDir ?? env["KEYFOB_DATA_DIR"] ?? c.dataDirectory
        c.database = database ?? env["KEYFOB_DATABASE"] ?? c.database
        c.masterKeyFile = masterKeyFile ?? env["KEYFOB_MASTER_KEY_FILE"]
        do throws(any Error) {
            if let base64 = env["KEYFOB_MASTER_KEY"] {
                c.masterKey = try MasterKeyFile.decode(base64: base64)
                guard newMasterKeyFile != nil else {
                    throw ServerConfiguration.Invalid(description: "with KEYFOB_MASTER_KEY, name where the new key goes: --new-master-key-file PATH")
                }
            } else if !FileManager.default.fileExists(atPath: c.effectiveMasterKeyFile) {
                throw ServerConfiguration.Invalid(description: "no master key file at \(c.effectiveMasterKeyFile) (set --master-key-file or --data-dir)")
            }
            try c.validate()
            let (oldKey, _) = try MasterKeyFile.load(c)
            let store = try await openStoreForCommand(c)
            let newPath = newMasterKeyFile ?? c.effectiveMasterKeyFile + ".new"
            guard !FileManager.default.fileExists(atPath: newPath) else {
                throw ServerConfiguration.Invalid(description: "\(newPath) exists already (left by an earlier rotation?); move it away first")
            }
            let newKey = try MasterKeyFile.create(at: newPath)
            let count: Int
            do {
                count = try await MasterKeyRotation.rotate(store: store, from: KeyVault(masterKey: oldKey), to: KeyVault(masterKey: newKey))
            } catch {
                unlink(newPath)
                throw error
            }
            if c.masterKey == nil && newMasterKeyFile == nil {
                guard rename(newPath, c.effectiveMasterKeyFile) == 0 else {
                    throw ServerConfiguration.Invalid(description: "re-sealed \(count) keys, but could not move \(newPath) over \(c.effectiveMasterKeyFile): do it by hand before starting the server")
                }
                print("re-sealed \(count) nostr keys; \(c.effectiveMasterKeyFile) holds the new master key (back it up)")
            } else {
                print("re-sealed \(count) nostr keys; the new master key is in \(newPath): set KEYFOB_MASTER_KEY=$(base64 -w0 \(newPath)) or point --master-key-file at it")
            }
        } catch {
            FileHandle.standardError.write(Data("keyfob rotate-master-key: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}

/// `keyfob migrate-store --from sqlite:… --to postgres://…`: the move to several instances.
struct MigrateStore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate-store",
        abstract: "Copy a SQLite database into an empty PostgreSQL database, in one transaction.",
        discussion: """
            Stop the server first. Accounts, passkeys, sessions, nostr keys (still sealed), key wraps, \
            grants, pending requests, the audit log and the server's own values move; nothing is changed \
            in the SQLite file. The PostgreSQL database must hold no accounts yet. Afterwards start every \
            instance with --database postgres://… and the same master key (the file, or KEYFOB_MASTER_KEY).
            """)

    @Option(help: "The SQLite database: sqlite (the file in --data-dir) or sqlite:/path/to/keyfob.sqlite.")
    var from = "sqlite"
    @Option(help: "The PostgreSQL database: postgres://user:password@host:5432/db[?sslmode=require].")
    var to: String
    @Option(name: .customLong("data-dir"), help: "Folder of the SQLite database with --from sqlite. (env: KEYFOB_DATA_DIR; default ./data)")
    var dataDir: String?

    func run() async throws {
        var source = ServerConfiguration()
        source.dataDirectory = dataDir ?? ProcessInfo.processInfo.environment["KEYFOB_DATA_DIR"] ?? source.dataDirectory
        source.database = from
        var target = source
        target.database = to
        do {
            try source.validate()
            try target.validate()
            let copied = try await StoreMigration.run(from: source, to: target)
            for (table, rows) in copied { print("\(table)\t\(rows)") }
            print("copied \(source.sqlitePath) into \(target.databaseDescription); start the instances with --database pointing there and the same master key")
        } catch {
            FileHandle.standardError.write(Data("keyfob migrate-store: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}

/// Where the database is, for the operator commands (the same settings as `keyfob serve`).
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "Folder of the database. (env: KEYFOB_DATA_DIR; default ./data)")
    var dataDir: String?
    @Option(help: "Storage: sqlite, sqlite:/path/file or postgres://user:password@host:5432/db. (env: KEYFOB_DATABASE; default sqlite)")
    var database: String?

    /// Opens the store a running server uses (SQLite in WAL mode or PostgreSQL: both may work at once).
    func open() async throws -> any KeyfobStore {
        let env = ProcessInfo.processInfo.environment
        var c = ServerConfiguration()
        c.dataDirectory = dataDir ?? env["KEYFOB_DATA_DIR"] ?? c.dataDirectory
        c.database = database ?? env["KEYFOB_DATABASE"] ?? c.database
        do { try c.validate() } catch { throw ValidationError(error.description) }
        if !c.isPostgres {
            guard FileManager.default.fileExists(atPath: c.sqlitePath) else {
                throw ValidationError("no database at \(c.sqlitePath) (set --data-dir or --database)")
            }
        }
        do { return try await openStoreForCommand(c) } catch { throw ValidationError("\(error)") }
    }
}

/// `keyfob users list|show|remove`.
struct Users: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, show and remove accounts (works beside a running server).",
        subcommands: [List.self, Show.self, Remove.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List accounts, by name.")
        @OptionGroup var store: StoreOptions
        @Option(help: "Only names containing this text.") var query: String?
        @Option(help: "At most this many.") var limit = 100

        func run() async throws {
            let db = try await store.open()
            let users = try await db.users(matching: query, after: nil, limit: limit)
            let formatter = ISO8601DateFormatter()
            print("username\tanonymous\tcreated\tpasskeys")
            for user in users {
                let count = try await db.credentials(ofUser: user.id).count
                print("\(user.username)\t\(user.isAnonymous ? "yes" : "no")\t\(formatter.string(from: user.createdAt))\t\(count)")
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one account: passkeys and nostr public key.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The username.") var username: String

        func run() async throws {
            let db = try await store.open()
            guard let user = try await db.user(named: username) else { throw ValidationError("no account named \(username)") }
            let formatter = ISO8601DateFormatter()
            print("username: \(user.username)\nanonymous: \(user.isAnonymous)\ncreated: \(formatter.string(from: user.createdAt))")
            if let key = try await db.nostrKey(ofUser: user.id) { print("nostr pubkey: \(key.pubkey)") }
            for credential in try await db.credentials(ofUser: user.id) {
                print("passkey \(Base64URL.encode(credential.id).prefix(16))…  \(credential.name ?? "-")  format=\(credential.attestationFormat) created=\(formatter.string(from: credential.createdAt)) last-used=\(credential.lastUsedAt.map { formatter.string(from: $0) } ?? "never")")
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove an account with its passkeys, sessions, nostr key and grants.",
            discussion: "The nostr key is gone for good unless the user exported it. Asks for --yes.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The username.") var username: String
        @Flag(help: "Really remove it.") var yes = false

        func run() async throws {
            let db = try await store.open()
            guard let user = try await db.user(named: username) else { throw ValidationError("no account named \(username)") }
            guard yes else { throw ValidationError("this removes \(user.username) and its nostr key for good; add --yes") }
            _ = try await db.deleteUser(id: user.id)
            print("removed \(user.username)")
        }
    }
}

/// `keyfob sessions revoke --user NAME`.
struct Sessions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "End sessions.", subcommands: [Revoke.self])

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "End every session of an account at once (the running server refuses them from the next request).")
        @OptionGroup var store: StoreOptions
        @Option(help: "The username.") var user: String

        func run() async throws {
            let db = try await store.open()
            guard let account = try await db.user(named: user) else { throw ValidationError("no account named \(user)") }
            try await db.deleteSessions(ofUser: account.id)
            print("ended every session of \(account.username)")
        }
    }
}

/// `keyfob admin-token [--rotate]`: the bearer token for /dashboard and /api/admin/*.
struct AdminTokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin-token",
        abstract: "Print a new dashboard admin token (with --rotate the old one stops working at once).",
        discussion: "Only the token's SHA-256 is stored; this is the only time it is shown. Use it as: Authorization: Bearer kfa_…")
    @OptionGroup var store: StoreOptions
    @Flag(help: "Replace the existing token.") var rotate = false

    func run() async throws {
        let db = try await store.open()
        let exists = try await db.metaValue(KeyfobServer.adminTokenMetaName) != nil
        guard rotate || !exists else {
            throw ValidationError("an admin token exists already; add --rotate to replace it (the old one stops working)")
        }
        let (token, hash) = AdminToken.generate()
        try await db.setMetaValue(KeyfobServer.adminTokenMetaName, hash)
        print(token)
    }
}
