import Foundation

/// An account. `id` is the WebAuthn user handle (random bytes, base64url here).
public struct UserRecord: Sendable, Equatable {
    public var id: String
    public var username: String
    public var isAnonymous: Bool
    public var createdAt: Date

    public init(id: String, username: String, isAnonymous: Bool, createdAt: Date) {
        self.id = id
        self.username = username
        self.isAnonymous = isAnonymous
        self.createdAt = createdAt
    }
}

/// A registered passkey.
public struct CredentialRecord: Sendable, Equatable {
    public var id: [UInt8]
    public var userID: String
    /// COSE_Key bytes as registered.
    public var publicKey: [UInt8]
    public var algorithm: Int
    public var signCount: UInt32
    public var transports: [String]
    public var aaguid: [UInt8]
    public var attestationFormat: String
    public var backupEligible: Bool
    public var backupState: Bool
    public var createdAt: Date
    public var lastUsedAt: Date?

    public init(id: [UInt8], userID: String, publicKey: [UInt8], algorithm: Int, signCount: UInt32,
                transports: [String], aaguid: [UInt8], attestationFormat: String, backupEligible: Bool,
                backupState: Bool, createdAt: Date, lastUsedAt: Date? = nil) {
        self.id = id
        self.userID = userID
        self.publicKey = publicKey
        self.algorithm = algorithm
        self.signCount = signCount
        self.transports = transports
        self.aaguid = aaguid
        self.attestationFormat = attestationFormat
        self.backupEligible = backupEligible
        self.backupState = backupState
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
    }
}

/// A ceremony that has begun: its challenge, single use, expiring.
public struct ChallengeRecord: Sendable, Equatable {
    public enum Ceremony: String, Sendable { case registration, authentication }

    public var challenge: [UInt8]
    public var ceremony: Ceremony
    /// What the client may echo back as `challengeKey`.
    public var key: String
    /// The user the ceremony is for (registration: the new or existing account).
    public var userID: String?
    public var username: String?
    public var isAnonymous: Bool
    /// Registration only: adding a passkey to an account that exists already.
    public var existingUser: Bool
    /// Registration only: the COSE algorithms that were offered.
    public var algorithms: [Int]
    public var expiresAt: Date

    public init(challenge: [UInt8], ceremony: Ceremony, key: String, userID: String? = nil, username: String? = nil,
                isAnonymous: Bool = false, existingUser: Bool = false, algorithms: [Int] = [], expiresAt: Date) {
        self.challenge = challenge
        self.ceremony = ceremony
        self.key = key
        self.userID = userID
        self.username = username
        self.isAnonymous = isAnonymous
        self.existingUser = existingUser
        self.algorithms = algorithms
        self.expiresAt = expiresAt
    }
}

/// A signed-in session. Only the SHA-256 of its token is ever stored.
public struct SessionRecord: Sendable, Equatable {
    public var tokenHash: [UInt8]
    public var userID: String
    public var createdAt: Date
    public var expiresAt: Date
    /// Until when the signer is unlocked (set by a passkey assertion with UV).
    public var unlockedUntil: Date?

    public init(tokenHash: [UInt8], userID: String, createdAt: Date, expiresAt: Date, unlockedUntil: Date?) {
        self.tokenHash = tokenHash
        self.userID = userID
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.unlockedUntil = unlockedUntil
    }
}

/// Failures a store reports in terms the server can map to error codes.
public enum StoreError: Error, Sendable, Equatable {
    case usernameTaken
    case credentialExists
    /// A compare-and-swap lost (e.g. two assertions with the same counter).
    case conflict
    case notFound
    /// The database itself failed; the message is for logs, not for clients.
    case database(String)
}
