/// Key material — a data key, a key derived from the master key or from a PRF output — that cannot
/// be copied and wipes itself. It lives in memory it allocates itself (not an array, whose buffer
/// Swift may copy behind the scenes), is overwritten with `OPENSSL_cleanse` when it goes away, and
/// is read only inside `withUnsafeBytes`. Being `~Copyable`, it has one owner: passing it on moves it.
public struct SecretBytes: ~Copyable, @unchecked Sendable {
    private let buffer: UnsafeMutableRawBufferPointer

    /// Takes `bytes` over: they are copied into the secret's own memory and the array is wiped.
    public init(taking bytes: inout [UInt8]) {
        buffer = .allocate(byteCount: bytes.count, alignment: 1)
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
        wipe(&bytes)
    }

    /// `count` bytes from OpenSSL's random generator.
    public static func random(_ count: Int) -> SecretBytes {
        var bytes = randomBytes(count)
        return SecretBytes(taking: &bytes)
    }

    public var count: Int { buffer.count }

    public func withUnsafeBytes<R: ~Copyable, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(buffer))
    }

    /// The bytes as an array for a call that takes one; the caller wipes it (`wipe`) when done.
    public func exposedCopy() -> [UInt8] { [UInt8](buffer) }

    deinit {
        wipe(buffer)
        buffer.deallocate()
    }
}

/// A secret several holders read (a ceremony's PRF output, checked by one step and used by the
/// next): one `SecretBytes` behind a reference, so handing it on copies no bytes, and wiped when
/// the last holder lets go.
public final class SharedSecret: @unchecked Sendable {
    public let bytes: SecretBytes

    /// Takes `bytes` over (the array is wiped).
    public init(taking bytes: inout [UInt8]) { self.bytes = SecretBytes(taking: &bytes) }

    /// A secret from an array the caller no longer needs (it is wiped here, when this is its only copy).
    public convenience init?(_ bytes: [UInt8]?) {
        guard var bytes else { return nil }
        self.init(taking: &bytes)
    }

    public func withUnsafeBytes<R: ~Copyable, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try bytes.withUnsafeBytes(body)
    }
}
