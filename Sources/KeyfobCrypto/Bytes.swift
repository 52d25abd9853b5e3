import COpenSSL

// Randomness and wiping, for every module: one implementation each.

/// Overwrites secret bytes in a way the optimizer keeps (`OPENSSL_cleanse`).
public func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { wipe($0) }
}

/// Overwrites the memory `bytes` points to.
public func wipe(_ bytes: UnsafeMutableRawBufferPointer) {
    OPENSSL_cleanse(bytes.baseAddress, bytes.count)
}

/// `count` bytes from the kernel's CSPRNG (`getrandom(2)`).
public func randomBytes(_ count: Int) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: count)
    // getrandom(2) needs no descriptor: running out of descriptors must not crash the server
    // here (a trap is what a SIGILL under EMFILE was).
    let ok = out.withUnsafeMutableBufferPointer { kf_random_bytes($0.baseAddress, count) }
    precondition(ok == 1, "no random bytes from getrandom(2) or OpenSSL")
    return out
}

/// Whether two byte strings are equal, in time that depends only on their length.
public func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    a.count == b.count && CRYPTO_memcmp(a, b, a.count) == 0
}
