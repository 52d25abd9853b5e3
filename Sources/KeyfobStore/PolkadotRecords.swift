import Foundation

/// A Substrate account a user keeps in Keyfob: its public half in the clear, its secret sealed
/// (the server's custody decides how; the store only keeps the bytes).
public struct SubstrateAccountRecord: Sendable, Equatable {
    public var id: String
    public var userID: String
    /// `sr25519`, `ed25519` or `ecdsa`.
    public var keyType: String
    public var publicKey: [UInt8]
    public var name: String
    /// The SS58 prefix addresses are shown with (0 Polkadot, 2 Kusama, 42 generic).
    public var network: Int
    public var nonce: [UInt8]
    public var sealed: [UInt8]
    public var createdAt: Date
    /// Its owner lets it sign transactions Keyfob cannot check against the chain's metadata
    /// (blind signing): off unless they turned it on with a passkey.
    public var acceptsUnverified: Bool
    /// How `sealed` is protected (`SubstrateProtection` in the server): 0 under a key derived
    /// from the nostr key (before #55), 1 under the master key's own purpose key, 2 under the
    /// data key of a passkey-sealed account and then that purpose key.
    public var protection: Int

    public init(
        id: String, userID: String, keyType: String, publicKey: [UInt8], name: String, network: Int, nonce: [UInt8],
        sealed: [UInt8], createdAt: Date, acceptsUnverified: Bool = false, protection: Int = 0
    ) {
        self.id = id
        self.userID = userID
        self.keyType = keyType
        self.publicKey = publicKey
        self.name = name
        self.network = network
        self.nonce = nonce
        self.sealed = sealed
        self.createdAt = createdAt
        self.acceptsUnverified = acceptsUnverified
        self.protection = protection
    }
}

/// A dapp's request to sign (`pub(extrinsic.sign)`, `pub(bytes.sign)`), waiting for the user's
/// passkey, then its outcome for the app that polls. Nothing in it is secret: the payload is what
/// the dapp will publish, the result a signature.
public struct PolkadotRequestRecord: Sendable, Equatable {
    public var id: String
    public var userID: String
    /// The dapp's origin (verified by the browser for web dapps; as the app reports it for the bridge).
    public var origin: String
    /// `bridge` (a native app's POST) or `web` (/polkadot.js through Keyfob's popup).
    public var transport: String
    public var messageType: String
    /// The request object as the dapp sent it (JSON).
    public var request: String
    /// `pending`, then `approved` or `rejected` (once).
    public var state: String
    /// `{"type":…,"result":…}` or `{"type":…,"error":…}` once decided.
    public var result: String?
    public var confirmationNonce: [UInt8]?
    public var createdAt: Date
    public var expiresAt: Date

    public init(
        id: String, userID: String, origin: String, transport: String, messageType: String, request: String,
        state: String = "pending", result: String? = nil, confirmationNonce: [UInt8]? = nil, createdAt: Date, expiresAt: Date
    ) {
        self.id = id
        self.userID = userID
        self.origin = origin
        self.transport = transport
        self.messageType = messageType
        self.request = request
        self.state = state
        self.result = result
        self.confirmationNonce = confirmationNonce
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// Chain metadata a dapp offered (`pub(metadata.provide)`), kept per user and dapp origin: it
/// describes that origin's requests only, never another site's.
public struct PolkadotMetadataRecord: Sendable, Equatable {
    /// A user keeps the most recent this many.
    public static let maxPerUser = 16
    /// A user's rows and the runtimes they name (each counted once) stay under this many bytes
    /// (the newest row is always kept): half a dozen chains' metadata, not a database's worth.
    public static let maxRuntimeBytesPerUser = 8 * 1024 * 1024
    public var userID: String
    public var origin: String
    public var genesisHash: String
    public var specVersion: Int
    /// The `MetadataDef` as the dapp sent it (JSON).
    public var definition: String
    public var updatedAt: Date
    /// The SHA-256 of the runtime's V15 metadata the dapp provided with it (`rawMetadata`). The
    /// bytes are stored once under this hash, shared by every row of every account that names them.
    public var runtimeHash: [UInt8]?

    public init(
        userID: String, origin: String, genesisHash: String, specVersion: Int, definition: String, updatedAt: Date,
        runtimeHash: [UInt8]? = nil
    ) {
        self.userID = userID
        self.origin = origin
        self.genesisHash = genesisHash
        self.specVersion = specVersion
        self.definition = definition
        self.updatedAt = updatedAt
        self.runtimeHash = runtimeHash
    }

    /// One of a user's rows as the caps see it: its own size (the definition, `metaCalls`
    /// included), which runtime it names and that runtime's size.
    public struct Held: Sendable, Equatable {
        public var origin: String
        public var genesisHash: String
        public var ownSize: Int
        public var runtimeHash: [UInt8]?
        public var runtimeSize: Int

        public init(origin: String, genesisHash: String, ownSize: Int, runtimeHash: [UInt8]?, runtimeSize: Int) {
            self.origin = origin
            self.genesisHash = genesisHash
            self.ownSize = ownSize
            self.runtimeHash = runtimeHash
            self.runtimeSize = runtimeSize
        }
    }

    /// The rows that go, of a user's rows newest first (`kept` first of all: the one just put):
    /// past `maxPerUser`, and any whose bytes — its own, and its runtime's unless a newer row named
    /// it — would take the user past `maxRuntimeBytesPerUser`. The first row stays.
    public static func overflow(newestFirst rows: [Held], keeping kept: (origin: String, genesisHash: String)) -> [Held] {
        var ordered = rows
        if let at = ordered.firstIndex(where: { $0.origin == kept.origin && $0.genesisHash == kept.genesisHash }) {
            ordered.insert(ordered.remove(at: at), at: 0)
        }
        var counted = Set<[UInt8]>()
        var bytes = 0
        var gone: [Held] = []
        for (index, row) in ordered.enumerated() {
            let runtime = row.runtimeHash.map { counted.contains($0) ? 0 : row.runtimeSize } ?? 0
            if index > 0 && (index >= maxPerUser || bytes + row.ownSize + runtime > maxRuntimeBytesPerUser) {
                gone.append(row)
            } else {
                if let hash = row.runtimeHash { counted.insert(hash) }
                bytes += row.ownSize + runtime
            }
        }
        return gone
    }
}

/// Substrate accounts, Polkadot signing requests and dapp metadata.
public protocol PolkadotStore: ConfirmationNonceStore {
    func substrateAccounts(ofUser userID: String) async throws -> [SubstrateAccountRecord]
    /// Stores `account`; `limitReached` when the user has `maxPerUser` already, `conflict` when
    /// the user's nostr key is no longer at `ownerKeyVersion` (sealed or unsealed meanwhile: the
    /// secret was sealed for how it was kept before).
    func insertSubstrateAccount(_ account: SubstrateAccountRecord, maxPerUser: Int, ownerKeyVersion: Int) async throws
    func deleteSubstrateAccount(id: String, ofUser userID: String) async throws -> Bool
    /// Sets whether the account signs transactions Keyfob cannot check; false when the user has no such account.
    func setSubstrateAccountAcceptsUnverified(id: String, ofUser userID: String, _ accepts: Bool) async throws -> Bool
    /// Every user's accounts at `protection` (the start-up migration's list).
    func substrateAccounts(atProtection protection: Int) async throws -> [SubstrateAccountRecord]
    /// Writes `record`'s nonce, sealed bytes and protection when the stored sealed bytes are still
    /// `expectedSealed` and the user's nostr key still at `ownerKeyVersion` (one writer wins a race,
    /// and nothing sealed for a protection the key has left lands); false otherwise.
    func replaceSubstrateSecret(_ record: SubstrateAccountRecord, expectedSealed: [UInt8], ownerKeyVersion: Int) async throws -> Bool
    /// Stores a request; `limitReached` when the user has `maxPending` live ones; `notFound`
    /// (nothing stored) when `session`, the one it came through, is gone, checked as it is stored
    /// (as `insertPendingRequest`'s source). Decided requests of this user older than a day go at
    /// the same time.
    func insertPolkadotRequest(_ request: PolkadotRequestRecord, now: Date, maxPending: Int, session: [UInt8]?) async throws
    func polkadotRequest(id: String, ofUser userID: String) async throws -> PolkadotRequestRecord?
    /// pending → `state` with its result, once; false when it was decided already or has expired.
    /// `audit`, when given, is appended in the same transaction: a result (a signature the dapp
    /// collects) is never stored without its entry, nor the entry without it.
    func finishPolkadotRequest(id: String, userID: String, state: String, result: String, now: Date, audit: AuditRecord?) async throws
        -> Bool
    /// Keeps `metadata` (replacing the row of its user, origin and chain) and the runtime it names:
    /// `runtime` is stored under `metadata.runtimeHash` unless those bytes are stored already. The
    /// user's rows past the caps go (`overflow`), and so do runtimes no row names any more. With
    /// `session` (the token hash of the session the site came through), only while that session of
    /// the user exists (`StoreError.notFound` when it is gone): a sign-out everywhere deletes the
    /// user's metadata after their sessions, so metadata a site gave while it ran goes too.
    func putPolkadotMetadata(_ metadata: PolkadotMetadataRecord, runtime: [UInt8]?, session: [UInt8]?) async throws
    /// The user's rows for `origin`, without a row whose runtime is gone (a concurrent sweep on
    /// PostgreSQL): the dapp then sees it unknown in `metadata.list` and provides it again.
    func polkadotMetadata(ofUser userID: String, origin: String) async throws -> [PolkadotMetadataRecord]
    /// A stored runtime's bytes by their SHA-256.
    func polkadotRuntime(hash: [UInt8]) async throws -> [UInt8]?
    /// How many runtimes are stored, and their bytes together (each counted once however many rows name it).
    func polkadotRuntimeUsage() async throws -> (runtimes: Int, bytes: Int)
}

extension PolkadotStore {
    public func finishPolkadotRequest(id: String, userID: String, state: String, result: String, now: Date) async throws -> Bool {
        try await finishPolkadotRequest(id: id, userID: userID, state: state, result: result, now: now, audit: nil)
    }
}

extension Columns {
    public static let substrateAccount =
        "id, user_id, key_type, public_key, name, network, nonce, sealed, created_at, accepts_unverified, protection"
    public static let polkadotRequest = """
        id, user_id, origin, transport, msg_type, request, state, result, confirmation_nonce, created_at, expires_at
        """
    public static let polkadotMetadata = "user_id, origin, genesis_hash, spec_version, definition, updated_at, runtime_hash"
}

extension SubstrateAccountRecord {
    public init(row r: some StoreRow) throws {
        self.init(
            id: try r.text(0), userID: try r.text(1), keyType: try r.text(2), publicKey: try r.bytes(3), name: try r.text(4),
            network: try r.int(5), nonce: try r.bytes(6), sealed: try r.bytes(7), createdAt: try r.date(8),
            acceptsUnverified: try r.bool(9), protection: try r.int(10))
    }
}

extension PolkadotRequestRecord {
    public init(row r: some StoreRow) throws {
        self.init(
            id: try r.text(0), userID: try r.text(1), origin: try r.text(2), transport: try r.text(3), messageType: try r.text(4),
            request: try r.text(5), state: try r.text(6), result: try r.optionalText(7), confirmationNonce: try r.optionalBytes(8),
            createdAt: try r.date(9), expiresAt: try r.date(10))
    }
}

extension PolkadotMetadataRecord {
    public init(row r: some StoreRow) throws {
        self.init(
            userID: try r.text(0), origin: try r.text(1), genesisHash: try r.text(2), specVersion: try r.int(3),
            definition: try r.text(4), updatedAt: try r.date(5), runtimeHash: try r.optionalBytes(6))
    }
}
