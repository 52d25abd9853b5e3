import Foundation
import KeyfobCodecs
import TestSupport
import Testing

@testable import Nostr

/// 100,000 random and mutated inputs through every decoder and decrypt function.
/// Typed throws guarantee only `NostrError` comes out; this shows nothing traps or hangs.
@Suite struct NostrRobustnessTests {
    static func mutate(_ s: String, _ rng: inout SplitMix) -> String {
        var b = Array(s.utf8)
        let alphabet = Array(#"{}[]":,\%&?=_-+/0123456789abcdefxyzAZ#~ "#.utf8) + [0x00, 0x7f, 0xc3, 0xa9, 0xff]
        for _ in 0...(rng.next() % 3) {
            switch rng.next() % 6 {
            case 0 where !b.isEmpty: b[Int(rng.next() % UInt64(b.count))] = alphabet[Int(rng.next() % UInt64(alphabet.count))]
            case 1: b.insert(alphabet[Int(rng.next() % UInt64(alphabet.count))], at: Int(rng.next() % UInt64(b.count + 1)))
            case 2 where !b.isEmpty: b.remove(at: Int(rng.next() % UInt64(b.count)))
            case 3: b = Array(b.prefix(Int(rng.next() % UInt64(b.count + 1))))
            case 4: b = (0..<Int(rng.next() % 80)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            default: if !b.isEmpty { let i = Int(rng.next() % UInt64(b.count)); b.insert(contentsOf: b[i...].prefix(16), at: i) }
            }
        }
        return String(decoding: b, as: UTF8.self)
    }

    @Test func hundredThousandMutatedInputs() throws {
        let alice = try SecretKey(hex: "0000000000000000000000000000000000000000000000000000000000000001")
        let bob = try SecretKey(hex: "0000000000000000000000000000000000000000000000000000000000000002")
        let zap = try NostrVectors.json("generated_nip57_private_zap.json")["vectors"] as! [[String: Any]]
        let zapJSON = String(decoding: try NostrVectors.jsonBytes(zap[0]["zap_request"]!), as: UTF8.self)
        let seeds: [String] = [
            try NIP44.encrypt("hello there", from: alice, to: bob.publicKey),
            try NIP04.encrypt("hello there", from: alice, to: bob.publicKey),
            UnsignedEvent(createdAt: 1, kind: 1, tags: [["e", "x"]], content: "hi").sign(with: alice).json,
            zapJSON,
            NIP19.npub(alice.publicKey), NIP19.nprofile(alice.publicKey, relays: ["wss://r"]),
            "ncryptsec1qgg9947rlpvqu76pj5ecreduf9jxhselq2nae2kghhvd5g7dgjtcxfqtd67p9m0w57lspw8gsq6yphnm8623nsl8xn9j4jdzz84zm3frztj3z7s35vpzmqf6ksu8r89qk5z2zxfmu5gv8th8wclt0h4p",
            "nostrsigner:%7B%22kind%22%3A1%7D?type=sign_event&callbackUrl=primal%3A%2F%2Fnostrsigner&returnType=event&compressionType=gzip",
            "nostrsigner://nip44_decrypt?type=nip44_decrypt&encryptedText=abc&pubkey=\(bob.publicKey.hex)&x-success=app://ok&id=1",
            "https://k.example/app/sign?payload=eyJraW5kIjoxfQ&cb=https%3A%2F%2Fc.example%2Fcb&origin=c",
            "Signer1" + SignerCodec.gzipBase64(#"{"kind":1}"#),
        ]
        var rng = SplitMix(seed: 0x6e6f_7374_72)
        var accepted = 0
        func attempt(_ body: () throws(NostrError) -> Void) { if (try? body()) != nil { accepted += 1 } }
        for i in 0..<100_000 {
            let input = Self.mutate(seeds[i % seeds.count], &rng)
            let bytes = Array(input.utf8)
            switch i % seeds.count {
            case 0: attempt { () throws(NostrError) in _ = try NIP44.decrypt(input, with: bob, from: alice.publicKey) }
            case 1: attempt { () throws(NostrError) in _ = try NIP04.decrypt(input, with: bob, from: alice.publicKey) }
            case 2:
                attempt { () throws(NostrError) in _ = try Event.parse(json: bytes).isValid }
                attempt { () throws(NostrError) in _ = try UnsignedEvent.parse(json: bytes, now: 0) }
            case 3:
                if let request = try? Event.parse(json: bytes) {
                    attempt { () throws(NostrError) in _ = try PrivateZap.decrypt(zapRequest: request, with: bob) }
                }
            case 4, 5: attempt { () throws(NostrError) in _ = try NIP19.decode(input) }
            case 6 where i % 100 == 6: attempt { () throws(NostrError) in _ = try NIP49.decrypt(input, password: "nostr") }
            case 7, 8: attempt { () throws(NostrError) in _ = try SignerCodec.parse(nostrsignerURL: input) }
            case 9: attempt { () throws(NostrError) in _ = try SignerCodec.parse(keyfobURL: input) }
            case 10: attempt { () throws(NostrError) in _ = try SignerCodec.gunzipBase64(input, prefix: "Signer1") }
            default: _ = Bech32.decode(input); _ = Hex.decode(input)
            }
        }
        #expect(accepted < 60_000)
    }
}
