import KeyfobCodecs
import KeyfobCrypto
import Nostr

/// The three key types Substrate accounts use, by the names polkadot-js gives them.
public enum KeyType: String, Sendable, CaseIterable, Codable {
    case sr25519, ed25519, ecdsa

    /// The 32-byte account id an address encodes for a public key of this type: the key itself,
    /// or its BLAKE2b-256 for ecdsa (33 bytes).
    public func accountId(publicKey: [UInt8]) -> [UInt8] { self == .ecdsa ? blake2b256(publicKey) : publicKey }

    /// The `MultiSignature` variant byte polkadot-js puts before an extrinsic signature.
    public var multiSignatureTag: UInt8 {
        switch self {
        case .ed25519: 0
        case .sr25519: 1
        case .ecdsa: 2
        }
    }
}

/// One Substrate account's key: its type, secret and public key. The secret is what custody stores:
/// sr25519 the 64-byte schnorrkel form (scalar ‖ nonce), ed25519 the 32-byte seed, ecdsa the 32-byte
/// secret, held in wiped memory (`SharedSecret`: zeroed when the last copy of the key goes).
/// `description` never shows it.
public struct SubstrateKey: Sendable, CustomStringConvertible {
    public let type: KeyType
    public let publicKey: [UInt8]
    private let stored: SharedSecret

    /// The secret for one use: a copy wiped as soon as `body` returns.
    private func withSecret<R, E: Error>(_ body: ([UInt8]) throws(E) -> R) throws(E) -> R {
        var copy = stored.bytes.exposedCopy()
        defer { wipe(&copy) }
        return try body(copy)
    }

    public var description: String { "SubstrateKey(\(type), \(Hex.encode(publicKey)))" }

    /// The 32-byte account id addresses encode: the public key, or its BLAKE2b-256 for ecdsa (33 bytes).
    public var accountId: [UInt8] { type.accountId(publicKey: publicKey) }

    public func address(prefix: UInt16) -> String { SS58.encode(accountId: accountId, prefix: prefix) }

    /// The stored secret, for sealing into custody; the caller wipes its copy.
    public func exposedSecret() -> [UInt8] { stored.bytes.exposedCopy() }

    /// A new key from 32 bytes of seed (a mini secret).
    public init(type: KeyType, seed: [UInt8]) throws(PolkadotError) {
        guard seed.count == 32 else { throw PolkadotError(.invalidBackup, "a seed is 32 bytes") }
        switch type {
        case .sr25519:
            let pair = Sr25519.Keypair(miniSecret: seed)
            var secret = pair.secret.key + pair.secret.nonce
            self.init(type: type, taking: &secret, publicKey: pair.publicKey)
        case .ed25519, .ecdsa:
            try self.init(type: type, storedSecret: seed)
        }
    }

    /// The key custody stored; refuses bytes that are not a valid key of the type.
    public init(type: KeyType, storedSecret: [UInt8]) throws(PolkadotError) {
        switch type {
        case .sr25519:
            guard storedSecret.count == 64, Ristretto255.isCanonicalScalar(Array(storedSecret[0..<32])) else {
                throw PolkadotError(.invalidBackup, "an sr25519 secret is a 32-byte scalar and a 32-byte nonce")
            }
            let pair = Sr25519.Keypair(secret: .init(key: Array(storedSecret[0..<32]), nonce: Array(storedSecret[32...])))
            var secret = storedSecret
            self.init(type: type, taking: &secret, publicKey: pair.publicKey)
        case .ed25519:
            guard let pub = Ed25519.publicKey(seed: storedSecret) else {
                throw PolkadotError(.invalidBackup, "an ed25519 seed is 32 bytes")
            }
            var secret = storedSecret
            self.init(type: type, taking: &secret, publicKey: pub)
        case .ecdsa:
            guard let pub = RecoverableECDSA.compressedPublicKey(secret: storedSecret) else {
                throw PolkadotError(.invalidBackup, "not a valid secp256k1 secret key")
            }
            var secret = storedSecret
            self.init(type: type, taking: &secret, publicKey: pub)
        }
    }

    /// Takes `secret` into wiped memory (the array is wiped).
    private init(type: KeyType, taking secret: inout [UInt8], publicKey: [UInt8]) {
        self.type = type
        stored = SharedSecret(taking: &secret)
        self.publicKey = publicKey
    }

    /// From a secret URI as Substrate and polkadot-js read it: `phrase[//hard][/soft]…[///password]`.
    public init(type: KeyType, secretURI: String) throws(PolkadotError) {
        let uri = try SecretURI(secretURI)
        var entropy = try Mnemonic.entropy(of: uri.phrase)
        var seed = Mnemonic.miniSecret(entropy: entropy, password: uri.password)
        defer {
            wipe(&entropy)
            wipe(&seed)
        }
        var key = try SubstrateKey(type: type, seed: seed)
        for junction in uri.junctions { key = try key.derived(junction) }
        self = key
    }

    /// The key one junction further down.
    public func derived(_ junction: DeriveJunction) throws(PolkadotError) -> SubstrateKey {
        switch (type, junction.isHard) {
        case (.sr25519, let hard):
            let pair = sr25519Keypair
            let next = hard ? pair.hardDerived(chainCode: junction.chainCode) : pair.softDerived(chainCode: junction.chainCode)
            var secret = next.secret.key + next.secret.nonce
            return SubstrateKey(type: type, taking: &secret, publicKey: next.publicKey)
        case (.ed25519, true), (.ecdsa, true):
            // ("Ed25519HDKD" | "Secp256k1HDKD", seed, chain code), SCALE-encoded, BLAKE2b-256.
            let label = type == .ed25519 ? "Ed25519HDKD" : "Secp256k1HDKD"
            var encoded = withSecret { SCALE.string(label) + $0 + junction.chainCode }
            var seed = blake2b256(encoded)
            defer {
                wipe(&encoded)
                wipe(&seed)
            }
            return try SubstrateKey(type: type, storedSecret: seed)
        case (.ed25519, false), (.ecdsa, false):
            throw PolkadotError(.invalidDerivationPath, "\(type.rawValue) keys derive only hard junctions (//name)")
        }
    }

    /// The sr25519 keypair of the stored secret (scalar ‖ nonce); for sr25519 keys only.
    var sr25519Keypair: Sr25519.Keypair {
        withSecret { Sr25519.Keypair(secret: .init(key: Array($0[0..<32]), nonce: Array($0[32...]))) }
    }

    /// Signs as Substrate does: sr25519 and ed25519 over the message, ecdsa over its BLAKE2b-256.
    public func sign(_ message: [UInt8]) -> [UInt8] {
        switch type {
        case .sr25519:
            return sr25519Keypair.sign(message)
        case .ed25519:
            return withSecret { Ed25519.sign(message, seed: $0) } ?? []
        case .ecdsa:
            return withSecret { RecoverableECDSA.sign(hash: blake2b256(message), secret: $0) } ?? []
        }
    }

    public static func verify(type: KeyType, signature: [UInt8], message: [UInt8], publicKey: [UInt8]) -> Bool {
        switch type {
        case .sr25519: Sr25519.verify(signature: signature, message: message, publicKey: publicKey)
        case .ed25519: Ed25519.verify(signature: signature, message: message, publicKey: publicKey)
        case .ecdsa: RecoverableECDSA.recover(signature: signature, hash: blake2b256(message)) == publicKey
        }
    }
}

/// One step of a derivation path: a 32-byte chain code, hard (`//`) or soft (`/`).
public struct DeriveJunction: Sendable, Equatable {
    public let chainCode: [UInt8]
    public let isHard: Bool

    /// Substrate's `DeriveJunction::from(&str)`: a number is its u64 little-endian, anything else its
    /// SCALE string; zero-padded to 32 bytes, or BLAKE2b-256 when longer.
    public init(_ code: String, hard: Bool) {
        let encoded = UInt64(code).map { SCALE.littleEndian($0, width: 8) } ?? SCALE.string(code)
        chainCode = encoded.count > 32 ? blake2b256(encoded) : encoded + [UInt8](repeating: 0, count: 32 - encoded.count)
        isHard = hard
    }
}

/// `phrase//hard/soft///password`, split as Substrate's secret-URI grammar does.
struct SecretURI {
    let phrase: String
    let junctions: [DeriveJunction]
    let password: String

    init(_ uri: String) throws(PolkadotError) {
        guard uri.utf8.count <= 4096 else { throw PolkadotError(.invalidMnemonic, "a recovery phrase and path fit in 4 KB") }
        var rest = Substring(uri)
        var password = ""
        if let range = rest.range(of: "///") {
            password = String(rest[range.upperBound...])
            rest = rest[..<range.lowerBound]
        }
        let pathStart = rest.firstIndex(of: "/") ?? rest.endIndex
        phrase = String(rest[..<pathStart].drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
        var path = rest[pathStart...]
        var junctions: [DeriveJunction] = []
        while !path.isEmpty {
            let hard = path.hasPrefix("//")
            path = path.dropFirst(hard ? 2 : 1)
            let end = path.firstIndex(of: "/") ?? path.endIndex
            let code = path[..<end]
            guard !code.isEmpty else {
                throw PolkadotError(.invalidDerivationPath, "a derivation path is //hard or /soft steps, none of them empty")
            }
            junctions.append(DeriveJunction(String(code), hard: hard))
            path = path[end...]
        }
        self.junctions = junctions
        self.password = password
    }
}
