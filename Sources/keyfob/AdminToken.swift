import ArgumentParser
import KeyfobServer

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
