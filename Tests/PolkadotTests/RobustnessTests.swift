import Foundation
import TestSupport
import Testing

@testable import Polkadot

/// Inputs of any shape are refused with a reason, never trapped on: seeded random bytes and
/// mutations of valid inputs through every parser a dapp or a user reaches.
@Suite struct RobustnessTests {
    static let validAddress = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"

    @Test func addressesPhrasesAndPathsOfAnyShape() {
        var random = SplitMix(seed: 26)
        let alphabet = Array("123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0OIl/ \n\u{0}é".unicodeScalars)
        for _ in 0..<3000 {
            let length = Int(random.next() % 80)
            let text = String(String.UnicodeScalarView((0..<length).map { _ in alphabet[Int(random.next() % UInt64(alphabet.count))] }))
            _ = SS58.decode(text)
            _ = try? Mnemonic.entropy(of: text)
            _ = try? SubstrateKey(type: .ed25519, secretURI: text)
        }
        // One character changed anywhere in a valid address: refused (checksum), never another account.
        for index in Self.validAddress.indices {
            for replacement in "1zA" where Self.validAddress[index] != replacement {
                var mutated = Self.validAddress
                mutated.replaceSubrange(index...index, with: String(replacement))
                #expect(SS58.decode(mutated) == nil)
            }
        }
    }

    @Test func signingPayloadsWithEveryFieldReplaced() {
        let base = SigningPayloadTests.base
        let odd: [Any] = [
            NSNull(), 0, -1, 1.5, true, "", "0x", "0x0", "0xzz", "zz", String(repeating: "0", count: 5000), [1, 2], ["a": 1],
            "0x" + String(repeating: "ff", count: 40), Int.max,
        ]
        for key in base.keys {
            for value in odd {
                var json = base
                json[key] = value
                _ = try? SignerPayload(json: json)  // a result or a PolkadotError, nothing else
            }
            var json = base
            json.removeValue(forKey: key)
            _ = try? SignerPayload(json: json)
        }
        #expect(throws: PolkadotError.self) { try SignerPayload(data: Array("{}".utf8)) }
    }

    @Test func backupsOfAnyShape() {
        var random = SplitMix(seed: 7)
        let valid = JSONBackup.export(try! SubstrateKey(type: .sr25519, seed: [UInt8](repeating: 1, count: 32)), password: "pw", name: "x")
        for _ in 0..<40 {
            var file = valid
            var bytes = [UInt8](Data(base64Encoded: valid.encoded!)!)
            // Truncated, or with one byte flipped past the scrypt parameters (the work stays fixed).
            if random.next() % 2 == 0 {
                bytes = Array(bytes.prefix(Int(random.next() % UInt64(bytes.count))))
            } else {
                let index = 44 + Int(random.next() % UInt64(bytes.count - 44))
                bytes[index] ^= UInt8(1 + random.next() % 255)
            }
            file.encoded = Data(bytes).base64EncodedString()
            #expect(throws: PolkadotError.self) { try JSONBackup.importKey(file, password: "pw") }
        }
        for encoding: Any in [
            NSNull(), "x", ["content": ["pkcs8"]], ["content": ["pkcs8", "rsa"]], ["content": ["pkcs8", "sr25519"], "type": ["none"]],
        ] {
            // Read as polkadot-js files are read: a member of another type is missing.
            let json = try! JSONSerialization.data(withJSONObject: ["encoded": valid.encoded!, "encoding": encoding])
            let file = try! JSONDecoder().decode(JSONBackup.File.self, from: json)
            #expect(throws: PolkadotError.self) { try JSONBackup.importKey(file, password: "pw") }
        }
    }
}
