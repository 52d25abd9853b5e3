import COpenSSL
import Foundation

/// Digests fetched from OpenSSL's default provider once. Given `EVP_sha256()` (a legacy handle),
/// OpenSSL 3 looks the implementation up in its provider store on every call, under its locks;
/// fetched once, a token's SHA-256 costs 0.25 µs instead of 0.62 (BENCHMARKS.md, #46).
public enum FetchedDigest {
    nonisolated(unsafe) public static let sha1 = fetch("SHA1")
    nonisolated(unsafe) public static let sha256 = fetch("SHA256")
    nonisolated(unsafe) public static let sha384 = fetch("SHA384")
    nonisolated(unsafe) public static let sha512 = fetch("SHA512")

    private static func fetch(_ name: String) -> OpaquePointer {
        // Kept for the life of the process. Without the default provider nothing here can work.
        guard let md = EVP_MD_fetch(nil, name, nil) else { fatalError("OpenSSL has no \(name)") }
        return md
    }
}

/// SHA-256 of bytes.
@inline(__always)
public func sha256<Bytes: ContiguousBytes>(_ bytes: Bytes) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 32)
    bytes.withUnsafeBytes { raw in
        out.withUnsafeMutableBufferPointer { o in
            _ = EVP_Digest(raw.baseAddress, raw.count, o.baseAddress, nil, FetchedDigest.sha256, nil)
        }
    }
    return out
}

/// SHA-512 of bytes (sr25519's mini-secret expansion).
public func sha512(_ bytes: [UInt8]) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: 64)
    _ = EVP_Digest(bytes, bytes.count, &out, nil, FetchedDigest.sha512, nil)
    return out
}

/// PBKDF2-HMAC-SHA512 (BIP-39 seeds; Substrate's mini-secret from a mnemonic's entropy).
public func pbkdf2SHA512(password: [UInt8], salt: [UInt8], iterations: Int, length: Int) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: length)
    let ok = password.withUnsafeBufferPointer { pw in
        PKCS5_PBKDF2_HMAC(
            pw.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }, Int32(pw.count),
            salt, Int32(salt.count), Int32(iterations), FetchedDigest.sha512, Int32(length), &out)
    }
    precondition(ok == 1, "PBKDF2-HMAC-SHA512 failed")
    return out
}

/// HMAC-SHA256 over the concatenation of `parts`.
public func hmacSHA256(key: [UInt8], _ parts: [UInt8]...) -> [UInt8] {
    var message = parts.count == 1 ? parts[0] : parts.flatMap { $0 }
    // The joined copy may hold key material: wiped.
    defer { if parts.count != 1 { wipe(&message) } }
    var out = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 32
    // HMAC fails only when OpenSSL cannot allocate; a zero "MAC" must never stand in for one.
    precondition(
        HMAC(FetchedDigest.sha256, key, Int32(key.count), message, message.count, &out, &length) != nil && length == 32,
        "HMAC-SHA256 failed")
    return out
}

/// An HMAC-SHA256 key used for many messages (a server's cookie MAC): keyed once, each MAC then
/// copies the keyed state (0.8 µs against 2 µs for a one-shot `HMAC`, which fetches HMAC and
/// SHA-256 from the provider store and hashes the key's pads each time).
public final class HMACSHA256Key: @unchecked Sendable {
    // Only read after init (EVP_MAC_CTX_dup copies it), so one key serves every thread.
    private let keyed: OpaquePointer

    /// Nil only when OpenSSL cannot allocate.
    public init?(key: [UInt8]) {
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil) else { return nil }
        defer { EVP_MAC_free(mac) }
        guard let context = EVP_MAC_CTX_new(mac) else { return nil }
        let ok = "SHA256".withCString { name in
            var params = [
                OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, UnsafeMutablePointer(mutating: name), 0),
                OSSL_PARAM_construct_end(),
            ]
            return key.withUnsafeBufferPointer { EVP_MAC_init(context, $0.baseAddress, $0.count, &params) }
        }
        guard ok == 1 else { EVP_MAC_CTX_free(context); return nil }
        keyed = context
    }

    deinit { EVP_MAC_CTX_free(keyed) }

    /// The 32-byte MAC of the concatenation of `parts`.
    public func mac(_ parts: [UInt8]...) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length = 0
        let context = EVP_MAC_CTX_dup(keyed)
        defer { EVP_MAC_CTX_free(context) }
        var ok = context != nil
        for part in parts where ok { ok = EVP_MAC_update(context, part, part.count) == 1 }
        ok = ok && EVP_MAC_final(context, &out, &length, 32) == 1 && length == 32
        // As for `hmacSHA256`: a zero "MAC" must never stand in for one.
        precondition(ok, "HMAC-SHA256 failed")
        return out
    }
}

/// HKDF-SHA256 (RFC 5869) through OpenSSL's KDF: the whole of it, or its two steps apart (NIP-44
/// keeps the extracted key as its conversation key). Nil only when OpenSSL fails.
public enum HKDF {
    public static func derive(key: [UInt8], salt: [UInt8], info: [UInt8], length: Int = 32) -> [UInt8]? {
        key.withUnsafeBytes { run(mode: nil, key: $0, salt: salt, info: info, length: length) }
    }

    public static func derive(key: UnsafeRawBufferPointer, salt: [UInt8], info: [UInt8], length: Int = 32) -> [UInt8]? {
        run(mode: nil, key: key, salt: salt, info: info, length: length)
    }

    /// A derived key that never exists as an array past this call.
    public static func deriveSecret(key: UnsafeRawBufferPointer, salt: [UInt8], info: [UInt8]) -> SecretBytes? {
        guard var out = run(mode: nil, key: key, salt: salt, info: info, length: 32) else { return nil }
        return SecretBytes(taking: &out)
    }

    public static func deriveSecret(key: [UInt8], salt: [UInt8], info: [UInt8]) -> SecretBytes? {
        guard var out = derive(key: key, salt: salt, info: info) else { return nil }
        return SecretBytes(taking: &out)
    }

    /// HKDF-Extract: the pseudorandom key of `ikm` under `salt`.
    public static func extract(salt: [UInt8], ikm: [UInt8]) -> [UInt8] {
        let out = ikm.withUnsafeBytes { run(mode: EVP_PKEY_HKDEF_MODE_EXTRACT_ONLY, key: $0, salt: salt, info: [], length: 32) }
        guard let out else { preconditionFailure("HKDF-Extract failed") }
        return out
    }

    /// HKDF-Expand: `length` bytes of `prk` for `info`.
    public static func expand(prk: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        let out = prk.withUnsafeBytes { run(mode: EVP_PKEY_HKDEF_MODE_EXPAND_ONLY, key: $0, salt: [], info: info, length: length) }
        guard let out else { preconditionFailure("HKDF-Expand failed") }
        return out
    }

    private static func run(mode: Int32?, key: UnsafeRawBufferPointer, salt: [UInt8], info: [UInt8], length: Int) -> [UInt8]? {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "HKDF", nil) else { return nil }
        defer { EVP_PKEY_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: length)
        var outLength = length
        guard EVP_PKEY_derive_init(ctx) == 1,
            mode.map({ EVP_PKEY_CTX_set_hkdf_mode(ctx, $0) == 1 }) ?? true,
            EVP_PKEY_CTX_set_hkdf_md(ctx, FetchedDigest.sha256) == 1,
            salt.isEmpty || EVP_PKEY_CTX_set1_hkdf_salt(ctx, salt, Int32(salt.count)) == 1,
            EVP_PKEY_CTX_set1_hkdf_key(ctx, key.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(key.count)) == 1,
            info.isEmpty || EVP_PKEY_CTX_add1_hkdf_info(ctx, info, Int32(info.count)) == 1,
            EVP_PKEY_derive(ctx, &out, &outLength) == 1, outLength == length
        else {
            ERR_clear_error()
            return nil
        }
        return out
    }
}

/// scrypt through OpenSSL: r = 8, p = 1 unless given (NIP-49 and polkadot-js backups use those). Nil for
/// log N above 20, r above 16, p above 4 (a file must not make the server do gigabyte work) or when OpenSSL fails.
public func scrypt(password: [UInt8], salt: [UInt8], logN: UInt8, r: UInt64 = 8, p: UInt64 = 1, length: Int) -> [UInt8]? {
    guard logN <= 20, (1...16).contains(r), (1...4).contains(p) else { return nil }
    var out = [UInt8](repeating: 0, count: length)
    let n = UInt64(1) << UInt64(logN)
    let maxMemory: UInt64 = 128 * n * r + 1024 * 1024 * 64
    let ok = password.withUnsafeBufferPointer { pw in
        EVP_PBE_scrypt(
            pw.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) },
            pw.count, salt, salt.count, n, r, p, maxMemory, &out, length)
    }
    guard ok == 1 else { ERR_clear_error(); return nil }
    return out
}
