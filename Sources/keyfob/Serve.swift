import ArgumentParser
import Foundation
import Hummingbird
import KeyfobCrypto
import KeyfobServer
import Logging
import NIOCore

/// `keyfob serve`: every setting of `Setting.all` by flag, `KEYFOB_*` variable or config file (in that order of precedence).
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the Keyfob server.",
        discussion: """
            With no settings it serves http://localhost:8080 for rpId localhost, with SQLite under ./data/. \
            Open http://localhost:8080 (not 127.0.0.1: browsers refuse passkeys on a bare IP).

            Every setting can also come from the environment variable shown beside it, or from a JSON \
            config file (--config) whose keys are the setting names, e.g. \
            {"rp-id": "example.com", "origin": ["https://example.com"]}. \
            Flags beat variables, variables beat the file. docs/configuration.md says more of each.
            """ + "\n\n" + SettingsReference.helpText)

    /// Every setting, parsed from `Setting.all` (flags, `KEYFOB_*` variables, config file).
    @Argument(parsing: .allUnrecognized, help: .hidden) var settings: [String] = []

    func run() async throws {
        var defaults = ServerConfiguration()
        if let found = Self.findPublicDirectory() { defaults.publicDirectory = found }
        var settings: ServerConfiguration
        do throws(ServerConfiguration.Invalid) {
            settings = try ServerConfiguration.resolve(
                arguments: self.settings, environment: ProcessInfo.processInfo.environment,
                defaults: defaults)
            guard FileManager.default.fileExists(atPath: (settings.publicDirectory as NSString).appendingPathComponent("index.html")) else {
                throw ServerConfiguration.Invalid(
                    description:
                        "the web pages (index.html) are not in \(settings.publicDirectory): set --public-dir to the repository's Public folder")
            }
            try settings.validate()
            try settings.prepareDataDirectory()
        } catch {
            FileHandle.standardError.write(Data("keyfob serve: \(error.description)\n".utf8))
            throw ExitCode.failure
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
        // KEYFOB_MASTER_KEY's bytes: the vault has what it needs from them.
        if var key = settings.masterKey {
            settings.masterKey = nil
            wipe(&key)
        }
        for origin in settings.effectiveOrigins where settings.rpID == "localhost" {
            if let port = URL(string: origin)?.port, port != settings.port {
                logger.warning(
                    "origin \(origin) has port \(port) but Keyfob listens on \(settings.port): browsers on that origin reach another server (or set --port \(port))"
                )
            }
        }
        let open = settings.rpID == "localhost" ? "http://localhost:\(settings.port)" : settings.effectiveOrigins.first ?? ""
        logger.info(
            "keyfob serving — open \(open)\(settings.rpID == "localhost" ? " (localhost, not 127.0.0.1: browsers refuse passkeys on a bare IP)" : "")",
            metadata: [
                "address": "http://\(settings.host):\(settings.port)", "rpId": "\(settings.rpID)",
                "origins": "\(settings.effectiveOrigins.joined(separator: ","))", "database": "\(settings.databaseDescription)",
                "pages": "\(settings.publicDirectory)",
            ])
        // Whatever ends the server, the buffered lines are written before the process exits.
        defer { LogOutput.standardOutput.flush() }
        do {
            try await serve(app, logger: logger)
        } catch  where "\(error)".contains("Address already in use") || "\(error)".contains("EADDRINUSE") {
            // NIO's error names no port: whichever of the two cannot be bound now is the busy one.
            let message =
                if let relay = settings.effectiveNIP46Port, !Self.canBind(settings.host, relay), Self.canBind(settings.host, settings.port) {
                    "the NIP-46 relay's port \(relay) on \(settings.host) is already in use (another keyfob?): stop that program, choose another with --nip46-port, or turn the relay off with --nip46-port 0"
                } else {
                    "port \(settings.port) on \(settings.host) is already in use (another keyfob?): stop that program or choose another port with --port"
                }
            FileHandle.standardError.write(Data("keyfob serve: \(message)\n".utf8))
            throw ExitCode.failure
        }
    }

    /// Whether a TCP listener could be bound at `host`:`port` right now (closed at once).
    static func canBind(_ host: String, _ port: Int) -> Bool {
        guard let address = try? SocketAddress.makeAddressResolvingHost(host, port: port) else { return true }
        let fd = socket(address.protocol == .inet6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return true }
        defer { close(fd) }
        var reuse: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        return address.withSockAddr { pointer, size in bind(fd, pointer, socklen_t(size)) } == 0
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
}
