import COpenSSL
import Foundation
import KeyfobCrypto
import Testing

@testable import Polkadot

/// The primitives under sr25519 and Substrate's key handling, against published vectors.
@Suite struct CryptoVectorTests {
    @Test func keccakPermutationMatchesOpenSSLsSHA3() {
        // SHA3-256 of one short block is the permutation over (message ‖ 0x06 … 0x80) at rate 136.
        for message in [[UInt8](), Array("abc".utf8), [UInt8](repeating: 0x78, count: 100)] {
            var state = [UInt8](repeating: 0, count: 200)
            var block = message + [0x06] + [UInt8](repeating: 0, count: 135 - message.count)
            block[135] ^= 0x80
            for (i, b) in block.enumerated() { state[i] ^= b }
            Keccak.permute(&state)
            var expected = [UInt8](repeating: 0, count: 32)
            #expect(EVP_Digest(message, message.count, &expected, nil, EVP_sha3_256(), nil) == 1)
            #expect(Array(state[0..<32]) == expected)
        }
    }

    @Test func merlinMatchesItsPublishedTranscripts() throws {
        let vectors = try PolkadotVectors.json("merlin.json")["merlin"] as! [[String: Any]]
        var simple = MerlinTranscript(label: "test protocol")
        simple.append(label: "some label", Array("some data".utf8))
        #expect(hexString(simple.challengeBytes(label: "challenge", count: 32)) == vectors[0]["expected"] as! String)

        var complex = MerlinTranscript(label: "test protocol")
        complex.append(label: "step1", Array("some data".utf8))
        var challenge: [UInt8] = []
        for _ in 0..<32 {
            challenge = complex.challengeBytes(label: "challenge", count: 32)
            complex.append(label: "bigdata", [UInt8](repeating: 0x63, count: 1024))
            complex.append(label: "challengedata", challenge)
        }
        #expect(hexString(challenge) == vectors[1]["expected"] as! String)
    }

    @Test func substrateBip39MatchesParitysVectors() throws {
        let file = try PolkadotVectors.json("substrate_bip39.json")
        let password = file["password"] as! String
        let vectors = file["vectors"] as! [[String: String]]
        #expect(vectors.count == 24)
        for v in vectors {
            let entropy = try Mnemonic.entropy(of: v["phrase"]!)
            #expect(hexString(entropy) == v["entropy"]!)
            #expect(hexString(Mnemonic.seed(entropy: entropy, password: password)) == v["seed"]!)
            #expect(hexString(Mnemonic.miniSecret(entropy: entropy, password: password)) == String(v["seed"]!.prefix(64)))
            #expect(Mnemonic.phrase(entropy: entropy) == v["phrase"]!)
        }
    }

    @Test func theWordlistIsBIP39sEnglishList() {
        #expect(Mnemonic.englishWords.count == 2048)
        let file = Mnemonic.englishWords.map { $0 + "\n" }.joined()
        #expect(hexString(sha256(Array(file.utf8))) == "2f5eed53a4727b4bf8880d8f3f199efc90e58503646d9ff8eff3a2ed3b24dbda")
    }

    @Test func badPhrasesAreRefusedSayingWhy() {
        let valid = "bottom drive obey lake curtain smoke basket hold race lonely fit walk"
        #expect(throws: PolkadotError.self) { try Mnemonic.entropy(of: "bottom drive obey") }
        #expect(throws: PolkadotError(.invalidMnemonic, "word 3 is not in the BIP-39 English list")) {
            try Mnemonic.entropy(of: valid.replacingOccurrences(of: "obey", with: "obay"))
        }
        // Two words swapped: every word is known, the checksum catches it.
        #expect(throws: PolkadotError.self) {
            try Mnemonic.entropy(of: valid.replacingOccurrences(of: "bottom drive", with: "drive bottom"))
        }
    }

    @Test func ss58MatchesPolkadotJsAndSubkey() throws {
        let vectors = try PolkadotVectors.json("ss58.json")["vectors"] as! [[String: Any]]
        for v in vectors {
            let key = hex(v["publicKey"] as! String)
            let prefix = UInt16(v["prefix"] as! Int)
            #expect(SS58.encode(accountId: key, prefix: prefix) == v["address"] as! String)
            let decoded = try #require(SS58.decode(v["address"] as! String))
            #expect(decoded.accountId == key && decoded.prefix == prefix)
        }
        // One changed character fails the checksum; junk is refused, never trapped on.
        #expect(SS58.decode("5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQZ") == nil)
        for junk in ["", "0OIl", "5", String(repeating: "z", count: 200), "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQ"] {
            #expect(SS58.decode(junk) == nil)
        }
    }

    @Test func sr25519KeysMatchPolkadotJsWasmCrypto() throws {
        let v = try PolkadotVectors.json("sr25519_wasm_crypto.json")
        let fromSeed = v["pairFromSeed"] as! [String: String]
        let pair = Sr25519.Keypair(miniSecret: Array(fromSeed["seedUtf8"]!.utf8))
        #expect(hexString(pair.ed25519Bytes + pair.publicKey) == fromSeed["pair"]!)

        let dev = v["devFromSeed"] as! [String: String]
        let devPair = Sr25519.Keypair(miniSecret: hex(dev["seed"]!))
        #expect(hexString(devPair.ed25519Bytes + devPair.publicKey) == dev["pair"]!)
        // The 64-byte form polkadot-js stores reads back to the same key.
        #expect(Sr25519.Keypair(ed25519Bytes: devPair.ed25519Bytes) == devPair)

        let hard = v["deriveHardKnown"] as! [String: String]
        #expect(hexString(devPair.hardDerived(chainCode: hex(hard["chainCode"]!)).publicKey) == hard["public"]!)
        let soft = v["deriveSoftKnown"] as! [String: String]
        #expect(hexString(devPair.softDerived(chainCode: hex(soft["chainCode"]!)).publicKey) == soft["public"]!)
        let softPublic = v["deriveSoftPubkey"] as! [String: String]
        #expect(
            Sr25519.softDerived(publicKey: hex(softPublic["public"]!), chainCode: hex(softPublic["chainCode"]!))
                .map(hexString) == softPublic["derived"]!)
    }

    @Test func sr25519SignsWhatItVerifiesAndRefusesTampering() {
        let pair = Sr25519.Keypair(miniSecret: [UInt8](repeating: 7, count: 32))
        let message = Array("this is a message".utf8)
        let signature = pair.sign(message)
        #expect(signature.count == 64 && signature[63] & 0x80 != 0)
        #expect(Sr25519.verify(signature: signature, message: message, publicKey: pair.publicKey))
        // Randomised nonces: two signatures differ, both verify.
        #expect(pair.sign(message) != signature)
        #expect(!Sr25519.verify(signature: signature, message: message + [0], publicKey: pair.publicKey))
        #expect(!Sr25519.verify(signature: signature, message: message, publicKey: pair.publicKey, context: Array("other".utf8)))
        var flipped = signature
        flipped[5] ^= 1
        #expect(!Sr25519.verify(signature: flipped, message: message, publicKey: pair.publicKey))
        var unmarked = signature
        unmarked[63] &= 0x7f
        #expect(!Sr25519.verify(signature: unmarked, message: message, publicKey: pair.publicKey))
        #expect(!Sr25519.verify(signature: [UInt8](repeating: 0, count: 64), message: message, publicKey: pair.publicKey))
        #expect(!Sr25519.verify(signature: signature, message: message, publicKey: [UInt8](repeating: 0xff, count: 32)))
    }

    @Test func aPreAuditSignatureIsRefusedAsSubstrateRefusesIt() throws {
        let v = try PolkadotVectors.json("sr25519_wasm_crypto.json")["preauditSignature"] as! [String: String]
        #expect(
            !Sr25519.verify(
                signature: hex(v["signature"]!), message: Array(v["messageUtf8"]!.utf8), publicKey: hex(v["public"]!)))
    }

    @Test func secretURIsDeriveAsSubstrateDoes() throws {
        let v = try PolkadotVectors.json("secret_uri.json")
        for type in [KeyType.sr25519, .ecdsa] {
            for row in v[type.rawValue] as! [[String: String]] {
                let key = try SubstrateKey(type: type, secretURI: row["uri"]!)
                #expect(hexString(key.publicKey) == row["pk"]!, "\(row["uri"]!)")
                #expect(key.address(prefix: SS58.generic) == row["ss"]!)
            }
        }
        // ed25519 hard derivation: Substrate's development GRANDPA key for Alice (`subkey inspect
        // --scheme ed25519 //Alice`), also recomputed from the rule with Python's hashlib and
        // cryptography while writing this test.
        let alice = try SubstrateKey(type: .ed25519, secretURI: "\(v["phrase"]!)//Alice")
        #expect(hexString(alice.publicKey) == "88dc3417d5058ec4b4503e0c12ea1a0a89be200fe98922423d4334014fa6b0ee")
        #expect(alice.address(prefix: SS58.generic) == "5FA9nQDVg267DEd8m1ZypXLBnvN7SFxYwV7ndqSYGiN9TTpu")
        #expect(throws: PolkadotError.self) { try SubstrateKey(type: .ed25519, secretURI: "\(v["phrase"]!)/soft") }
        #expect(throws: PolkadotError.self) { try SubstrateKey(type: .sr25519, secretURI: "\(v["phrase"]!)//") }
    }

    @Test func everyKeyTypeSignsWhatItVerifies() throws {
        for type in KeyType.allCases {
            let key = try SubstrateKey(type: type, seed: [UInt8](repeating: 9, count: 32))
            let message = Array("<Bytes>hello</Bytes>".utf8)
            let signature = key.sign(message)
            #expect(signature.count == (type == .ecdsa ? 65 : 64))
            #expect(SubstrateKey.verify(type: type, signature: signature, message: message, publicKey: key.publicKey))
            #expect(!SubstrateKey.verify(type: type, signature: signature, message: message + [1], publicKey: key.publicKey))
            let reloaded = try SubstrateKey(type: type, storedSecret: key.exposedSecret())
            #expect(reloaded.publicKey == key.publicKey)
            #expect(!String(describing: key).contains(hexString(key.exposedSecret())))
        }
    }

    @Test func aRealPolkadotJsExportImports() throws {
        let v = try PolkadotVectors.json("polkadot_js_backup_sr25519.json")
        let file = try JSONDecoder().decode(JSONBackup.File.self, from: JSONSerialization.data(withJSONObject: v["file"]!))
        let key = try JSONBackup.importKey(file, password: v["password"] as! String)
        #expect(hexString(key.publicKey) == v["publicKey"] as! String)
        #expect(key.address(prefix: SS58.generic) == file.address)
        #expect(throws: PolkadotError(.wrongPassword, "the password does not open this file")) {
            try JSONBackup.importKey(file, password: "password123")
        }
    }

    @Test func jsonBackupsRoundTripAndRefuseWrongPasswordsAndForeignParameters() throws {
        for type in KeyType.allCases {
            let key = try SubstrateKey(type: type, seed: [UInt8](repeating: 3, count: 32))
            let file = JSONBackup.export(key, password: "correct horse", name: "test")
            #expect(file.address == key.address(prefix: SS58.generic))
            let back = try JSONBackup.importKey(file, password: "correct horse")
            #expect(back.publicKey == key.publicKey && back.exposedSecret() == key.exposedSecret())
            #expect(throws: PolkadotError.self) { try JSONBackup.importKey(file, password: "wrong") }
        }
        let key = try SubstrateKey(type: .sr25519, seed: [UInt8](repeating: 3, count: 32))
        var file = JSONBackup.export(key, password: "pw", name: "test")
        var bytes = [UInt8](Data(base64Encoded: file.encoded!)!)
        bytes[32] = 0  // N = 2^15 → another N
        bytes[34] = 0x10
        file.encoded = Data(bytes).base64EncodedString()
        #expect(throws: PolkadotError.self) { try JSONBackup.importKey(file, password: "pw") }
        let bare = JSONBackup.File(encoded: "x", encoding: nil, address: nil, meta: nil)
        #expect(throws: PolkadotError.self) { try JSONBackup.importKey(bare, password: "pw") }
    }
}
