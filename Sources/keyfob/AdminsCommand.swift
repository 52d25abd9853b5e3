import ArgumentParser
import Foundation
import KeyfobServer
import KeyfobStore

/// `keyfob admins list|add|remove`: who may open /dashboard, bound to accounts (works beside a
/// running server, which reads the bindings on every dashboard request).
struct AdminsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admins",
        abstract: "List, add and remove the dashboard's operators.",
        discussion: """
            An operator is an account: adding binds the account that has the name now (a later account \
            with the same name is not an operator). Removing also overrides --admin for that account. \
            --admin NAME given before NAME signs up works too: that account confirms once with the admin \
            token on /dashboard.
            """,
        subcommands: [List.self, Add.self, Remove.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the accounts added or removed here and by token confirmations.")
        @OptionGroup var store: StoreOptions

        func run() async throws {
            let db = try await store.open()
            let formatter = ISO8601DateFormatter()
            print("username\toperator\tsince")
            for (id, binding) in try await Admins.bindings(in: db).sorted(by: { $0.value.username < $1.value.username }) {
                // The name the account has now (bindings keep the one it had when bound).
                let name = try await db.user(id: id)?.username ?? "\(binding.username) (account removed)"
                print("\(name)\t\(binding.isOperator ? "yes" : "no (removed)")\t\(formatter.string(from: binding.at))")
            }
            print("(--admin names are the server's own setting: see its start-up log)")
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make an account an operator.")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The account's username.") var username: String

        func run() async throws {
            let name = try await AdminsCommand.bind(username, isOperator: true, store: store)
            print("\(name) is an operator: it can open /dashboard")
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make an account no longer an operator (also when --admin names it).")
        @OptionGroup var store: StoreOptions
        @Argument(help: "The account's username.") var username: String

        func run() async throws {
            let name = try await AdminsCommand.bind(username, isOperator: false, store: store)
            print("\(name) is no longer an operator (from its next request)")
        }
    }

    /// Binds the account named `username` as it is now; returns its name as stored.
    static func bind(_ username: String, isOperator: Bool, store: StoreOptions) async throws -> String {
        let db = try await store.open()
        guard let user = try await db.user(named: username) else {
            throw ValidationError("no account named \(username)\(isOperator ? ": sign up first, then add it" : "")")
        }
        try await Admins.bind(user, isOperator: isOperator, in: db, at: Date())
        return user.username
    }
}
