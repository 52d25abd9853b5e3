import Foundation

/// Every `keyfob serve` setting, in the order `--help` and docs/configuration.md list them.
extension Setting {
    public static var all: [Setting] {
        [
            config, host, port, nip46Port, relay, rpID, rpName, origin, dataDir, database,
            challengeTimeout, sessionTTL, signerUnlockTTL, admin, trustedProxy, publicDir, userVerification,
            masterKeyFile, masterKey, signRate, confirmWithPasskey, ipRate, ipBurst, signUpsPerHour, signUpBurst,
            ipv6Prefix, maxChallengesPerIP, maxLiveChallenges, attestationRoots, allowLegacyAlgorithms,
            headerTimeout, bodyTimeout, appleAppID, androidPackage, androidCertFingerprint, relatedOrigin,
            metricsFrom, maxConnections, maxConnectionsPerAddress, benchEcho, benchWithout,
        ]
    }

    /// The setting named `name` (without the dashes).
    public static func named(_ name: String) -> Setting? { all.first { $0.name == name } }

    static var config: Setting {
        .custom(
            "config", "KEYFOB_CONFIG", kind: .text, default: nil,
            help: "A JSON file of settings whose keys are the names below, e.g. {\"rp-id\": \"example.com\", \"origin\": [\"https://example.com\"]}.",
            sources: [.flag, .environment], assign: { _, _ throws(ServerConfiguration.Invalid) in })
    }
    static var host: Setting { .text("host", "KEYFOB_HOST", \.host, default: "127.0.0.1", help: "Address to listen on.") }
    static var port: Setting {
        .number("port", "KEYFOB_PORT", \.port, in: 1...65535, default: "8080", help: "Port to listen on.")
    }
    static var nip46Port: Setting {
        .optionalNumber(
            "nip46-port", "KEYFOB_NIP46_PORT", \.nip46Port, in: 0...65535, default: "--port + 10",
            help: "Port of the built-in NIP-46 relay (ws://HOST:PORT/nip46; behind your TLS proxy wss://<host>/nip46). 0 turns it off.",
            details:
                "Kind 24133 only, nothing stored, 16 connections per address, 16 subscriptions per connection, 8 filters per REQ, 64 KiB per message."
        )
    }
    static var relay: Setting {
        .list(
            "relay", "KEYFOB_RELAYS",
            \.relays, help: "A public relay (wss://…) the NIP-46 bunker also listens and answers on, besides its own /nip46.",
            details:
                "Named in bunker URLs, `switch_relays` and `/.well-known/nostr.json`. Keyfob also links to the relays `nostrconnect://` clients name. With several instances on PostgreSQL one holds the links at a time.",
            each: { relay in
                guard let url = URL(string: relay), ["wss", "ws"].contains(url.scheme?.lowercased() ?? ""), url.host != nil else {
                    return "must be a relay URL such as wss://relay.example.com"
                }
                return nil
            })
    }
    static var rpID: Setting {
        .text("rp-id", "KEYFOB_RP_ID", \.rpID, default: "localhost", help: "WebAuthn relying party id: your registrable domain.")
    }
    static var rpName: Setting { .text("rp-name", "KEYFOB_RP_NAME", \.rpName, default: "Keyfob", help: "Name authenticators show.") }
    static var origin: Setting {
        .list(
            "origin", "KEYFOB_ORIGINS", \.origins, default: "http://localhost:PORT, or https://RPID",
            help: "Allowed origin; its host must be the rpId or a subdomain.",
            details: "`android:apk-key-hash:…` is allowed as given.")
    }
    static var dataDir: Setting {
        .text(
            "data-dir", "KEYFOB_DATA_DIR", \.dataDirectory, default: "./data",
            help: "Folder for the database and key files (created with mode 0700).")
    }
    static var database: Setting {
        .text(
            "database", "KEYFOB_DATABASE", \.database, default: "sqlite",
            help:
                "Storage: sqlite (a file in --data-dir), sqlite:/path/file, or postgres://user:password@host:5432/db[?sslmode=require] for several instances on one database.",
            details: "See [PostgreSQL and several instances](#postgresql-and-several-instances).")
    }
    static var challengeTimeout: Setting {
        .number(
            "challenge-timeout", "KEYFOB_CHALLENGE_TIMEOUT", \.challengeTimeout, in: 10...600, unit: "seconds",
            default: "60", help: "Seconds a ceremony may take.")
    }
    static var sessionTTL: Setting {
        .number(
            "session-ttl", "KEYFOB_SESSION_TTL", \.sessionTTL, in: 60...Int.max, unit: "seconds",
            default: "43200", help: "Seconds a session lasts.")
    }
    static var signerUnlockTTL: Setting {
        .number(
            "signer-unlock-ttl", "KEYFOB_SIGNER_UNLOCK_TTL", \.signerUnlockTTL, in: 0...Int.max, unit: "seconds",
            default: "600", help: "Seconds the signer stays unlocked after a passkey check (at most --session-ttl).")
    }
    static var admin: Setting {
        .list("admin", "KEYFOB_ADMINS", \.admins, help: "Operator username: may open /dashboard.")
    }
    static var trustedProxy: Setting {
        .list(
            "trusted-proxy", "KEYFOB_TRUSTED_PROXIES", \.trustedProxies,
            help: "Reverse proxy address whose X-Forwarded-For is believed.")
    }
    static var publicDir: Setting {
        .text(
            "public-dir", "KEYFOB_PUBLIC_DIR", \.publicDirectory, default: "./Public, or Public beside the executable",
            help: "Folder of the web pages.")
    }
    static var userVerification: Setting {
        .custom(
            "user-verification", "KEYFOB_USER_VERIFICATION", kind: .text, default: "required",
            help: "required or preferred."
        ) { c, value throws(ServerConfiguration.Invalid) in
            guard case .text(let text) = value else { return }
            switch text {
            case "required": c.requireUserVerification = true
            case "preferred": c.requireUserVerification = false
            default: throw .init(description: "--user-verification \"\(text)\" must be required or preferred")
            }
        }
    }
    static var masterKeyFile: Setting {
        .optionalText(
            "master-key-file", "KEYFOB_MASTER_KEY_FILE", \.masterKeyFile, default: "<data-dir>/master.key",
            help:
                "File of 32 random bytes that seals every stored nostr key; created with mode 0600 on first start, refused if group or others can read it. Back it up."
        )
    }
    static var masterKey: Setting {
        .custom(
            "master-key", "KEYFOB_MASTER_KEY", kind: .text, default: nil,
            help:
                "The master key itself, base64 (beats the file): head -c 32 /dev/urandom | base64. Only from the environment, where ps cannot show it.",
            sources: [.environment]
        ) { c, value throws(ServerConfiguration.Invalid) in
            if case .text(let base64) = value { c.masterKey = try MasterKeyFile.decode(base64: base64) }
        }
    }
    static var signRate: Setting {
        .number(
            "sign-rate", "KEYFOB_SIGN_RATE", \.signRate, in: 1...Int.max, default: "120",
            help: "Signer operations a session may run per minute (429 rate_limited beyond).")
    }
    static var confirmWithPasskey: Setting {
        .flag(
            "confirm-with-passkey", "KEYFOB_CONFIRM_WITH_PASSKEY", \.confirmWithPasskey,
            help:
                "Every approval of an app's request needs a fresh passkey assertion bound to what is signed, kept as a receipt (dangerous kinds always do)."
        )
    }
    static var ipRate: Setting {
        .number(
            "ip-rate", "KEYFOB_IP_RATE", \.ipRate, in: 1...Int.max, default: "600",
            help: "Ceremony requests (options, verify: each its own budget) per client address per minute, in bursts of --ip-burst.",
            details: "[How the defaults were chosen](#per-address-limits).")
    }
    static var ipBurst: Setting {
        .number("ip-burst", "KEYFOB_IP_BURST", \.ipBurst, in: 1...Int.max, default: "300", help: "Burst size of --ip-rate.")
    }
    static var signUpsPerHour: Setting {
        .number(
            "signups-per-hour", "KEYFOB_SIGNUPS_PER_HOUR", \.signUpsPerHour, in: 1...Int.max, default: "300",
            help: "New accounts per client address per hour.")
    }
    static var signUpBurst: Setting {
        .number(
            "signup-burst", "KEYFOB_SIGNUP_BURST", \.signUpBurst, in: 1...Int.max, default: "100",
            help: "Burst size of --signups-per-hour.")
    }
    static var ipv6Prefix: Setting {
        .number(
            "ipv6-prefix", "KEYFOB_IPV6_PREFIX", \.ipv6Prefix, in: 16...128, default: "64",
            help: "IPv6 clients are counted by this prefix for every per-address limit and cap.",
            details: "One home or phone gets a whole /64: counting its addresses apart would be no limit at all.")
    }
    static var maxChallengesPerIP: Setting {
        .number(
            "max-challenges-per-ip", "KEYFOB_MAX_CHALLENGES_PER_IP", \.maxChallengesPerIP, in: 1...Int.max,
            default: "600",
            help: "Unfinished ceremonies (options fetched, not yet verified or expired) a client address may hold; 429 rate_limited beyond.")
    }
    static var maxLiveChallenges: Setting {
        .number(
            "max-live-challenges", "KEYFOB_MAX_LIVE_CHALLENGES", \.maxLiveChallenges, in: 1...Int.max,
            default: "250000",
            help: "Unfinished ceremonies the whole server may hold; past it new options get 429 until some finish or expire.",
            details:
                "SQLite keeps them in memory, about 0.25–0.4 KB each: the default bounds them near 100 MB. With PostgreSQL they are rows of an unlogged table and only the per-address cap applies."
        )
    }
    static var attestationRoots: Setting {
        .optionalText(
            "attestation-roots", "KEYFOB_ATTESTATION_ROOTS", \.attestationRootsDirectory,
            help:
                "Folder of PEM trust anchors, one subfolder per format (packed/, tpm/, apple/, android-key/, android-safetynet/, fido-u2f/). Without it attestation is recorded as the client claimed it (attestationTrusted: false)."
        )
    }
    static var allowLegacyAlgorithms: Setting {
        .flag(
            "allow-legacy-algorithms", "KEYFOB_ALLOW_LEGACY_ALGORITHMS", \.allowLegacyAlgorithms,
            help: "Accept RS1 (SHA-1) and RSA keys under 2048 bits, for old TPMs.")
    }
    static var headerTimeout: Setting {
        .number(
            "header-timeout", "KEYFOB_HEADER_TIMEOUT", \.headerTimeout, in: 1...600, unit: "seconds", default: "15",
            help:
                "Seconds a client has to send a request's headers, after connecting or after the previous response (closes idle keep-alive connections too)."
        )
    }
    static var bodyTimeout: Setting {
        .number(
            "body-timeout", "KEYFOB_BODY_TIMEOUT", \.bodyTimeout, in: 1...600, unit: "seconds", default: "30",
            help: "Seconds a client has to send a request's body after its headers.")
    }
    static var appleAppID: Setting {
        .list(
            "apple-app-id", "KEYFOB_APPLE_APP_IDS", \.appleAppIDs,
            help: "iOS app id (TEAMID.bundle.id) for /.well-known/apple-app-site-association.")
    }
    static var androidPackage: Setting {
        .optionalText(
            "android-package", "KEYFOB_ANDROID_PACKAGE", \.androidPackage,
            help: "Android package name for /.well-known/assetlinks.json (needs --android-cert-fingerprint).")
    }
    static var androidCertFingerprint: Setting {
        .list(
            "android-cert-fingerprint", "KEYFOB_ANDROID_CERT_FINGERPRINTS", \.androidCertFingerprints,
            help: "SHA-256 fingerprint (AA:BB:…) of the Android app's signing certificate.")
    }
    static var relatedOrigin: Setting {
        .list(
            "related-origin", "KEYFOB_RELATED_ORIGINS", \.relatedOrigins,
            help: "Another site's https origin allowed to use this rpId (WebAuthn related origins); served at /.well-known/webauthn.",
            each: { origin in
                guard let url = URL(string: origin), url.scheme == "https", url.host != nil, url.path.isEmpty else {
                    return "must be an https origin such as https://example.net"
                }
                return nil
            })
    }
    static var metricsFrom: Setting {
        .list(
            "metrics-from", "KEYFOB_METRICS_FROM", \.metricsFrom,
            help: "Address (besides loopback) allowed to read /metrics.",
            details:
                "A request carrying forwarding headers (`X-Forwarded-For`, `X-Real-IP`, `Forwarded`, …) is refused whatever its peer, and the shipped nginx configs answer `/metrics` with 403."
        )
    }
    static var maxConnections: Setting {
        .optionalNumber(
            "max-connections", "KEYFOB_MAX_CONNECTIONS", \.maxConnections, in: 1...Int.max,
            default: "the open-file limit less a reserve",
            help: "Connections held at once by both listeners together (the NIP-46 port gets a quarter).",
            details: "See [Connections and memory](#connections-and-memory).")
    }
    static var maxConnectionsPerAddress: Setting {
        .optionalNumber(
            "max-connections-per-address", "KEYFOB_MAX_CONNECTIONS_PER_ADDRESS", \.maxConnectionsPerAddress, in: 1...Int.max,
            default: "an eighth of the HTTP share, 8 to 32",
            help: "HTTP connections one client address may hold at once; one more is closed as it opens.",
            details:
                "Loopback and `--trusted-proxy` addresses are not capped (they carry many clients); an IPv6 client counts by its `--ipv6-prefix`. Capped addresses together hold at most seven eighths of the share: the rest is kept for this host's probes and trusted proxies. See [Connections and memory](#connections-and-memory)."
        )
    }
    static var benchEcho: Setting {
        Setting.flag("bench-echo", "KEYFOB_BENCH_ECHO", \.benchEcho, help: "The load harness's ceiling: /bench/echo answers at once.")
            .hiding()
    }
    static var benchWithout: Setting {
        Setting.custom(
            "bench-without", "KEYFOB_BENCH_WITHOUT", kind: .list, default: nil,
            help: "Layers the load harness leaves out: log, metrics, headers, files, guard.",
            hidden: true
        ) { c, value throws(ServerConfiguration.Invalid) in
            if case .list(let items) = value { c.benchWithout = Set(items.flatMap { $0.split(separator: ",").map(String.init) }) }
        }
    }
}
