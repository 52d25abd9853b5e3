import Foundation
import KeyfobCodecs
import Testing

@testable import Nostr

@Suite struct BIP340Tests {
    struct Row: Sendable, CustomStringConvertible {
        let index: String, secret: String, pubkey: String, aux: String, message: String, signature: String, valid: Bool
        var description: String { "vector \(index)" }
    }

    static let rows: [Row] = {
        let text = (try? NostrVectors.text("bip340-test-vectors.csv")) ?? ""
        return text.split(whereSeparator: \.isNewline).dropFirst().map { line in
            let f = line.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            return Row(index: f[0], secret: f[1], pubkey: f[2], aux: f[3], message: f[4], signature: f[5], valid: f[6] == "TRUE")
        }
    }()

    @Test func allNineteenVectorsAreThere() { #expect(Self.rows.count == 19) }

    @Test(arguments: rows)
    func vector(_ row: Row) throws {
        let message = hex(row.message)
        if !row.secret.isEmpty {
            let key = try SecretKey(hex: row.secret)
            #expect(key.publicKey.hex == row.pubkey.lowercased())
            #expect(Hex.encode(key.sign(message, auxiliaryRandomness: hex(row.aux))) == row.signature.lowercased())
        }
        let verified = (try? PublicKey(hex: row.pubkey)).map { $0.isValidSignature(hex(row.signature), for: message) } ?? false
        #expect(verified == row.valid)
    }

    @Test func freshSignaturesUseFreshRandomnessAndVerify() {
        let key = SecretKey.generate()
        let message = [UInt8](repeating: 1, count: 32)
        let a = key.sign(message), b = key.sign(message)
        #expect(a != b)
        #expect(key.publicKey.isValidSignature(a, for: message) && key.publicKey.isValidSignature(b, for: message))
    }

    @Test func secretKeysNeverPrintThemselves() throws {
        let key = try SecretKey(hex: "0000000000000000000000000000000000000000000000000000000000000003")
        #expect("\(key)" == "SecretKey(<redacted>)")
        #expect(throws: NostrError.self) { _ = try SecretKey(bytes: [UInt8](repeating: 0, count: 32)) }
        #expect(throws: NostrError.self) { _ = try SecretKey(bytes: [UInt8](repeating: 0xff, count: 32)) }
    }

    @Test func publicKeysMustBeOnTheCurve() {
        #expect(throws: NostrError.self) { _ = try PublicKey(hex: String(repeating: "f", count: 64)) }
        #expect(throws: NostrError.self) { _ = try PublicKey(hex: "abc") }
        #expect(throws: NostrError.self) { _ = try PublicKey(hex: String(repeating: "g", count: 64)) }
        #expect((try? PublicKey(hex: "F9308A019258C31049344F85F89D5229B531C845836F99B08601F113BCE036F9")) != nil)
    }
}

@Suite struct NIP01Tests {
    @Test func specEventsVerifyAndEditedOnesDoNot() throws {
        let v = try NostrVectors.json("nip01_events_from_specs.json")
        let valid = v["valid"] as! [[String: Any]], invalid = v["invalid"] as! [[String: Any]]
        #expect(valid.count == 9 && invalid.count == 17)
        for item in valid {
            let event = try Event.parse(json: NostrVectors.jsonBytes(item["event"]!))
            #expect(event.isValid, "\(item["path"]!)")
            // Re-serializing gives the same id: the serializer matches the network's.
            #expect(event.unsigned.id(pubkey: event.pubkey) == event.id)
        }
        for item in invalid {
            // Parsing may already refuse it; if it parses, it must not be valid.
            if let event = try? Event.parse(json: NostrVectors.jsonBytes(item["event"]!)) {
                #expect(!event.isValid, "\(item["path"]!) must be rejected")
            }
        }
    }

    @Test func serializationEscapesExactlyAsNIP01Says() throws {
        let v = try NostrVectors.json("generated_nip01_serialization.json")
        for item in v["valid"] as! [[String: Any]] {
            let e = item["event"] as! [String: Any]
            let serialized = Event.serialize(
                pubkey: e["pubkey"] as! String, createdAt: Int64(e["created_at"] as! Int),
                kind: e["kind"] as! Int, tags: e["tags"] as! [[String]], content: e["content"] as! String)
            #expect(String(decoding: serialized, as: UTF8.self) == item["serialized"] as! String, "\(item["label"]!)")
            let event = try Event.parse(json: NostrVectors.jsonBytes(e))
            #expect(event.isValid, "\(item["label"]!)")
            // Deterministic signing (aux_rand given) reproduces the signature.
            let key = try SecretKey(hex: item["seckey"] as! String)
            let signed = event.unsigned.sign(with: key)
            #expect(Hex.encode(signed.id) == e["id"] as! String)
            #expect(Hex.encode(key.sign(signed.id, auxiliaryRandomness: hex(item["aux_rand"] as! String))) == e["sig"] as! String)
        }
        for item in v["invalid"] as! [[String: Any]] {
            let event = try Event.parse(json: NostrVectors.jsonBytes(item["event"]!))
            #expect(!event.isValid, "an id computed over \\/ must be rejected")
        }
    }

    @Test func signingIgnoresClientIdAndPubkeyAndFillsDefaults() throws {
        let key = SecretKey.generate()
        let json = #"{"kind":1,"content":"hi /","id":"00","pubkey":"ff","sig":"zz"}"#
        let unsigned = try UnsignedEvent.parse(json: Array(json.utf8), now: 1_700_000_000)
        #expect(unsigned.createdAt == 1_700_000_000 && unsigned.tags.isEmpty)
        let event = unsigned.sign(with: key)
        #expect(event.pubkey == key.publicKey && event.isValid)
        // The JSON form parses back to the same event.
        #expect(try Event.parse(json: Array(event.json.utf8)) == event)
    }

    @Test func fieldsAreTypeAndRangeChecked() {
        let bad = [
            #"{"content":"x"}"#, #"{"kind":"1","content":"x"}"#, #"{"kind":70000,"content":"x"}"#, #"{"kind":-1,"content":"x"}"#,
            #"{"kind":1.5,"content":"x"}"#, #"{"kind":1}"#, #"{"kind":1,"content":3}"#, #"{"kind":1,"content":"x","tags":[1]}"#,
            #"{"kind":1,"content":"x","tags":[["a",1]]}"#, #"{"kind":1,"content":"x","tags":"no"}"#,
            #"{"kind":1,"content":"x","created_at":-5}"#, #"{"kind":1,"content":"x","created_at":"now"}"#, #"[1]"#, #"nope"#,
            #"{"kind":true,"content":"x"}"#,
        ]
        for json in bad {
            #expect(throws: NostrError.self, "\(json)") { _ = try UnsignedEvent.parse(json: Array(json.utf8), now: 0) }
        }
    }
}

@Suite struct NIP19Tests {
    @Test func keysRoundTrip() throws {
        let v = try NostrVectors.json("nip19.json")
        for item in v["keys"] as! [[String: String]] {
            let entity = try NIP19.decode(item["bech32"]!)
            switch entity {
            case .npub(let key):
                #expect(key.hex == item["hex"]!)
                #expect(NIP19.npub(key) == item["bech32"]!)
            case .nsec(let bytes):
                #expect(Hex.encode(bytes) == item["hex"]!)
                #expect(NIP19.nsec(try SecretKey(bytes: bytes)) == item["bech32"]!)
            default: Issue.record("unexpected \(entity)")
            }
        }
        for item in v["extra_checks"] as! [[String: String]] {
            guard case .nsec(let bytes) = try NIP19.decode(item["bech32"]!) else { Issue.record("not nsec"); continue }
            #expect(Hex.encode(bytes) == item["hex"]!)
        }
        let profile = v["nprofile"] as! [String: Any]
        guard case let .nprofile(key, relays) = try NIP19.decode(profile["bech32"] as! String) else { Issue.record("not nprofile"); return }
        #expect(key.hex == profile["pubkey"] as! String && relays == profile["relays"] as! [String])
        #expect(NIP19.nprofile(key, relays: relays) == profile["bech32"] as! String)
    }

    @Test func noteAndNeventRoundTrip() throws {
        let id = [UInt8](repeating: 0xab, count: 32), author = SecretKey.generate().publicKey
        #expect(try NIP19.decode(NIP19.note(id)) == .note(eventID: id))
        let nevent = NIP19.nevent(id, relays: ["wss://r.example"], author: author, kind: 1)
        #expect(try NIP19.decode(nevent) == .nevent(eventID: id, relays: ["wss://r.example"], author: author, kind: 1))
    }

    @Test func badStringsAreRefused() {
        for s in [
            "npub1", "npub180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w7", "xyz1qqqqqqqq",
            "NPUB180cvv07tjdrrgpa0j7j7tmnyl2yr6yr7l8j4s3evf6u64th6gkwsyjh6w6x", "",
        ] {
            #expect(throws: NostrError.self, "\(s)") { _ = try NIP19.decode(s) }
        }
    }
}

@Suite struct NIP49Tests {
    @Test func theSpecExampleDecrypts() throws {
        let v = try NostrVectors.json("nip49.json")
        let item = (v["decrypt"] as! [[String: Any]])[0]
        let key = try NIP49.decrypt(item["ncryptsec"] as! String, password: item["password"] as! String)
        key.withUnsafeSecretBytes { #expect(Hex.encode($0) == item["seckey"] as! String) }
        #expect(throws: NostrError.self) { _ = try NIP49.decrypt(item["ncryptsec"] as! String, password: "wrong") }
    }

    @Test func passwordsAreNFKCNormalized() throws {
        let nfkc = try NostrVectors.json("nip49.json")["nfkc"] as! [String: Any]
        let input = String(decoding: hex(nfkc["input_utf8"] as! String), as: UTF8.self)
        #expect(Hex.encode(NIP49.normalize(input)) == nfkc["nfkc_utf8"] as! String)
    }

    @Test func encryptThenDecrypt() throws {
        let key = SecretKey.generate()
        let ncryptsec = try NIP49.encrypt(key, password: "correct horse", logN: 10)
        #expect(ncryptsec.hasPrefix("ncryptsec1"))
        #expect(try NIP49.decrypt(ncryptsec, password: "correct horse").publicKey == key.publicKey)
    }
}
