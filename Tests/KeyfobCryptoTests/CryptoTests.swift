import Testing

@testable import KeyfobCrypto

private func hex(_ text: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        bytes.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

private func hexString(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

/// The primitives every module calls, against their standards' own vectors (NIP-04/44/49 and the
/// server's sealing are tested through them again in their own suites).
@Suite struct CryptoTests {
    @Test func hchacha20MatchesTheXChaChaDraft() {
        // draft-irtf-cfrg-xchacha-03 §2.2.1.
        let key = (0..<32).map { UInt8($0) }
        let out = hchacha20(key: key, nonce16: hex("000000090000004a0000000031415927"))
        #expect(hexString(out) == "82413b4227b27bfed30e42508a877d73a0f9e4d58a74a853c12ec41326d3ecdc")
    }

    @Test func hkdfMatchesRFC5869TestCase1InOneGoAndInTwoSteps() throws {
        let ikm = [UInt8](repeating: 0x0b, count: 22)
        let salt = hex("000102030405060708090a0b0c")
        let info = hex("f0f1f2f3f4f5f6f7f8f9")
        let prk = HKDF.extract(salt: salt, ikm: ikm)
        #expect(hexString(prk) == "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5")
        let okm = "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
        #expect(hexString(HKDF.expand(prk: prk, info: info, length: 42)) == okm)
        #expect(try hexString(#require(HKDF.derive(key: ikm, salt: salt, info: info, length: 42))) == okm)
        #expect(hexString(hmacSHA256(key: salt, ikm)) == hexString(prk))
    }

    @Test func sha256OfABC() {
        #expect(hexString(sha256(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    /// getrandom(2) is the source now (OpenSSL's DRBG only without it): every call fresh, no byte
    /// value missing from a large draw. An `HMACSHA256Key` (keyed once, copied per MAC) gives what
    /// the one-shot HMAC gives: RFC 4231 test case 2, and a 32-byte key over two parts.
    @Test func randomBytesAreFreshEveryCallAndAnHMACKeyMatchesTheOneShot() throws {
        let draws = (0..<64).map { _ in randomBytes(32) }
        #expect(Set(draws).count == 64)
        #expect(Set(randomBytes(65_536)).count == 256)
        #expect(randomBytes(0).isEmpty)
        let jefe = try #require(HMACSHA256Key(key: Array("Jefe".utf8)))
        #expect(
            hexString(jefe.mac(Array("what do ya want ".utf8), Array("for nothing?".utf8)))
                == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        let key = randomBytes(32), nonce = randomBytes(16)
        #expect(try #require(HMACSHA256Key(key: key)).mac(nonce, [1]) == hmacSHA256(key: key, nonce, [1]))
    }

    @Test func aeadOpensOnlyWhatItSealedUnderTheSameKeyNonceAndData() throws {
        let key = randomBytes(32), nonce = randomBytes(12)
        let sealed = try #require(Cipher.aes256GCM(encrypt: true, key: key, nonce: nonce, aad: [1], input: Array("secret".utf8)))
        #expect(sealed.count == 6 + 16)
        #expect(Cipher.aes256GCM(encrypt: false, key: key, nonce: nonce, aad: [1], input: sealed) == Array("secret".utf8))
        #expect(Cipher.aes256GCM(encrypt: false, key: key, nonce: nonce, aad: [2], input: sealed) == nil)
        var flipped = sealed
        flipped[0] ^= 1
        #expect(Cipher.aes256GCM(encrypt: false, key: key, nonce: nonce, aad: [1], input: flipped) == nil)
        #expect(Cipher.aes256GCM(encrypt: false, key: key, nonce: nonce, aad: [1], input: Array(sealed.prefix(15))) == nil)
        #expect(Cipher.aes256GCM(encrypt: true, key: Array(key.prefix(16)), nonce: nonce, aad: [], input: [1]) == nil)
        let box = try #require(Cipher.chacha20Poly1305(encrypt: true, key: key, nonce: nonce, aad: [], input: [9, 9]))
        #expect(Cipher.chacha20Poly1305(encrypt: false, key: key, nonce: nonce, aad: [], input: box) == [9, 9])
    }

    @Test func secretBytesHoldWhatTheyTookAndWipeTheArray() {
        var bytes: [UInt8] = [1, 2, 3]
        let secret = SecretBytes(taking: &bytes)
        #expect(bytes == [0, 0, 0])
        #expect(secret.count == 3)
        #expect(secret.withUnsafeBytes { Array($0) } == [1, 2, 3])
        #expect(constantTimeEqual([1, 2], [1, 2]) && !constantTimeEqual([1, 2], [1, 3]) && !constantTimeEqual([1], [1, 2]))
    }
}
