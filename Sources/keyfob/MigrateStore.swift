import ArgumentParser
import Foundation
import KeyfobServer

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

    /// Where the SQLite database is: the settings every operator command reads.
    @OptionGroup var store: StoreOptions
    @Option(help: "The SQLite database to copy, when it is not --database's: sqlite (the file in --data-dir) or sqlite:/path/to/keyfob.sqlite.")
    var from: String?
    @Option(help: "The PostgreSQL database: postgres://user:password@host:5432/db[?sslmode=require].")
    var to: String

    func run() async throws {
        var source = try store.configuration(validate: false)
        if let from { source.database = from }
        var target = source
        target.database = to
        do {
            try source.validate()
            try target.validate()
            let copied = try await StoreMigration.run(from: source, to: target)
            for (table, rows) in copied { print("\(table)\t\(rows)") }
            print(
                "copied \(source.sqlitePath) into \(target.databaseDescription); start the instances with --database pointing there and the same master key"
            )
        } catch {
            FileHandle.standardError.write(Data("keyfob migrate-store: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}
