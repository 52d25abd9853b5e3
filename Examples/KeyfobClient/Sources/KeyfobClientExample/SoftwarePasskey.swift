import Crypto
import Foundation

/// A passkey in memory (P-256, "none" attestation), standing in for the platform authenticator
/// an iOS app would call: it answers the options the generated client fetched with the bodies
/// WebAuthn defines. Only for trying the API; a real app uses ASAuthorization.
struct SoftwarePasskey {
    let key = P256.Signing.PrivateKey()
    let credentialID: [UInt8] = (0..<16).map { _ in UInt8.random(in: 0...255) }
    var counter: UInt32 = 0

    /// `navigator.credentials.create`'s answer: clientDataJSON and a "none" attestation object.
    mutating func register(challenge: String, rpID: String, origin: String) -> (clientData: [UInt8], attestation: [UInt8]) {
        let clientData = Self.clientData("webauthn.create", challenge: challenge, origin: origin)
        let point = Array(key.publicKey.x963Representation)  // 0x04 || x || y
        let cose = CBOR.map([
            (.int(1), .int(2)), (.int(3), .int(-7)), (.int(-1), .int(1)),
            (.int(-2), .bytes(Array(point[1..<33]))), (.int(-3), .bytes(Array(point[33..<65]))),
        ])
        counter += 1
        var authData = Self.rpIDHash(rpID) + [0x45] + Self.bigEndian(counter) + [UInt8](repeating: 0, count: 16)
        authData += [UInt8(credentialID.count >> 8), UInt8(credentialID.count & 0xff)] + credentialID + cose.encoded
        let attestation = CBOR.map([(.text("fmt"), .text("none")), (.text("attStmt"), .map([])), (.text("authData"), .bytes(authData))])
        return (clientData, attestation.encoded)
    }

    /// `navigator.credentials.get`'s answer: authenticatorData and an ECDSA signature over it and
    /// the client data's hash.
    mutating func assert(challenge: String, rpID: String, origin: String) throws -> (clientData: [UInt8], authData: [UInt8], signature: [UInt8]) {
        let clientData = Self.clientData("webauthn.get", challenge: challenge, origin: origin)
        counter += 1
        let authData = Self.rpIDHash(rpID) + [0x05] + Self.bigEndian(counter)
        let signed = authData + Array(SHA256.hash(data: clientData))
        return (clientData, authData, Array(try key.signature(for: signed).derRepresentation))
    }

    static func clientData(_ type: String, challenge: String, origin: String) -> [UInt8] {
        Array(#"{"type":"\#(type)","challenge":"\#(challenge)","origin":"\#(origin)","crossOrigin":false}"#.utf8)
    }
    static func rpIDHash(_ rpID: String) -> [UInt8] { Array(SHA256.hash(data: Array(rpID.utf8))) }
    static func bigEndian(_ n: UInt32) -> [UInt8] { [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] }
}

/// The few CBOR shapes an attestation object needs (RFC 8949, canonical lengths).
indirect enum CBOR {
    case int(Int), bytes([UInt8]), text(String), map([(CBOR, CBOR)])

    var encoded: [UInt8] {
        switch self {
        case .int(let n): n >= 0 ? Self.head(0, UInt64(n)) : Self.head(1, UInt64(-1 - n))
        case .bytes(let b): Self.head(2, UInt64(b.count)) + b
        case .text(let t): Self.head(3, UInt64(t.utf8.count)) + Array(t.utf8)
        case .map(let pairs): Self.head(5, UInt64(pairs.count)) + pairs.flatMap { $0.0.encoded + $0.1.encoded }
        }
    }

    static func head(_ major: UInt8, _ n: UInt64) -> [UInt8] {
        let m = major << 5
        switch n {
        case ..<24: return [m | UInt8(n)]
        case ..<0x100: return [m | 24, UInt8(n)]
        case ..<0x10000: return [m | 25, UInt8(n >> 8), UInt8(n & 0xff)]
        default: return [m | 26] + (0..<4).reversed().map { UInt8(n >> (8 * UInt64($0)) & 0xff) }
        }
    }
}

enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
