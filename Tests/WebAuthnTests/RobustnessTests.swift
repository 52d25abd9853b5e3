import Foundation
import KeyfobCodecs
import TestSupport
import Testing

@testable import WebAuthn

/// 100,000 random and mutated inputs through every parser and both verify
/// functions. Typed throws guarantee only `WebAuthnError` can come out; this
/// shows nothing crashes, traps or hangs on the way.
@Suite struct RobustnessTests {
    static func mutate(_ input: [UInt8], _ rng: inout SplitMix) -> [UInt8] {
        var b = input
        switch rng.next() % 8 {
        case 0 where !b.isEmpty: b[Int(rng.next() % UInt64(b.count))] ^= UInt8(1 << (rng.next() % 8))
        case 1 where !b.isEmpty: b[Int(rng.next() % UInt64(b.count))] = UInt8(truncatingIfNeeded: rng.next())
        case 2: b = Array(b.prefix(Int(rng.next() % UInt64(b.count + 1))))
        case 3: b.insert(UInt8(truncatingIfNeeded: rng.next()), at: Int(rng.next() % UInt64(b.count + 1)))
        case 4 where !b.isEmpty: b.remove(at: Int(rng.next() % UInt64(b.count)))
        case 5: b = (0..<Int(rng.next() % 96)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        case 6 where b.count > 8:
            // Interesting CBOR heads: huge declared lengths, indefinite markers, deep arrays.
            let heads: [[UInt8]] = [
                [0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], [0xba, 0xc1, 0x41, 0x68, 0x3c],
                [0x5f], [0xff], [0x81, 0x81, 0x81, 0x81], [0xd8, 0x18], [0xf9, 0x7c, 0x00],
            ]
            let at = Int(rng.next() % UInt64(b.count))
            b.insert(contentsOf: heads[Int(rng.next() % UInt64(heads.count))], at: at)
        default:
            if !b.isEmpty { b[Int(rng.next() % UInt64(b.count))] = [0x00, 0xff, 0x7f, 0x80, 0x18, 0x1f][Int(rng.next() % 6)] }
        }
        return b
    }

    struct Seed {
        let rp: RelyingParty
        let challenge: [UInt8]
        let registration: RegistrationCredential?
        let authentication: AuthenticationCredential?
        let stored: StoredCredential?
    }

    static func seeds() throws -> [Seed] {
        try Vectors.files("webauthn").compactMap { name in
            let v = try Vectors.json("webauthn", name)
            let rp = WebAuthnVectorTests.relyingParty(v)
            let challenge = Base64URL.decode(v["expected_challenge_b64url"] as! String)!
            if v["kind"] as! String == "registration" {
                return Seed(
                    rp: rp, challenge: challenge,
                    registration: try Vectors.decode(RegistrationCredential.self, from: v["credential"]!),
                    authentication: nil, stored: nil)
            }
            let auth = try Vectors.decode(AuthenticationCredential.self, from: v["credential"]!)
            guard let key = try? CredentialPublicKey(cose: Base64URL.decode(v["credential_public_key_b64url"] as! String)!) else { return nil }
            return Seed(
                rp: rp, challenge: challenge, registration: nil, authentication: auth,
                stored: StoredCredential(id: Base64URL.decode(auth.rawId)!, publicKey: key, signCount: 0))
        }
    }

    @Test func hundredThousandMutatedInputsOnlyEverThrowTypedErrors() throws {
        let seeds = try Self.seeds()
        #expect(seeds.count > 90)
        var rng = SplitMix(seed: 0x6b65_7966_6f62)
        var verified = 0
        func note(_ body: () throws(WebAuthnError) -> Void) { _ = try? body() }
        func verify(_ body: () throws(WebAuthnError) -> Void) { if (try? body()) != nil { verified += 1 } }
        let pinned = Date(timeIntervalSince1970: 1_700_000_000)
        for i in 0..<100_000 {
            let seed = seeds[i % seeds.count]
            if var credential = seed.registration {
                let attestation = Base64URL.decode(credential.response.attestationObject) ?? []
                let clientData = Base64URL.decode(credential.response.clientDataJSON) ?? []
                if rng.next() % 2 == 0 {
                    credential.response.attestationObject = Base64URL.encode(Self.mutate(attestation, &rng))
                } else {
                    credential.response.clientDataJSON = Base64URL.encode(Self.mutate(clientData, &rng))
                }
                let mutated = Base64URL.decode(credential.response.attestationObject) ?? []
                note { () throws(WebAuthnError) in _ = try CBORDecoder.decode(mutated) }
                note { () throws(WebAuthnError) in _ = try AttestationObject(bytes: mutated) }
                note { () throws(WebAuthnError) in _ = try CollectedClientData.parse(Self.mutate(clientData, &rng)) }
                verify { () throws(WebAuthnError) in
                    _ = try seed.rp.verifyRegistration(credential, challenge: seed.challenge, requireUserVerification: false, now: pinned)
                }
            } else if var credential = seed.authentication, let stored = seed.stored {
                let authData = Base64URL.decode(credential.response.authenticatorData) ?? []
                switch rng.next() % 3 {
                case 0: credential.response.authenticatorData = Base64URL.encode(Self.mutate(authData, &rng))
                case 1: credential.response.signature = Base64URL.encode(Self.mutate(Base64URL.decode(credential.response.signature) ?? [], &rng))
                default:
                    credential.response.clientDataJSON = Base64URL.encode(
                        Self.mutate(Base64URL.decode(credential.response.clientDataJSON) ?? [], &rng))
                }
                note { () throws(WebAuthnError) in _ = try AuthenticatorData(bytes: Base64URL.decode(credential.response.authenticatorData) ?? []) }
                note { () throws(WebAuthnError) in _ = try CredentialPublicKey(cose: Self.mutate(stored.publicKey.cose, &rng)) }
                verify { () throws(WebAuthnError) in
                    _ = try seed.rp.verifyAuthentication(credential, challenge: seed.challenge, stored: stored, requireUserVerification: false)
                }
            }
            _ = Base64URL.decode(String(decoding: Self.mutate(Array("AQIDBA-_".utf8), &rng), as: UTF8.self))
        }
        // Nearly every mutation must be caught; a few (e.g. in unsigned extension bytes) may still pass.
        #expect(verified < 5_000, "\(verified) mutated responses verified")
    }

    /// A 64 KB body can declare a 12,000-key map; decoding it used to compare every key with every
    /// other (tens of millions of comparisons). Now containers are capped at `maxEntries` before
    /// libcbor sees them, and duplicate keys are found with a set.
    @Test func aTwelveThousandKeyMapIsRefusedBeforeAnyWork() throws {
        func map(_ keys: Int, duplicateLast: Bool = false) -> [UInt8] {
            var out: [UInt8] = [0xb9, UInt8(keys >> 8), UInt8(keys & 0xff)]
            for k in 0..<keys {
                let key = duplicateLast && k == keys - 1 ? 0 : k
                out += [0x19, UInt8(key >> 8), UInt8(key & 0xff), 0xf6]  // uint16 key → null
            }
            return out
        }
        #expect(map(12_000).count > 48_000)
        #expect(throws: WebAuthnError.self) { _ = try CBORDecoder.decode(map(12_000)) }
        #expect(throws: WebAuthnError.self) { _ = try CBORDecoder.decode(map(CBORDecoder.maxEntries + 1)) }
        // Up to the cap a map decodes, and a repeated key is still found (last of 256).
        #expect(try CBORDecoder.decode(map(CBORDecoder.maxEntries)).mapPairs?.count == CBORDecoder.maxEntries)
        #expect(throws: WebAuthnError.self) { _ = try CBORDecoder.decode(map(CBORDecoder.maxEntries, duplicateLast: true)) }
        // Indefinite-length maps and arrays are capped the same way.
        var indefinite: [UInt8] = [0xbf]
        for k in 0..<300 { indefinite += [0x19, UInt8(k >> 8), UInt8(k & 0xff), 0xf6] }
        indefinite.append(0xff)
        #expect(throws: WebAuthnError.self) { _ = try CBORDecoder.decode(indefinite) }
        let bigArray: [UInt8] = [0x9f] + [UInt8](repeating: 0x01, count: 300) + [0xff]
        #expect(throws: WebAuthnError.self) { _ = try CBORDecoder.decode(bigArray) }
    }

    /// Equal items hash equally (the duplicate-key set depends on it).
    @Test func cborHashingAgreesWithEquality() throws {
        let a = try CBORDecoder.decode([0xa2, 0x01, 0x02, 0x63, 0x61, 0x62, 0x63, 0x82, 0x01, 0xf5])
        let b = try CBORDecoder.decode([0xa2, 0x01, 0x02, 0x63, 0x61, 0x62, 0x63, 0x82, 0x01, 0xf5])
        #expect(a == b && a.hashValue == b.hashValue)
        #expect(Set([CBOR.unsigned(1), .negative(0), .float(0), .float(-0.0), .text("1")]).count == 4)
    }
}
