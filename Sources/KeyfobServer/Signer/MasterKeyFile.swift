import Foundation
import KeyfobCrypto

/// Where the master key comes from: `KEYFOB_MASTER_KEY` (base64), or a file of 32 random bytes
/// that is created with mode 0600 on first start and refused when group or others can read it.
public enum MasterKeyFile {
    /// Loads the key named by the configuration, creating the file on first start.
    /// Returns the key and whether the file was just created.
    public static func load(_ configuration: ServerConfiguration) throws(ServerConfiguration.Invalid) -> (key: [UInt8], created: Bool) {
        if let key = configuration.masterKey { return (key, false) }
        let path = configuration.effectiveMasterKeyFile
        if !FileManager.default.fileExists(atPath: path) {
            return (try create(at: path), true)
        }
        return (try read(at: path), false)
    }

    /// Decodes `KEYFOB_MASTER_KEY`: base64 (standard or url-safe) of exactly 32 bytes.
    public static func decode(base64 text: String) throws(ServerConfiguration.Invalid) -> [UInt8] {
        var normalized = text.trimmingCharacters(in: .whitespacesAndNewlines)
            .replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while normalized.count % 4 != 0 { normalized += "=" }
        guard let data = Data(base64Encoded: normalized), data.count == KeyVault.masterKeyLength else {
            throw .init(
                description: "KEYFOB_MASTER_KEY must be the base64 of exactly 32 random bytes (make one with: head -c 32 /dev/urandom | base64)")
        }
        return [UInt8](data)
    }

    /// Writes a new random key to `path` (which must not exist) with mode 0600.
    public static func create(at path: String) throws(ServerConfiguration.Invalid) -> [UInt8] {
        let key = randomBytes(KeyVault.masterKeyLength)
        // O_EXCL: two instances starting together cannot both write a key; mode 0600 whatever the umask.
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST { return try read(at: path) }
            throw .init(
                description: "cannot create master key file \(path): \(String(cString: strerror(errno))) (set --master-key-file to a writable path)")
        }
        defer { close(fd) }
        guard fchmod(fd, 0o600) == 0, write(fd, key, key.count) == key.count, fsync(fd) == 0 else {
            unlink(path)
            throw .init(description: "cannot write master key file \(path): \(String(cString: strerror(errno)))")
        }
        return key
    }

    static func read(at path: String) throws(ServerConfiguration.Invalid) -> [UInt8] {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw .init(description: "cannot read master key file \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw .init(
                description: """
                    master key file \(path) can be read by group or others (mode \(String(info.st_mode & 0o777, radix: 8))); \
                    run: chmod 600 \(path)
                    """)
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .init(description: "cannot read master key file \(path) (check its owner and permissions)")
        }
        guard data.count == KeyVault.masterKeyLength else {
            throw .init(description: "master key file \(path) must hold exactly 32 bytes, not \(data.count)")
        }
        return [UInt8](data)
    }
}
