/// Authenticator data (WebAuthn Level 3 §6.1): rpIdHash, flags, signCount,
/// then optional attested credential data and extensions.
public struct AuthenticatorData: Sendable {
    /// Flag bits of byte 32 (§6.1, "flags").
    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// UP: the user was present.
        public static let userPresent = Flags(rawValue: 1 << 0)
        /// UV: the user was verified (PIN, biometrics).
        public static let userVerified = Flags(rawValue: 1 << 2)
        /// BE: the credential may be backed up (synced passkey).
        public static let backupEligible = Flags(rawValue: 1 << 3)
        /// BS: the credential is backed up now.
        public static let backupState = Flags(rawValue: 1 << 4)
        /// AT: attested credential data follows.
        public static let attestedCredentialData = Flags(rawValue: 1 << 6)
        /// ED: an extensions map follows.
        public static let extensionData = Flags(rawValue: 1 << 7)
    }

    /// §6.5.1: AAGUID, credential id, credential public key.
    public struct AttestedCredentialData: Sendable {
        public let aaguid: [UInt8]
        public let credentialID: [UInt8]
        /// The COSE_Key bytes as they appear in authenticator data.
        public let publicKeyCOSE: [UInt8]
        let publicKeyCBOR: CBOR
    }

    /// Credential ids longer than this are refused (§5.1.3: at most 1023 bytes).
    public static let maxCredentialIDLength = 1023

    public let rpIDHash: [UInt8]
    public let flags: Flags
    public let signCount: UInt32
    public let attestedCredentialData: AttestedCredentialData?
    public let extensions: CBOR?
    /// The exact bytes, which signatures cover.
    public let bytes: [UInt8]

    /// Parses authenticator data; rejects short input, bad lengths and leftover bytes.
    public init(bytes: [UInt8]) throws(WebAuthnError) {
        guard bytes.count >= 37 else {
            throw .malformed("authenticator data is \(bytes.count) bytes, expected at least 37")
        }
        self.bytes = bytes
        rpIDHash = Array(bytes[0..<32])
        let flags = Flags(rawValue: bytes[32])
        self.flags = flags
        signCount = UInt32(bytes[33]) << 24 | UInt32(bytes[34]) << 16 | UInt32(bytes[35]) << 8 | UInt32(bytes[36])
        var cursor = 37

        if flags.contains(.attestedCredentialData) {
            guard bytes.count >= cursor + 18 else { throw .malformed("attested credential data is truncated") }
            let aaguid = Array(bytes[cursor..<(cursor + 16)])
            let idLength = Int(bytes[cursor + 16]) << 8 | Int(bytes[cursor + 17])
            cursor += 18
            guard idLength >= 1, idLength <= Self.maxCredentialIDLength else {
                throw .malformed("credential id length \(idLength) is out of range 1...\(Self.maxCredentialIDLength)")
            }
            guard bytes.count >= cursor + idLength else { throw .malformed("credential id is truncated") }
            let credentialID = Array(bytes[cursor..<(cursor + idLength)])
            cursor += idLength
            let (key, used) = try CBORDecoder.decodePrefix(bytes[cursor...])
            let keyBytes = Array(bytes[cursor..<(cursor + used)])
            cursor += used
            attestedCredentialData = AttestedCredentialData(
                aaguid: aaguid, credentialID: credentialID, publicKeyCOSE: keyBytes, publicKeyCBOR: key)
        } else {
            attestedCredentialData = nil
        }

        if flags.contains(.extensionData) {
            let (ext, used) = try CBORDecoder.decodePrefix(bytes[cursor...])
            guard ext.mapPairs != nil else { throw .malformed("authenticator extensions are not a map") }
            cursor += used
            extensions = ext
        } else {
            extensions = nil
        }

        guard cursor == bytes.count else {
            throw .malformed("authenticator data has \(bytes.count - cursor) unexpected trailing bytes")
        }
    }
}
