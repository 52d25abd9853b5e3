import Foundation
import KeyfobCrypto

/// Private zaps (kind 9734 with an `anon` tag), the way Damus and Amethyst make them:
/// the real kind-9733 zap note, NIP-04-encrypted (AES-256-CBC, ECDH x) between an
/// ephemeral key and the recipient, written as bech32 `pzap1…_iv1…` without the 90-character limit.
public enum PrivateZap {
    /// The sender's ephemeral key: SHA-256 of `hex(secret) + hex(target id) + created_at`,
    /// where the target is the zapped note's id, or the recipient's pubkey for a profile zap.
    public static func ephemeralKey(sender: SecretKey, targetID: String, createdAt: Int64) throws(NostrError) -> SecretKey {
        // sha256(hex(secret) ‖ target ‖ created_at), the hex written straight into a buffer this
        // wipes (a String of it could not be wiped).
        let digits = Array("0123456789abcdef".utf8)
        var preimage: [UInt8] = []
        preimage.reserveCapacity(64 + targetID.utf8.count + 20)
        sender.withUnsafeSecretBytes { secret in
            for byte in secret { preimage.append(digits[Int(byte >> 4)]); preimage.append(digits[Int(byte & 0x0f)]) }
        }
        preimage += Array(targetID.utf8) + Array(String(createdAt).utf8)
        defer { wipe(&preimage) }
        var digest = sha256(preimage)
        defer { wipe(&digest) }
        return try SecretKey(bytes: digest)
    }

    /// `decrypt_zap_event`: the inner zap note of a private zap request, as its recipient or its sender.
    public static func decrypt(zapRequest: Event, with key: SecretKey) throws(NostrError) -> Event {
        guard zapRequest.kind == 9734 else { throw .content("a zap request is kind 9734, not \(zapRequest.kind)") }
        guard zapRequest.isValid else { throw .content("zap request id or signature is invalid") }
        guard let anon = zapRequest.tags.first(where: { $0.first == "anon" }) else {
            throw .content("this zap request is not private (no anon tag)")
        }
        guard anon.count >= 2, !anon[1].isEmpty else {
            throw .content("this is an anonymous zap: it carries no message to decrypt")
        }
        let (ciphertext, iv) = try parse(anon[1])
        let eTag = zapRequest.tags.first { $0.first == "e" && $0.count >= 2 }?[1]
        guard let pTag = zapRequest.tags.first(where: { $0.first == "p" && $0.count >= 2 })?[1],
            let recipient = try? PublicKey(hex: pTag)
        else {
            throw .content("zap request has no valid p tag")
        }

        // As the recipient: ECDH with the zap request's (ephemeral) author.
        var note = try? decryptNote(ciphertext, iv, key: key, peer: zapRequest.pubkey)
        // As the sender: re-derive the ephemeral key, ECDH with the recipient.
        if note == nil {
            let ephemeral = try ephemeralKey(sender: key, targetID: eTag ?? pTag, createdAt: zapRequest.createdAt)
            note = try? decryptNote(ciphertext, iv, key: ephemeral, peer: recipient)
        }
        guard let note else { throw .decrypt("this private zap was not sent by or to this key") }
        guard note.kind == 9733 else { throw .decrypt("the private zap note is not kind 9733") }
        guard note.tags.first(where: { $0.first == "e" && $0.count >= 2 })?[1] == eTag,
            note.tags.first(where: { $0.first == "p" && $0.count >= 2 })?[1] == pTag
        else {
            throw .decrypt("the private zap note does not match the zap request's e and p tags")
        }
        guard note.isValid else { throw .decrypt("the private zap note's id or signature is invalid") }
        return note
    }

    private static func decryptNote(_ ciphertext: [UInt8], _ iv: [UInt8], key: SecretKey, peer: PublicKey) throws(NostrError) -> Event {
        let json = try NIP04.decrypt(ciphertext: ciphertext, iv: iv, with: key, from: peer)
        return try Event.parse(json: Array(json.utf8))
    }

    /// `pzap1…_iv1…` → (ciphertext, iv).
    static func parse(_ text: String) throws(NostrError) -> ([UInt8], [UInt8]) {
        let parts = text.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 2,
            let (hrp1, ciphertext) = Bech32.decode(String(parts[0]), maxLength: 64 * 1024), hrp1 == "pzap",
            let (hrp2, iv) = Bech32.decode(String(parts[1])), hrp2 == "iv", iv.count == 16,
            !ciphertext.isEmpty, ciphertext.count % 16 == 0
        else {
            throw .content("anon tag is not a pzap1…_iv1… private zap payload")
        }
        return (ciphertext, iv)
    }

    /// Builds the `anon` tag value (tests and clients).
    public static func encrypt(note: Event, ephemeral: SecretKey, recipient: PublicKey, iv: [UInt8]? = nil) throws(NostrError) -> String {
        var shared = try ephemeral.sharedX(with: recipient)
        defer { wipe(&shared) }
        let iv = iv ?? randomBytes(16)
        guard let ciphertext = Cipher.aes256CBC(encrypt: true, key: shared, iv: iv, input: Array(note.json.utf8)) else {
            throw .init(.internalError, "AES failed")
        }
        return Bech32.encode(hrp: "pzap", data: ciphertext) + "_" + Bech32.encode(hrp: "iv", data: iv)
    }
}
