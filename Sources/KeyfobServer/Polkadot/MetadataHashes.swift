import Foundation
import KeyfobCrypto
import NIOConcurrencyHelpers
import Polkadot

/// Runtime metadata read and hashed once: a chain's metadata is half a megabyte and its RFC-0078
/// hash a walk over every type the extrinsic reaches, while the approval page asks for the same
/// few runtimes again and again. A handful of runtimes are kept (the newest used), by the SHA-256
/// of their bytes; anything that does not read is not kept.
final class MetadataHashes: Sendable {
    static let shared = MetadataHashes(capacity: 4)

    private struct Entry {
        let metadata: RuntimeMetadata
        var hashes: [MerkleizedMetadata.ExtraInfo: [UInt8]] = [:]
        var used: UInt64
    }

    private let entries = NIOLockedValueBox<(map: [[UInt8]: Entry], clock: UInt64)>(([:], 0))
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// The metadata in `bytes`, or nil when it does not read.
    func metadata(_ bytes: [UInt8]) -> RuntimeMetadata? {
        let key = sha256(bytes)
        if let known = touch(key) { return known.metadata }
        guard let metadata = try? RuntimeMetadata(bytes) else { return nil }
        entries.withLockedValue { state in
            state.clock += 1
            if state.map.count >= capacity, let oldest = state.map.min(by: { $0.value.used < $1.value.used })?.key {
                state.map[oldest] = nil
            }
            state.map[key] = Entry(metadata: metadata, used: state.clock)
        }
        return metadata
    }

    /// The RFC-0078 hash of `metadata` (read from `bytes`) with `extra`; nil when it has none.
    func hash(_ bytes: [UInt8], _ metadata: RuntimeMetadata, _ extra: MerkleizedMetadata.ExtraInfo) -> [UInt8]? {
        let key = sha256(bytes)
        if let known = touch(key)?.hashes[extra] { return known }
        guard let hash = try? MerkleizedMetadata.hash(metadata, extra) else { return nil }
        entries.withLockedValue { state in
            // A few chains' tokens per runtime at most: a dapp varying them cannot grow this.
            if state.map[key]?.hashes.count ?? 0 >= 8 { state.map[key]?.hashes.removeAll() }
            state.map[key]?.hashes[extra] = hash
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
