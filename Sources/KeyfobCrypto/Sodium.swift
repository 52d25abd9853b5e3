import CSodium

/// libsodium, initialised once before any call (sodium_init is idempotent and thread-safe).
public enum Sodium {
    public static let ready: Bool = sodium_init() >= 0

    /// BLAKE2b with the given output length (32: Substrate's `blake2_256`; 64: SS58's checksum hash).
    public static func blake2b(_ input: [UInt8], length: Int) -> [UInt8] {
        precondition(ready && (16...64).contains(length))
        var out = [UInt8](repeating: 0, count: length)
        _ = crypto_generichash(&out, length, input, UInt64(input.count), nil, 0)
        return out
    }
}

/// BLAKE2b-256, Substrate's `blake2_256`: the payload hash above 256 bytes, junction ids, ecdsa account ids.
public func blake2b256(_ input: [UInt8]) -> [UInt8] { Sodium.blake2b(input, length: 32) }

/// The Ristretto255 group through libsodium: 32-byte scalars (little-endian, reduced mod ℓ) and
/// 32-byte compressed points. Every operation that can fail (an invalid point, the identity) returns nil.
public enum Ristretto255 {
    public static func reduce(wide bytes: [UInt8]) -> [UInt8] {
        precondition(Sodium.ready && bytes.count == 64)
        var out = [UInt8](repeating: 0, count: 32)
        crypto_core_ristretto255_scalar_reduce(&out, bytes)
        return out
    }

    /// A 32-byte value reduced mod ℓ.
    public static func reduce(_ bytes: [UInt8]) -> [UInt8] { reduce(wide: bytes + [UInt8](repeating: 0, count: 32)) }

    public static func isCanonicalScalar(_ bytes: [UInt8]) -> Bool { bytes.count == 32 && reduce(bytes) == bytes }

    public static func add(scalar a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        crypto_core_ristretto255_scalar_add(&out, a, b)
        return out
    }

    public static func multiply(scalar a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        crypto_core_ristretto255_scalar_mul(&out, a, b)
        return out
    }

    /// scalar · B; nil for the identity (scalar 0).
    public static func baseMultiply(_ scalar: [UInt8]) -> [UInt8]? {
        precondition(Sodium.ready && scalar.count == 32)
        var out = [UInt8](repeating: 0, count: 32)
        return crypto_scalarmult_ristretto255_base(&out, scalar) == 0 ? out : nil
    }

    /// scalar · P; nil when P is not a valid encoding or the result is the identity.
    public static func multiply(_ scalar: [UInt8], point: [UInt8]) -> [UInt8]? {
        precondition(Sodium.ready && scalar.count == 32)
        guard point.count == 32 else { return nil }
        var out = [UInt8](repeating: 0, count: 32)
        return crypto_scalarmult_ristretto255(&out, scalar, point) == 0 ? out : nil
    }

    public static func isValidPoint(_ point: [UInt8]) -> Bool {
        precondition(Sodium.ready)
        return point.count == 32 && crypto_core_ristretto255_is_valid_point(point) == 1
    }

    public static func add(point p: [UInt8], _ q: [UInt8]) -> [UInt8]? {
        guard isValidPoint(p), isValidPoint(q) else { return nil }
        var out = [UInt8](repeating: 0, count: 32)
        return crypto_core_ristretto255_add(&out, p, q) == 0 ? out : nil
    }

    public static func subtract(point p: [UInt8], _ q: [UInt8]) -> [UInt8]? {
        guard isValidPoint(p), isValidPoint(q) else { return nil }
        var out = [UInt8](repeating: 0, count: 32)
        return crypto_core_ristretto255_sub(&out, p, q) == 0 ? out : nil
    }
}

/// XSalsa20-Poly1305 (libsodium's `crypto_secretbox`): what polkadot-js account files are sealed with.
public enum SecretBox {
    /// The authentication tag's length, which a sealed box adds to its message.
    public static let tagLength = Int(crypto_secretbox_MACBYTES)

    /// `message` sealed under a 32-byte key and a 24-byte nonce.
    public static func seal(_ message: [UInt8], key: [UInt8], nonce: [UInt8]) -> [UInt8] {
        precondition(Sodium.ready && key.count == 32 && nonce.count == 24)
        var sealed = [UInt8](repeating: 0, count: message.count + tagLength)
        precondition(crypto_secretbox_easy(&sealed, message, UInt64(message.count), nonce, key) == 0)
        return sealed
    }

    /// The message, or nil when the box does not open under this key and nonce.
    public static func open(_ sealed: [UInt8], key: [UInt8], nonce: [UInt8]) -> [UInt8]? {
        precondition(Sodium.ready && key.count == 32 && nonce.count == 24)
        guard sealed.count >= tagLength else { return nil }
        var message = [UInt8](repeating: 0, count: sealed.count - tagLength)
        guard crypto_secretbox_open_easy(&message, sealed, UInt64(sealed.count), nonce, key) == 0 else {
            wipe(&message)
            return nil
        }
        return message
    }
}
