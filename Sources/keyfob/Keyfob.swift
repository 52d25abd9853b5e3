import ArgumentParser
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
        subcommands: [Serve.self, Users.self, Sessions.self, AdminsCommand.self, AdminTokenCommand.self, RotateMasterKey.self, MigrateStore.self])

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
            fixMmapThreshold(128 * 1024)
        #endif
        await main(nil)
    }

    #if os(Linux)
        /// glibc's `mallopt(M_MMAP_THRESHOLD, bytes)`. Swift's Glibc module leaves `mallopt` out, and
        /// a C module for one call would be the only C import outside the crypto layer, the cores'
        /// wrappers and the store: the symbol is looked up instead (`M_MMAP_THRESHOLD` is -3 in
        /// glibc's ABI). Where it is missing, nothing changes.
        static func fixMmapThreshold(_ bytes: Int32) {
            typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return }  // RTLD_DEFAULT
            _ = unsafeBitCast(symbol, to: Mallopt.self)(-3, bytes)
        }
    #endif
}
