import ArgumentParser
import Foundation
import KeyfobServer
import KeyfobStore

/// Where the database is, for the operator commands: the same settings as `keyfob serve`
/// (flag, `KEYFOB_*` variable or the file `KEYFOB_CONFIG` names), declared in `Setting.all`.
struct StoreOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: ArgumentHelp(SettingsReference.helpLine("data-dir")))
    var dataDir: String?
    @Option(help: ArgumentHelp(SettingsReference.helpLine("database")))
    var database: String?

    /// The settings these options and `extra` name, from flags, the environment and the config
    /// file, as `keyfob serve` reads them.
    func configuration(adding extra: [String: String?] = [:], validate: Bool = true) throws -> ServerConfiguration {
        try ServerConfiguration.forCommand(
            ["data-dir": dataDir, "database": database].merging(extra) { ours, _ in ours }, validate: validate)
    }

    /// Opens the store a running server uses (SQLite in WAL mode or PostgreSQL: both may work at once).
    func open() async throws -> any KeyfobStore {
        let c = try configuration()
        if !c.isPostgres {
            guard FileManager.default.fileExists(atPath: c.sqlitePath) else {
                throw ValidationError("no database at \(c.sqlitePath) (set --data-dir or --database)")
            }
        }
        do { return try await openStoreForCommand(c) } catch { throw ValidationError("\(error)") }
    }
}

extension ServerConfiguration {
    /// The settings an operator command needs, from its flags, the environment and the config file,
    /// checked as `keyfob serve` checks them.
    static func forCommand(_ flags: [String: String?], validate: Bool = true) throws -> ServerConfiguration {
        let arguments = flags.sorted { $0.key < $1.key }.flatMap { name, value in value.map { ["--\(name)", $0] } ?? [] }
        do {
            let c = try ServerConfiguration.resolve(
                arguments: arguments, environment: ProcessInfo.processInfo.environment,
                only: Set(flags.keys).union(["config", "master-key"]))
            if validate { try c.validate() }
            return c
        } catch {
            throw ValidationError(error.description)
        }
    }
}
