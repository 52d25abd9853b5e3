import KeyfobCrypto

/// sr25519 as Substrate uses it: schnorrkel's Schnorr signatures on Ristretto255 with Merlin
/// transcripts (signing context "substrate"), Ed25519-mode key expansion and HDKD derivation
/// (w3f/schnorrkel: keys.rs, sign.rs, derive.rs). Group arithmetic is libsodium's.
public enum Sr25519 {
    public static let signingContext = Array("substrate".utf8)

    /// A secret key in schnorrkel's form: the scalar (reduced mod ℓ) and the nonce seed. Internal:
    /// nothing outside this module reads it (`SubstrateKey` keeps the stored form, wiped), and two
    /// are compared in constant time.
    /// A class so the bytes are wiped when the last keypair holding them goes (a derivation's or a
    /// signature's temporary keypair too); never mutated after `init`.
    final class SecretKey: @unchecked Sendable, Equatable {
        private(set) var key: [UInt8]
        private(set) var nonce: [UInt8]

        init(key: [UInt8], nonce: [UInt8]) {
            self.key = key
            self.nonce = nonce
        }

        deinit {
            wipe(&key)
            wipe(&nonce)
        }

        static func == (a: SecretKey, b: SecretKey) -> Bool {
            let sameKey = constantTimeEqual(a.key, b.key)
            let sameNonce = constantTimeEqual(a.nonce, b.nonce)
            return sameKey && sameNonce
        }
    }

    public struct Keypair: Sendable, Equatable {
        let secret: SecretKey
        public let publicKey: [UInt8]

        init(secret: SecretKey) {
            self.secret = secret
            // A key from expansion or derivation is never zero (probability 2^-252).
            publicKey = Ristretto255.baseMultiply(secret.key) ?? [UInt8](repeating: 0, count: 32)
        }

        /// From a 32-byte mini secret (substrate-bip39's output, or a raw seed), expanded Ed25519-style
        /// as Substrate does: SHA-512, clamp, divide by the cofactor; the upper half is the nonce seed.
        public init(miniSecret: [UInt8]) {
            precondition(miniSecret.count == 32)
            var h = sha512(miniSecret)
            defer { wipe(&h) }
            var key = Array(h[0..<32])
            key[0] &= 248
            key[31] &= 63
            key[31] |= 64
            Self.divideByCofactor(&key)
            self.init(secret: SecretKey(key: key, nonce: Array(h[32..<64])))
        }

        /// From the 64 bytes polkadot-js keeps (and writes into JSON backups): the scalar times the
        /// cofactor, then the nonce. Nil when the length is wrong.
        public init?(ed25519Bytes bytes: [UInt8]) {
            guard bytes.count == 64 else { return nil }
            var key = Array(bytes[0..<32])
            defer { wipe(&key) }
            Self.divideByCofactor(&key)
            self.init(secret: SecretKey(key: Ristretto255.reduce(key), nonce: Array(bytes[32..<64])))
        }

        /// The 64-byte form polkadot-js keeps: scalar × 8, then the nonce.
        public var ed25519Bytes: [UInt8] {
            var key = secret.key
            defer { wipe(&key) }
            Self.multiplyByCofactor(&key)
            return key + secret.nonce
        }

        /// A 64-byte schnorrkel signature over `message`, marked as schnorrkel (top bit of s).
        public func sign(_ message: [UInt8], context: [UInt8] = Sr25519.signingContext) -> [UInt8] {
            var t = Sr25519.signingTranscript(message, context: context)
            t.append(label: "proto-name", Array("Schnorr-sig".utf8))
            t.append(label: "sign:pk", publicKey)
            var witness = t.witnessBytes(label: "signing", count: 64, witnesses: [secret.nonce])
            var r = Ristretto255.reduce(wide: witness)
            defer {
                wipe(&witness)
                wipe(&r)
            }
            let bigR = Ristretto255.baseMultiply(r) ?? [UInt8](repeating: 0, count: 32)
            t.append(label: "sign:R", bigR)
            let k = Ristretto255.reduce(wide: t.challengeBytes(label: "sign:c", count: 64))
            // k·key with the public k gives the key away: wiped like the witness.
            var kKey = Ristretto255.multiply(scalar: k, secret.key)
            defer { wipe(&kKey) }
            var s = Ristretto255.add(scalar: kKey, r)
            s[31] |= 0x80
            return bigR + s
        }

        /// Hard derivation (`//junction`): a new mini secret from the secret key and the chain code.
        public func hardDerived(chainCode: [UInt8]) -> Keypair {
            var t = MerlinTranscript(label: "SchnorrRistrettoHDKD")
            t.append(label: "sign-bytes", [])
            t.append(label: "chain-code", chainCode)
            t.append(label: "secret-key", secret.key)
            var mini = t.challengeBytes(label: "HDKD-hard", count: 32)
            defer {
                wipe(&mini)
                t.wipe()  // it absorbed the secret key
            }
            return Keypair(miniSecret: mini)
        }

        /// Soft derivation (`/junction`): the public key can follow it without the secret.
        public func softDerived(chainCode: [UInt8]) -> Keypair {
            var t = MerlinTranscript(label: "SchnorrRistrettoHDKD")
            t.append(label: "sign-bytes", [])
            let scalar = Sr25519.softDerivationScalar(&t, publicKey: publicKey, chainCode: chainCode)
            let nonce = t.witnessBytes(label: "HDKD-nonce", count: 32, witnesses: [secret.nonce, secret.key])
            return Keypair(secret: SecretKey(key: Ristretto255.add(scalar: secret.key, scalar), nonce: nonce))
        }

        static func divideByCofactor(_ scalar: inout [UInt8]) {
            var low: UInt8 = 0
            for i in stride(from: 31, through: 0, by: -1) {
                let remainder = scalar[i] & 0b111
                scalar[i] = (scalar[i] >> 3) &+ low
                low = remainder << 5
            }
        }

        static func multiplyByCofactor(_ scalar: inout [UInt8]) {
            var high: UInt8 = 0
            for i in 0..<32 {
                let carry = scalar[i] & 0b1110_0000
                scalar[i] = (scalar[i] << 3) &+ high
                high = carry >> 5
            }
        }
    }

    /// The public key of a soft derivation, without the secret. Nil for an invalid public key.
    public static func softDerived(publicKey: [UInt8], chainCode: [UInt8]) -> [UInt8]? {
        guard Ristretto255.isValidPoint(publicKey) else { return nil }
        var t = MerlinTranscript(label: "SchnorrRistrettoHDKD")
        t.append(label: "sign-bytes", [])
        let scalar = softDerivationScalar(&t, publicKey: publicKey, chainCode: chainCode)
        guard let offset = Ristretto255.baseMultiply(scalar) else { return nil }
        return Ristretto255.add(point: publicKey, offset)
    }

    /// Verifies a schnorrkel signature (the marked 64-byte form; the pre-audit unmarked form is refused).
    public static func verify(signature: [UInt8], message: [UInt8], publicKey: [UInt8], context: [UInt8] = signingContext) -> Bool {
        guard signature.count == 64, publicKey.count == 32, signature[63] & 0x80 != 0 else { return false }
        let bigR = Array(signature[0..<32])
        var s = Array(signature[32..<64])
        s[31] &= 0x7f
        guard Ristretto255.isCanonicalScalar(s), Ristretto255.isValidPoint(publicKey) else { return false }
        var t = signingTranscript(message, context: context)
        t.append(label: "proto-name", Array("Schnorr-sig".utf8))
        t.append(label: "sign:pk", publicKey)
        t.append(label: "sign:R", bigR)
        let k = Ristretto255.reduce(wide: t.challengeBytes(label: "sign:c", count: 64))
        guard let sB = Ristretto255.baseMultiply(s), let kA = Ristretto255.multiply(k, point: publicKey),
            let expected = Ristretto255.subtract(point: sB, kA)
        else { return false }
        return constantTimeEqual(expected, bigR)
    }

    static func signingTranscript(_ message: [UInt8], context: [UInt8]) -> MerlinTranscript {
        var t = MerlinTranscript(label: "SigningContext")
        t.append(label: "", context)
        t.append(label: "sign-bytes", message)
        return t
    }

    private static func softDerivationScalar(_ t: inout MerlinTranscript, publicKey: [UInt8], chainCode: [UInt8]) -> [UInt8] {
        t.append(label: "chain-code", chainCode)
        t.append(label: "public-key", publicKey)
        return Ristretto255.reduce(wide: t.challengeBytes(label: "HDKD-scalar", count: 64))
    }
}
