/// Why a Polkadot input was refused. `kind` maps to the server's error codes; `message` is safe to
/// show (it never carries a key, a phrase or a password).
public struct PolkadotError: Error, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case invalidMnemonic, invalidDerivationPath, invalidAddress, invalidPayload, unknownExtension
        case invalidBackup, wrongPassword, unsupported
        /// A request field of the wrong JSON type (never read as a default).
        case mistyped
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
