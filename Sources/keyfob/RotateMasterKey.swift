import ArgumentParser
import Foundation
import KeyfobServer

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

    @OptionGroup var store: StoreOptions
    @Option(name: .customLong("master-key-file"), help: ArgumentHelp("The current master key. " + SettingsReference.helpLine("master-key-file")))
    var masterKeyFile: String?
    @Option(
        name: .customLong("new-master-key-file"),
        help: "Where to write the new key (required with KEYFOB_MASTER_KEY; default <master-key-file>.new, then renamed over the old file).")
    var newMasterKeyFile: String?

    func run() async throws {
        do throws(any Error) {
            let c = try self.store.configuration(adding: ["master-key-file": masterKeyFile], validate: false)
            if c.masterKey != nil {
                guard newMasterKeyFile != nil else {
                    throw ServerConfiguration.Invalid(description: "with KEYFOB_MASTER_KEY, name where the new key goes: --new-master-key-file PATH")
                }
            } else if !FileManager.default.fileExists(atPath: c.effectiveMasterKeyFile) {
                throw ServerConfiguration.Invalid(
                    description: "no master key file at \(c.effectiveMasterKeyFile) (set --master-key-file or --data-dir)")
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
                    throw ServerConfiguration.Invalid(
                        description:
                            "re-sealed \(count) keys, but could not move \(newPath) over \(c.effectiveMasterKeyFile): do it by hand before starting the server"
                    )
                }
                print("re-sealed \(count) nostr keys; \(c.effectiveMasterKeyFile) holds the new master key (back it up)")
            } else {
                print(
                    "re-sealed \(count) nostr keys; the new master key is in \(newPath): set KEYFOB_MASTER_KEY=$(base64 -w0 \(newPath)) or point --master-key-file at it"
                )
            }
        } catch {
            FileHandle.standardError.write(Data("keyfob rotate-master-key: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}
