import Foundation
import KeyfobCodecs
import KeyfobCrypto
import Testing

@testable import Nostr

@Suite struct NIP44Tests {
    static var v2: [String: Any] { get throws { try NostrVectors.json("nip44.vectors.json")["v2"] as! [String: Any] } }

    @Test func conversationKeys() throws {
        let valid = try Self.v2["valid"] as! [String: Any]
        for item in valid["get_conversation_key"] as! [[String: String]] {
            let key = try SecretKey(hex: item["sec1"]!)
            #expect(Hex.encode(try NIP44.conversationKey(key, try PublicKey(hex: item["pub2"]!))) == item["conversation_key"]!)
        }
        let invalid = try Self.v2["invalid"] as! [String: Any]
        for item in invalid["get_conversation_key"] as! [[String: String]] {
            let ok = (try? SecretKey(hex: item["sec1"]!)) != nil && (try? PublicKey(hex: item["pub2"]!)) != nil
            #expect(!ok, "\(item["note"] ?? "")")
        }
    }

    @Test func messageKeysAndPadding() throws {
        let valid = try Self.v2["valid"] as! [String: Any]
        let mk = valid["get_message_keys"] as! [String: Any]
        let ck = hex(mk["conversation_key"] as! String)
        for item in mk["keys"] as! [[String: String]] {
            let keys = NIP44.messageKeys(ck, nonce: hex(item["nonce"]!))
            #expect(Hex.encode(keys.chachaKey) == item["chacha_key"]!)
            #expect(Hex.encode(keys.chachaNonce) == item["chacha_nonce"]!)
            #expect(Hex.encode(keys.hmacKey) == item["hmac_key"]!)
        }
        for pair in valid["calc_padded_len"] as! [[Int]] { #expect(NIP44.paddedLength(pair[0]) == pair[1]) }
    }

    @Test func encryptDecrypt() throws {
        let valid = try Self.v2["valid"] as! [String: Any]
        for item in valid["encrypt_decrypt"] as! [[String: String]] {
            let sec1 = try SecretKey(hex: item["sec1"]!), sec2 = try SecretKey(hex: item["sec2"]!)
            let ck = try NIP44.conversationKey(sec1, sec2.publicKey)
            #expect(Hex.encode(ck) == item["conversation_key"]!)
            let payload = try NIP44.encrypt(item["plaintext"]!, conversationKey: ck, nonce: hex(item["nonce"]!))
            #expect(payload == item["payload"]!)
            #expect(try NIP44.decrypt(item["payload"]!, with: sec2, from: sec1.publicKey) == item["plaintext"]!)
        }
    }

    @Test func longMessages() throws {
        let valid = try Self.v2["valid"] as! [String: Any]
        for item in valid["encrypt_decrypt_long_msg"] as! [[String: Any]] {
            let plaintext = String(repeating: item["pattern"] as! String, count: item["repeat"] as! Int)
            #expect(Hex.encode(sha256(Array(plaintext.utf8))) == item["plaintext_sha256"] as! String)
            let payload = try NIP44.encrypt(
                plaintext, conversationKey: hex(item["conversation_key"] as! String),
                nonce: hex(item["nonce"] as! String))
            #expect(Hex.encode(sha256(Array(payload.utf8))) == item["payload_sha256"] as! String)
            #expect(try NIP44.decrypt(payload, conversationKey: hex(item["conversation_key"] as! String)) == plaintext)
        }
    }

    /// The official invalid list says 0, 65536, 100000 and 10^7 bytes cannot be encrypted; Keyfob follows
    /// that reading by default and writes the extended prefix (nips#1907) only when asked.
    @Test func invalidLengthsFollowTheOfficialReadingByDefault() throws {
        let invalid = try Self.v2["invalid"] as! [String: Any]
        let ck = [UInt8](repeating: 1, count: 32)
        for length in invalid["encrypt_msg_lengths"] as! [Int] where length <= 100_000 {
            #expect(throws: NostrError.self, "\(length)") {
                _ = try NIP44.encrypt(String(repeating: "a", count: length), conversationKey: ck)
            }
        }
    }

    @Test func theExtendedPrefixMatchesNips1907() throws {
        let v = try NostrVectors.json("nip44_extended_prefix.json")
        let ck = hex(v["conversation_key"] as! String), nonce = hex(v["nonce"] as! String)
        for item in v["vectors"] as! [[String: Any]] {
            let plaintext = String(repeating: "a", count: item["plaintext_len"] as! Int)
            let payload = try NIP44.encrypt(plaintext, conversationKey: ck, nonce: nonce, allowExtended: true)
            #expect(Hex.encode(sha256(Array(payload.utf8))) == item["payload_sha256"] as! String)
            #expect(try NIP44.decrypt(payload, conversationKey: ck) == plaintext)
        }
    }

    @Test func invalidPayloadsFailToDecrypt() throws {
        let invalid = try Self.v2["invalid"] as! [String: Any]
        for item in invalid["decrypt"] as! [[String: String]] {
            #expect(throws: NostrError.self, "\(item["note"] ?? "")") {
                _ = try NIP44.decrypt(item["payload"]!, conversationKey: hex(item["conversation_key"]!))
            }
        }
    }

    @Test func realGiftWrapsDecrypt() throws {
        let v = try NostrVectors.json("nip59_nip17_giftwrap.json")["nip59"] as! [String: Any]
        let recipient = try SecretKey(hex: v["recipient_seckey"] as! String)
        let wrap = try Event.parse(json: NostrVectors.jsonBytes(v["gift_wrap"]!))
        #expect(wrap.isValid)
        let sealJSON = try NIP44.decrypt(wrap.content, with: recipient, from: wrap.pubkey)
        let seal = try Event.parse(json: Array(sealJSON.utf8))
        #expect(seal.isValid && seal.kind == 13)
        let rumorJSON = try NIP44.decrypt(seal.content, with: recipient, from: seal.pubkey)
        let rumor = try JSONSerialization.jsonObject(with: Data(rumorJSON.utf8)) as! [String: Any]
        #expect(rumor["pubkey"] as? String == seal.pubkey.hex)
        #expect(rumor["content"] as? String == (v["rumor"] as! [String: Any])["content"] as? String)
    }
}

@Suite struct NIP04Tests {
    @Test func rustNostrVector() throws {
        let v = try NostrVectors.json("nip04_rust_nostr.json")
        for item in v["vectors"] as! [[String: String]] {
            let sender = try SecretKey(hex: item["sender_seckey"]!), recipient = try SecretKey(hex: item["recipient_seckey"]!)
            #expect(try NIP04.decrypt(item["payload"]!, with: recipient, from: sender.publicKey) == item["plaintext"]!)
            #expect(try NIP04.decrypt(item["payload"]!, with: sender, from: recipient.publicKey) == item["plaintext"]!)
        }
        let key = try SecretKey(hex: "6b911fd37cdf5c81d4c0adb1ab7fa822ed253ab0ad9aa18d77257c88b29b718e")
        let peer = try SecretKey(hex: "7b911fd37cdf5c81d4c0adb1ab7fa822ed253ab0ad9aa18d77257c88b29b718e").publicKey
        for item in v["must_fail"] as! [[String: String]] {
            #expect(throws: NostrError.self, "\(item["why"]!)") { _ = try NIP04.decrypt(item["payload"]!, with: key, from: peer) }
        }
    }

    @Test func generatedVectorsWithFixedIVs() throws {
        let v = try NostrVectors.json("generated_nip04.json")
        for item in v["vectors"] as! [[String: String]] {
            let sender = try SecretKey(hex: item["sender_seckey"]!), recipient = try SecretKey(hex: item["recipient_seckey"]!)
            #expect(Hex.encode(try sender.sharedX(with: recipient.publicKey)) == item["shared_x"]!)
            let payload = try NIP04.encrypt(item["plaintext"]!, from: sender, to: recipient.publicKey, iv: hex(item["iv"]!))
            #expect(payload == item["payload"]!)
            #expect(try NIP04.decrypt(payload, with: recipient, from: sender.publicKey) == item["plaintext"]!)
        }
    }
}

@Suite struct PrivateZapTests {
    static var vectors: [[String: Any]] { get throws { try NostrVectors.json("generated_nip57_private_zap.json")["vectors"] as! [[String: Any]] } }

    @Test func recipientAndSenderBothDecryptAndOthersCannot() throws {
        for item in try Self.vectors {
            let request = try Event.parse(json: NostrVectors.jsonBytes(item["zap_request"]!))
            let expected = try Event.parse(json: NostrVectors.jsonBytes(item["decrypt_zap_event_result"]!))
            let recipient = try SecretKey(hex: item["recipient_seckey"] as! String)
            let sender = try SecretKey(hex: item["sender_seckey"] as! String)
            #expect(try PrivateZap.decrypt(zapRequest: request, with: recipient) == expected, "\(item["label"]!)")
            #expect(try PrivateZap.decrypt(zapRequest: request, with: sender) == expected, "\(item["label"]!)")
            #expect(throws: NostrError.self) { _ = try PrivateZap.decrypt(zapRequest: request, with: SecretKey.generate()) }
            // The sender's ephemeral key is derived from the zap request's own created_at.
            let target = (request.tags.first { $0.first == "e" } ?? request.tags.first { $0.first == "p" }!)[1]
            let ephemeral = try PrivateZap.ephemeralKey(sender: sender, targetID: target, createdAt: request.createdAt)
            #expect(ephemeral.publicKey.hex == item["ephemeral_pubkey"] as! String)
        }
    }

    @Test func anAnonymousZapWithNothingToDecryptGetsACleanError() throws {
        let key = SecretKey.generate()
        let recipient = SecretKey.generate().publicKey.hex
        let anonymous = UnsignedEvent(createdAt: 1, kind: 9734, tags: [["p", recipient], ["anon"]], content: "").sign(with: key)
        do { _ = try PrivateZap.decrypt(zapRequest: anonymous, with: key); Issue.record("decrypted nothing") } catch {
            #expect(error.code == .invalidContent && error.message.contains("anonymous"))
        }
        let publicZap = UnsignedEvent(createdAt: 1, kind: 9734, tags: [["p", recipient]], content: "").sign(with: key)
        #expect(throws: NostrError.self) { _ = try PrivateZap.decrypt(zapRequest: publicZap, with: key) }
        let note = UnsignedEvent(createdAt: 1, kind: 1, tags: [], content: "").sign(with: key)
        #expect(throws: NostrError.self) { _ = try PrivateZap.decrypt(zapRequest: note, with: key) }
    }
}
