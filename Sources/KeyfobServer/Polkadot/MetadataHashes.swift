import Foundation
import KeyfobCrypto
import NIOConcurrencyHelpers
import Polkadot

/// Runtime metadata read and hashed once: a chain's metadata is half a megabyte and its RFC-0078
/// hash a walk over every type the extrinsic reaches, while the approval page asks for the same
/// few runtimes again and again (and `metadata.provide` reads each one first). A handful of
/// runtimes are kept (the newest used), by the SHA-256 of their bytes; anything that does not read
/// is not kept.
final class MetadataHashes: Sendable {
    static let shared = MetadataHashes(capacity: 4)

    /// One runtime's metadata, with the key it is kept under (its bytes are hashed once a call).
    struct Runtime: Sendable {
        let key: [UInt8]
        let metadata: RuntimeMetadata
        /// What the RFC-0078 hash covers, or why it cannot be hashed.
        let registry: Result<HashedRegistry, PolkadotError>
    }

    private struct Entry {
        let metadata: RuntimeMetadata
        let registry: Result<HashedRegistry, PolkadotError>
        var hashes: [MerkleizedMetadata.ExtraInfo: [UInt8]] = [:]
        var used: UInt64
    }

    private let entries = NIOLockedValueBox<(map: [[UInt8]: Entry], clock: UInt64)>(([:], 0))
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// The metadata in `bytes`, or nil when it does not read.
    func runtime(_ bytes: [UInt8]) -> Runtime? {
        let key = sha256(bytes)
        if let known = runtime(key: key) { return known }
        guard let metadata = try? RuntimeMetadata(bytes) else { return nil }
        let registry = Result { () throws(PolkadotError) in try HashedRegistry(metadata) }
        entries.withLockedValue { state in
            state.clock += 1
            if state.map.count >= capacity, let oldest = state.map.min(by: { $0.value.used < $1.value.used })?.key {
                state.map[oldest] = nil
            }
            state.map[key] = Entry(metadata: metadata, registry: registry, used: state.clock)
        }
        return Runtime(key: key, metadata: metadata, registry: registry)
    }

    /// The runtime kept under `key` (the SHA-256 of its bytes), if it is kept: a stored runtime
    /// need not be read from the store again.
    func runtime(key: [UInt8]) -> Runtime? {
        touch(key).map { Runtime(key: key, metadata: $0.metadata, registry: $0.registry) }
    }

    /// The RFC-0078 hash of `runtime` with `extra`; nil when it has none.
    func hash(_ runtime: Runtime, _ extra: MerkleizedMetadata.ExtraInfo) -> [UInt8]? {
        if let known = touch(runtime.key)?.hashes[extra] { return known }
        guard let registry = try? runtime.registry.get(), let hash = try? MerkleizedMetadata.hash(registry, extra) else { return nil }
        entries.withLockedValue { state in
            // A few chains' tokens per runtime at most: a dapp varying them cannot grow this.
            if state.map[runtime.key]?.hashes.count ?? 0 >= 8 { state.map[runtime.key]?.hashes.removeAll() }
            state.map[runtime.key]?.hashes[extra] = hash
        }
        return hash
    }

    private func touch(_ key: [UInt8]) -> Entry? {
        entries.withLockedValue { state in
            guard state.map[key] != nil else { return nil }
            state.clock += 1
            state.map[key]?.used = state.clock
            return state.map[key]
        }
    }
}
