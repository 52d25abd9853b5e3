import Foundation

// MARK: Meta

extension SQLiteStore {
    public func metaValue(_ name: String) async throws -> [UInt8]? {
        try read { connection in
            try connection.query("SELECT value FROM meta WHERE name = ?", [.text(name)]).first?.first?.blob
        }
    }

    public func setMetaValue(_ name: String, _ value: [UInt8]) async throws {
        try write {
            try connection.query("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", [.text(name), .blob(value)])
        }
    }

    public func setMetaValueIfAbsent(_ name: String, _ value: [UInt8]) async throws -> [UInt8] {
        try write {
            try connection.query("INSERT OR IGNORE INTO meta (name, value) VALUES (?, ?)", [.text(name), .blob(value)])
            return try connection.query("SELECT value FROM meta WHERE name = ?", [.text(name)]).first?.first?.blob ?? value
        }
    }
}
