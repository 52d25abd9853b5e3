import CSecp256k1
import KeyfobCodecs
import KeyfobCrypto

// The only file that calls libsecp256k1: keys, BIP-340 Schnorr signatures, x-only ECDH, and the
// recoverable ECDSA Substrate's ecdsa accounts sign with (used by the Polkadot module).

/// The shared libsecp256k1 context. Randomized once; afterwards only read, which the
/// library documents as thread-safe.
final class Secp256k1Context: @unchecked Sendable {
    static let shared = Secp256k1Context()
    let pointer: OpaquePointer

    private init() {
        pointer = secp256k1_context_create(UInt32(SECP256K1_CONTEXT_NONE))!
        var seed = randomBytes(32)
        _ = secp256k1_context_randomize(pointer, &seed)
        wipe(&seed)
    }
}

/// An x-only public key (BIP-340): 32 bytes, a point on the curve with even y.
public struct PublicKey: Sendable, Hashable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// Parses 32 bytes; fails unless they are the x coordinate of a curve point.
    public init(bytes: [UInt8]) throws(NostrError) {
        guard bytes.count == 32 else { throw .init(.invalidPubkey, "a public key is 32 bytes") }
        var key = secp256k1_xonly_pubkey()
        guard secp256k1_xonly_pubkey_parse(Secp256k1Context.shared.pointer, &key, bytes) == 1 else {
            throw .init(.invalidPubkey, "public key is not a point on secp256k1")
        }
        self.bytes = bytes
    }

    /// Parses 64 hex characters (either case).
    public init(hex: String) throws(NostrError) {
        guard hex.utf8.count == 64, let bytes = Hex.decode(hex) else {
            throw .init(.invalidPubkey, "a public key is 64 hex characters")
        }
        try self.init(bytes: bytes)
    }

    public var hex: String { Hex.encode(bytes) }
    public var description: String { hex }

    /// Checks a BIP-340 signature over a message of any length.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        guard signature.count == 64 else { return false }
        let ctx = Secp256k1Context.shared.pointer
        var key = secp256k1_xonly_pubkey()
        guard secp256k1_xonly_pubkey_parse(ctx, &key, bytes) == 1 else { return false }
        return secp256k1_schnorrsig_verify(ctx, signature, message, message.count, &key) == 1
    }
}

/// A secp256k1 secret key. Its bytes are wiped when the last copy goes away, and it
/// never prints itself.
public final class SecretKey: @unchecked Sendable, CustomStringConvertible {
    private var storage: [UInt8]
    private var keypair = secp256k1_keypair()
    public let publicKey: PublicKey

    /// Takes 32 secret bytes; fails for zero or anything not below the curve order.
    public init(bytes: [UInt8]) throws(NostrError) {
        guard bytes.count == 32 else { throw .init(.invalidRequest, "a secret key is 32 bytes") }
        let ctx = Secp256k1Context.shared.pointer
        guard secp256k1_keypair_create(ctx, &keypair, bytes) == 1 else {
            throw .init(.invalidRequest, "secret key is out of range")
        }
        var xonly = secp256k1_xonly_pubkey()
        var parity: Int32 = 0
        var out = [UInt8](repeating: 0, count: 32)
        secp256k1_keypair_xonly_pub(ctx, &xonly, &parity, &keypair)
        secp256k1_xonly_pubkey_serialize(ctx, &out, &xonly)
        publicKey = try PublicKey(bytes: out)
        storage = bytes
    }

    public convenience init(hex: String) throws(NostrError) {
        guard hex.utf8.count == 64, var bytes = Hex.decode(hex) else {
            throw .init(.invalidRequest, "a secret key is 64 hex characters")
        }
        defer { wipe(&bytes) }
        try self.init(bytes: bytes)
    }

    /// A fresh key from OpenSSL's CSPRNG.
    public static func generate() -> SecretKey {
        while true {
            var bytes = randomBytes(32)
            defer { wipe(&bytes) }
            if let key = try? SecretKey(bytes: bytes) { return key }
        }
    }

    deinit {
        wipe(&storage)
        withUnsafeMutableBytes(of: &keypair) { wipe($0) }
    }

    public var description: String { "SecretKey(<redacted>)" }

    /// The secret bytes, for export (nsec, ncryptsec) and encrypted storage only.
    public func withUnsafeSecretBytes<R>(_ body: ([UInt8]) throws -> R) rethrows -> R { try body(storage) }

    /// BIP-340 Schnorr signature over `message` (any length), with fresh auxiliary randomness.
    public func sign(_ message: [UInt8], auxiliaryRandomness: [UInt8]? = nil) -> [UInt8] {
        var signature = [UInt8](repeating: 0, count: 64)
        var aux = auxiliaryRandomness ?? randomBytes(32)
        var params = secp256k1_schnorrsig_extraparams()
        params.magic = (0xda, 0x6f, 0xb3, 0x8c)
        let ok = aux.withUnsafeMutableBytes { auxPointer in
            params.ndata = auxPointer.baseAddress
            return secp256k1_schnorrsig_sign_custom(
                Secp256k1Context.shared.pointer, &signature, message, message.count,
                &keypair, &params)
        }
        precondition(ok == 1, "schnorr signing failed with a valid keypair")
        wipe(&aux)
        return signature
    }

    /// The x coordinate of this key times `peer` (unhashed), as NIP-04 and NIP-44 use it. Throws
    /// rather than return anything a cipher could take for a key.
    public func sharedX(with peer: PublicKey) throws(NostrError) -> [UInt8] {
        let ctx = Secp256k1Context.shared.pointer
        var point = secp256k1_pubkey()
        // An x-only key stands for the point with even y: 0x02 || x.
        let compressed = [0x02] + peer.bytes
        guard secp256k1_ec_pubkey_parse(ctx, &point, compressed, 33) == 1 else {
            throw .init(.invalidPubkey, "the peer's public key is not a point on secp256k1")
        }
        let copyX: secp256k1_ecdh_hash_function = { output, x, _, _ in
            guard let output, let x else { return 0 }
            output.update(from: x, count: 32)
            return 1
        }
        var out = [UInt8](repeating: 0, count: 32)
        guard secp256k1_ecdh(ctx, &out, &point, storage, copyX, nil) == 1 else { throw .init(.internalError, "ECDH failed") }
        return out
    }
}

/// Recoverable ECDSA on secp256k1 (RFC 6979 nonces, low s), as Substrate's `ecdsa` accounts sign:
/// over a 32-byte hash the caller computes (BLAKE2b-256 there).
public enum RecoverableECDSA {
    /// The 33-byte compressed public key of a 32-byte secret; nil when the secret is not a valid key.
    public static func compressedPublicKey(secret: [UInt8]) -> [UInt8]? {
        guard secret.count == 32 else { return nil }
        var pubkey = secp256k1_pubkey()
        guard secp256k1_ec_pubkey_create(Secp256k1Context.shared.pointer, &pubkey, secret) == 1 else { return nil }
        var out = [UInt8](repeating: 0, count: 33)
        var length = 33
        _ = secp256k1_ec_pubkey_serialize(
            Secp256k1Context.shared.pointer, &out, &length, &pubkey, UInt32(SECP256K1_EC_COMPRESSED))
        return out
    }

    /// r ‖ s ‖ recovery id (65 bytes) over `hash`; nil for an invalid secret.
    public static func sign(hash: [UInt8], secret: [UInt8]) -> [UInt8]? {
        guard hash.count == 32, secret.count == 32 else { return nil }
        var signature = secp256k1_ecdsa_recoverable_signature()
        guard secp256k1_ecdsa_sign_recoverable(Secp256k1Context.shared.pointer, &signature, hash, secret, nil, nil) == 1
        else { return nil }
        var out = [UInt8](repeating: 0, count: 64)
        var recoveryId: Int32 = 0
        _ = secp256k1_ecdsa_recoverable_signature_serialize_compact(
            Secp256k1Context.shared.pointer, &out, &recoveryId, &signature)
        return out + [UInt8(recoveryId)]
    }

    /// The compressed public key that made `signature` (65 bytes) over `hash`, or nil.
    public static func recover(signature: [UInt8], hash: [UInt8]) -> [UInt8]? {
        guard signature.count == 65, hash.count == 32, signature[64] < 4 else { return nil }
        var parsed = secp256k1_ecdsa_recoverable_signature()
        var pubkey = secp256k1_pubkey()
        guard
            secp256k1_ecdsa_recoverable_signature_parse_compact(
                Secp256k1Context.shared.pointer, &parsed, Array(signature[0..<64]), Int32(signature[64])) == 1,
            secp256k1_ecdsa_recover(Secp256k1Context.shared.pointer, &pubkey, &parsed, hash) == 1
        else { return nil }
        var out = [UInt8](repeating: 0, count: 33)
        var length = 33
        _ = secp256k1_ec_pubkey_serialize(
            Secp256k1Context.shared.pointer, &out, &length, &pubkey, UInt32(SECP256K1_EC_COMPRESSED))
        return out
    }
}
