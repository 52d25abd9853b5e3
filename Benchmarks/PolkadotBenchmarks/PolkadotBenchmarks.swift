import Benchmark
import Polkadot

// What one Polkadot approval costs in the signer, beside schnorrkel itself (`compare.sh` times
// py-sr25519-bindings, Rust schnorrkel behind a thin binding, in the same run).

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal], maxDuration: .seconds(3), maxIterations: 1_000_000)

    let seed = [UInt8](repeating: 7, count: 32)
    let sr = try! SubstrateKey(type: .sr25519, seed: seed)
    let ed = try! SubstrateKey(type: .ed25519, seed: seed)
    let ecdsa = try! SubstrateKey(type: .ecdsa, seed: seed)
    // Polkadot's balances.transferKeepAlive as polkadot-js's extension receives it.
    let json: [String: Any] = [
        "address": sr.address(prefix: 0),
        "blockHash": "0xde8f69eeb5e065e18c6950ff708d7e551f68dc9bf59a07c52367c0280f805ec7", "blockNumber": "0x00231d30",
        "era": "0x0703", "genesisHash": "0x91b171bb158e2d3848fa23a9f1c25182fb8e20313b2c1eb49219da7a70ce90c3",
        "method": "0x0503008eaf04151687736326c9fea17e25fc5287613693c912909cb226aa4794f26a480700e40b5402",
        "nonce": "0x00000005",
        "signedExtensions": [
            "CheckNonZeroSender", "CheckSpecVersion", "CheckTxVersion", "CheckGenesis", "CheckMortality", "CheckNonce",
            "CheckWeight", "ChargeTransactionPayment", "PrevalidateAttests", "CheckMetadataHash",
        ],
        "specVersion": "0x000f4dfc", "tip": "0x00000000000000000000000000000000", "transactionVersion": "0x0000001a",
        "version": 4, "mode": 0,
    ]
    let payload = try! SignerPayload(json: json).signingBytes
    let signature = sr.sign(payload)

    Benchmark("signing payload from SignerPayloadJSON") { b in
        for _ in b.scaledIterations { blackHole(try! SignerPayload(json: json).signingBytes) }
    }
    Benchmark("sr25519 sign (payload)") { b in for _ in b.scaledIterations { blackHole(sr.sign(payload)) } }
    Benchmark("sr25519 verify (payload)") { b in
        for _ in b.scaledIterations {
            blackHole(SubstrateKey.verify(type: .sr25519, signature: signature, message: payload, publicKey: sr.publicKey))
        }
    }
    Benchmark("ed25519 sign (payload)") { b in for _ in b.scaledIterations { blackHole(ed.sign(payload)) } }
    Benchmark("ecdsa sign (payload, BLAKE2b-256, recoverable)") { b in for _ in b.scaledIterations { blackHole(ecdsa.sign(payload)) } }
    // The server opens the stored secret for every approval.
    let stored = sr.exposedSecret()
    Benchmark("sr25519 key from its stored secret") { b in
        for _ in b.scaledIterations { blackHole(try! SubstrateKey(type: .sr25519, storedSecret: stored)) }
    }
}
