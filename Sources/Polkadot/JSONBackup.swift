import Foundation
import KeyfobCrypto

/// polkadot-js's encrypted account file (keyring `toJson`, encoding version 3): PKCS#8-framed key
/// bytes sealed with XSalsa20-Poly1305 under scrypt(password), N = 2^15, r = 8, p = 1. What
/// Polkadot.js apps, Nova, Talisman and SubWallet import and export.
public enum JSONBackup {
    static let pkcs8Header: [UInt8] = [48, 83, 2, 1, 1, 48, 5, 6, 3, 43, 101, 112, 4, 34, 4, 32]
    static let pkcs8Divider: [UInt8] = [161, 35, 3, 33, 0]
    static let scryptLogN: UInt8 = 15
    static let acceptedLogN: [UInt8] = [15, 16, 17]

    /// N, p, r as the file stores them (little-endian u32 each).
    static func scryptParameters(logN: UInt8) -> [UInt8] {
        SCALE.littleEndian(1 << UInt64(logN), width: 4) + SCALE.littleEndian(1, width: 4) + SCALE.littleEndian(8, width: 4)
    }

    /// The account file as JSON. Read leniently — a field of another type reads as missing, and
    /// `importKey` refuses the file with `invalid_backup` naming it — so only a file that is not a
    /// JSON object at all fails to decode. Members polkadot-js adds that Keyfob does not use are
    /// ignored.
    public struct File: Codable, Sendable, Equatable {
        public var encoded: String?
        public var encoding: Encoding?
        public var address: String?
        public var meta: Meta?

        public struct Encoding: Codable, Sendable, Equatable {
            public var content: [String]?
            public var type: [String]?
            public var version: String?

            public init(content: [String]?, type: [String]?, version: String?) {
                (self.content, self.type, self.version) = (content, type, version)
            }

            public init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                content = try? container.decodeIfPresent([String].self, forKey: .content)
                type = try? container.decodeIfPresent([String].self, forKey: .type)
                version = try? container.decodeIfPresent(String.self, forKey: .version)
            }
        }

        public struct Meta: Codable, Sendable, Equatable {
            public var genesisHash: String?
            public var name: String?
            public var whenCreated: Int?

            public init(genesisHash: String?, name: String?, whenCreated: Int?) {
                (self.genesisHash, self.name, self.whenCreated) = (genesisHash, name, whenCreated)
            }

            public init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                genesisHash = try? container.decodeIfPresent(String.self, forKey: .genesisHash)
                name = try? container.decodeIfPresent(String.self, forKey: .name)
                whenCreated = try? container.decodeIfPresent(Int.self, forKey: .whenCreated)
            }
        }

        public init(encoded: String?, encoding: Encoding?, address: String?, meta: Meta?) {
            (self.encoded, self.encoding, self.address, self.meta) = (encoded, encoding, address, meta)
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            encoded = try? container.decodeIfPresent(String.self, forKey: .encoded)
            encoding = try? container.decodeIfPresent(Encoding.self, forKey: .encoding)
            address = try? container.decodeIfPresent(String.self, forKey: .address)
            meta = try? container.decodeIfPresent(Meta.self, forKey: .meta)
        }
    }

    /// The account file. `name` and `genesisHash` go in `meta` as polkadot-js writes them.
    public static func export(
        _ key: SubstrateKey, password: String, name: String, prefix: UInt16 = SS58.generic, createdAt: Date = Date()
    ) -> File {
        var secret = key.exposedSecret()
        var framed = pkcs8Header + secretKeyBytes(key, secret: secret) + pkcs8Divider + key.publicKey
        defer {
            wipe(&secret)
            wipe(&framed)
        }
        let salt = randomBytes(32)
        var symmetric = scrypt(password: Array(password.utf8), salt: salt, logN: scryptLogN, length: 32) ?? []
        defer { wipe(&symmetric) }
        let nonce = randomBytes(24)
        let sealed = SecretBox.seal(framed, key: symmetric, nonce: nonce)
        let encoded =
            salt + SCALE.littleEndian(1 << 15, width: 4) + SCALE.littleEndian(1, width: 4)
            + SCALE.littleEndian(8, width: 4) + nonce + sealed
        return File(
            encoded: Data(encoded).base64EncodedString(),
            encoding: File.Encoding(content: ["pkcs8", key.type.rawValue], type: ["scrypt", "xsalsa20-poly1305"], version: "3"),
            address: key.address(prefix: prefix),
            meta: File.Meta(genesisHash: "", name: name, whenCreated: Int(createdAt.timeIntervalSince1970 * 1000)))
    }

    /// The key in a backup. Refuses other encodings, other scrypt parameters (a file must not choose
    /// the server's work), a wrong password, and a public key that does not match the secret.
    public static func importKey(_ file: File, password: String) throws(PolkadotError) -> SubstrateKey {
        guard let encoding = file.encoding, let content = encoding.content,
            content.count == 2, content[0] == "pkcs8", let type = KeyType(rawValue: content[1])
        else { throw PolkadotError(.invalidBackup, "not a polkadot-js account file (encoding.content is not pkcs8 with a key type)") }
        guard encoding.type == ["scrypt", "xsalsa20-poly1305"], encoding.version == "3" else {
            throw PolkadotError(.invalidBackup, "only password-protected files (scrypt, xsalsa20-poly1305, version 3) can be imported")
        }
        guard let text = file.encoded, text.utf8.count <= 4096, let data = Data(base64Encoded: text) else {
            throw PolkadotError(.invalidBackup, "encoded is not base64")
        }
        let bytes = [UInt8](data)
        let header = 32 + 12 + 24
        guard bytes.count > header + SecretBox.tagLength else { throw PolkadotError(.invalidBackup, "encoded is too short") }
        // N, p, r as written: polkadot-js writes N 2^15, Nova 2^17; p 1, r 8. Nothing else is read, so
        // a file cannot choose the server's work (2^17 is 128 MiB).
        let parameters = Array(bytes[32..<44])
        guard let logN = Self.acceptedLogN.first(where: { parameters == Self.scryptParameters(logN: $0) }) else {
            throw PolkadotError(.invalidBackup, "the file's scrypt parameters are not polkadot-js's or Nova's (N 2^15–2^17, p 1, r 8)")
        }
        var symmetric = scrypt(password: Array(password.utf8), salt: Array(bytes[0..<32]), logN: logN, length: 32) ?? []
        defer { wipe(&symmetric) }
        let sealed = Array(bytes[header...])
        guard var framed = SecretBox.open(sealed, key: symmetric, nonce: Array(bytes[44..<68])) else {
            throw PolkadotError(.wrongPassword, "the password does not open this file")
        }
        defer { wipe(&framed) }
        guard framed.starts(with: pkcs8Header) else { throw PolkadotError(.invalidBackup, "the file's key is not PKCS#8-framed") }
        // polkadot-js's decodePair: a 64-byte secret, else (old files, ecdsa) a 32-byte one.
        let body = Array(framed[pkcs8Header.count...])
        var secretLength = 64
        if !(body.count >= 64 + pkcs8Divider.count && Array(body[64..<(64 + pkcs8Divider.count)]) == pkcs8Divider) {
            secretLength = 32
            guard body.count >= 32 + pkcs8Divider.count, Array(body[32..<(32 + pkcs8Divider.count)]) == pkcs8Divider else {
                throw PolkadotError(.invalidBackup, "the file's key has no PKCS#8 divider")
            }
        }
        let publicKey = Array(body[(secretLength + pkcs8Divider.count)...].prefix(33))
        let key = try SubstrateKey(type: type, storedSecret: storedSecret(type: type, secretKey: Array(body[0..<secretLength])))
        guard key.publicKey.starts(with: publicKey.prefix(32)), publicKey.count >= 32 else {
            throw PolkadotError(.invalidBackup, "the file's public key does not belong to its secret key")
        }
        return key
    }

    /// polkadot-js's `secretKey` per type: sr25519 its 64-byte Ed25519-form key, ed25519 seed ‖ public
    /// (tweetnacl's layout), ecdsa the 32-byte secret.
    private static func secretKeyBytes(_ key: SubstrateKey, secret: [UInt8]) -> [UInt8] {
        switch key.type {
        case .sr25519:
            return key.sr25519Keypair.ed25519Bytes
        case .ed25519: return secret + key.publicKey
        case .ecdsa: return secret
        }
    }

    private static func storedSecret(type: KeyType, secretKey: [UInt8]) throws(PolkadotError) -> [UInt8] {
        switch type {
        case .sr25519:
            guard let pair = Sr25519.Keypair(ed25519Bytes: secretKey) else {
                throw PolkadotError(.invalidBackup, "an sr25519 file holds a 64-byte secret key")
            }
            return pair.secret.key + pair.secret.nonce
        case .ed25519, .ecdsa:
            return Array(secretKey.prefix(32))
        }
    }
}
