import COpenSSL
import WebAuthn

/// Key material — a data key, a key derived from the master key or from a PRF output — that cannot
/// be copied and wipes itself. It lives in memory it allocates itself (not an array, whose buffer
/// Swift may copy behind the scenes), is overwritten with `OPENSSL_cleanse` when it goes away, and
/// is read only inside `withUnsafeBytes`. Being `~Copyable`, it has one owner: passing it on moves it.
struct SecretBytes: ~Copyable, @unchecked Sendable {
    private let buffer: UnsafeMutableRawBufferPointer

    /// Takes `bytes` over: they are copied into the secret's own memory and the array is wiped.
    init(taking bytes: inout [UInt8]) {
        buffer = .allocate(byteCount: bytes.count, alignment: 1)
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
        wipe(&bytes)
    }

    /// `count` bytes from OpenSSL's random generator.
    static func random(_ count: Int) -> SecretBytes {
        var bytes = secureRandomBytes(count)
        return SecretBytes(taking: &bytes)
    }

    var count: Int { buffer.count }

    func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(buffer))
    }

    /// The bytes as an array for a call that takes one; the caller wipes it (`wipe`) when done.
    func exposedCopy() -> [UInt8] { [UInt8](buffer) }

    deinit {
        OPENSSL_cleanse(buffer.baseAddress, buffer.count)
        buffer.deallocate()
    }
}
