import Foundation
import KeyfobStore
import Logging
import PostgresNIO

// MARK: Meta

extension PostgresStore {
    public func metaValue(_ name: String) async throws -> [UInt8]? {
        try await call { [self] in
            try await rows("SELECT value FROM meta WHERE name = \(name)").first.map { try $0.bytes(0) }
        }
    }

    func upsertMeta(_ name: String, _ value: [UInt8], on connection: PostgresConnection) async throws {
        try await connection.query(
            """
            INSERT INTO meta (name, value) VALUES (\(name), \(ByteBuffer(bytes: value)))
            ON CONFLICT (name) DO UPDATE SET value = excluded.value
            """, logger: logger
        ).collect()
    }

    public func setMetaValue(_ name: String, _ value: [UInt8]) async throws {
        try await call { [self] in try await durably { try await upsertMeta(name, value, on: $0) } }
    }

    public func setMetaValueIfAbsent(_ name: String, _ value: [UInt8]) async throws -> [UInt8] {
        try await call { [self] in
            _ = try await touched(
                "INSERT INTO meta (name, value) VALUES (\(name), \(ByteBuffer(bytes: value))) ON CONFLICT (name) DO NOTHING RETURNING 1")
            return try await rows("SELECT value FROM meta WHERE name = \(name)").first.map { try $0.bytes(0) } ?? value
        }
    }
}
