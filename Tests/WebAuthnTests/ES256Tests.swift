import Testing
import WebAuthnTestSupport

@testable import WebAuthn

/// ES256 assertions are checked with swift-crypto's BoringSSL (a quarter less CPU a verify than
/// OpenSSL 3.0's provider path, BENCHMARKS.md); OpenSSL still checks every other key. The two must
/// agree on every signature, well-formed or not: strict DER only, nothing trailing, no padding.
@Suite struct ES256Tests {
    @Test func boringSSLAndOpenSSLAgreeOnEveryFormOfAnES256Signature() throws {
        let signer = TestPrivateKey(.es256)
        let key = try CredentialPublicKey(cose: signer.coseKey)
        #expect(key.p256 != nil, "a P-256 passkey is checked by BoringSSL")
        let message = Array("authenticator data and the client data's hash".utf8)
        let good = signer.sign(message)
        // 30 len 02 rlen r 02 slen s: r again with one more leading zero (valid BER, not DER).
        let rLength = Int(good[3])
        let padded = [0x30, good[1] + 1, 0x02, good[3] + 1, 0x00] + good[4..<(4 + rLength)] + good[(4 + rLength)...]
        var flipped = good
        flipped[flipped.count - 1] ^= 1
        let cases: [(String, [UInt8], [UInt8], Bool)] = [
            ("the signature", good, message, true),
            ("another message", good, message + [0], false),
            ("a flipped bit", flipped, message, false),
            ("a byte after the DER", good + [0], message, false),
            ("r padded with a zero", padded, message, false),
            ("the DER cut short", Array(good.dropLast()), message, false),
            ("nothing", [], message, false),
            ("raw r||s instead of DER", [UInt8](repeating: 7, count: 64), message, false),
        ]
        for (name, signature, signed, expected) in cases {
            let boring = key.isValidSignature(signature, for: signed)
            let openSSL = key.algorithm.verify(signature: signature, message: signed, key: key.handle)
            #expect(boring == expected, "BoringSSL: \(name)")
            #expect(openSSL == expected, "OpenSSL: \(name)")
        }
    }

    @Test func otherCurvesStayWithOpenSSL() throws {
        for kind in [TestPrivateKey.Kind.es384, .es512, .eddsa, .rs256] {
            let signer = TestPrivateKey(kind)
            let key = try CredentialPublicKey(cose: signer.coseKey)
            #expect(key.p256 == nil)
            #expect(key.isValidSignature(signer.sign([1, 2, 3]), for: [1, 2, 3]))
        }
    }
}
