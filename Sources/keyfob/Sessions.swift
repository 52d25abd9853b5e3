import ArgumentParser
import KeyfobServer

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
