import Nostr

// libFuzzer entry point: every nostr decoder and decrypt function on the same bytes.
// Build and run: README "Fuzzing". In a normal build this is an empty program.

private let recipient = try! SecretKey(hex: "0000000000000000000000000000000000000000000000000000000000000002")
private let sender = try! PublicKey(hex: "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798")

@_cdecl("LLVMFuzzerTestOneInput")
public func nostrFuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size == 0 || data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    let text = String(decoding: bytes, as: UTF8.self)
    if let event = try? Event.parse(json: bytes) {
        _ = event.isValid
        _ = try? PrivateZap.decrypt(zapRequest: event, with: recipient)
    }
    _ = try? UnsignedEvent.parse(json: bytes, now: 0)
    _ = try? NIP44.decrypt(text, with: recipient, from: sender)
    _ = try? NIP04.decrypt(text, with: recipient, from: sender)
    _ = try? NIP19.decode(text)
    _ = try? SignerCodec.parse(nostrsignerURL: text)
    _ = try? SignerCodec.parse(keyfobURL: text)
    _ = try? SignerCodec.gunzipBase64(text, prefix: "Signer1")
    // NIP-46 and the relay frames (the bunker's inputs).
    if let request = try? NIP46.Request.parse(text) { _ = request.json }
    _ = try? NIP46.Response.parse(text)
    _ = try? BunkerURL.parse(text)
    _ = try? NostrConnectURL.parse(text)
    if case .request(_, let filters)? = try? ClientMessage.parse(text) {
        let probe = UnsignedEvent(createdAt: 1, kind: NIP46.kind, tags: [["p", sender.hex]], content: "").sign(with: recipient)
        for filter in filters { _ = filter.matches(probe) }
    }
    return 0
}
