import Foundation
import Polkadot

// libFuzzer entry point: every Polkadot decoder a dapp or a user reaches, on the same bytes —
// addresses, phrases and paths, signing payloads, runtime metadata and the calls it describes.
// Build and run: README "Fuzzing". In a normal build this is an empty program.

@_cdecl("LLVMFuzzerTestOneInput")
public func polkadotFuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size == 0 || data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)
    _ = SS58.decode(text)
    _ = try? Mnemonic.entropy(of: text)
    _ = PolkadotHex.decode(text)
    _ = RawPayload.wrap(bytes)
    _ = try? SignerPayload(data: bytes).signingBytes
    // Metadata then a call: the first byte says where the call starts.
    if let split = bytes.first.map({ Int($0) }), bytes.count > split + 1 {
        if let metadata = try? RuntimeMetadata(Array(bytes[1..<(bytes.count - split)])) {
            _ = try? CallDecoder(siteMetadata: metadata, ss58Prefix: 0, decimals: 10, token: "DOT").decode(Array(bytes.suffix(split)))
        }
    }
    return 0
}
