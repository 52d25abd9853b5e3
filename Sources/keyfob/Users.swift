import ArgumentParser
import Foundation
import KeyfobCodecs
import KeyfobServer
import KeyfobStore
import WebAuthn

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
                print(
                    "passkey \(Base64URL.encode(credential.id).prefix(16))…  \(credential.name ?? "-")  format=\(credential.attestationFormat) created=\(formatter.string(from: credential.createdAt)) last-used=\(credential.lastUsedAt.map { formatter.string(from: $0) } ?? "never")"
                )
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
