import Benchmark
import Nostr

// The signer's hot paths. `compare.sh` sets them beside raw libsecp256k1 (raw/secp256k1.c).

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal], maxDuration: .seconds(3), maxIterations: 1_000_000)

    let key = try! SecretKey(hex: "5f16ddf5ce8bfcb52a1fecb4a18d1756e760fe6194a156ab5641efce6e1843d8")
    let peer = try! SecretKey(hex: "0000000000000000000000000000000000000000000000000000000000000002")
    let unsigned = UnsignedEvent(createdAt: 1_700_000_000, kind: 1, tags: [["e", String(repeating: "a", count: 64)], ["p", String(repeating: "b", count: 64)]],
                                 content: "gm nostr, this is a typical short note with a link https://example.com/x")
    let event = unsigned.sign(with: key)
    let kib = String(repeating: "x", count: 1024)
    let nip44 = try! NIP44.encrypt(kib, from: key, to: peer.publicKey)
    let nip04 = try! NIP04.encrypt(kib, from: key, to: peer.publicKey)

    Benchmark("event id + sign") { b in for _ in b.scaledIterations { blackHole(unsigned.sign(with: key)) } }
    Benchmark("event verify (id + signature)") { b in for _ in b.scaledIterations { blackHole(event.isValid) } }
    Benchmark("NIP-44 encrypt 1 KiB") { b in for _ in b.scaledIterations { blackHole(try! NIP44.encrypt(kib, from: key, to: peer.publicKey)) } }
    Benchmark("NIP-44 decrypt 1 KiB") { b in for _ in b.scaledIterations { blackHole(try! NIP44.decrypt(nip44, with: peer, from: key.publicKey)) } }
    Benchmark("NIP-04 encrypt 1 KiB") { b in for _ in b.scaledIterations { blackHole(try! NIP04.encrypt(kib, from: key, to: peer.publicKey)) } }
    Benchmark("NIP-04 decrypt 1 KiB") { b in for _ in b.scaledIterations { blackHole(try! NIP04.decrypt(nip04, with: peer, from: key.publicKey)) } }
}
