import Foundation
import Hummingbird
import KeyfobCodecs
import WebAuthn

/// The sign-in options answer, encoded once. It is the same document for every request but for
/// its challenge and challengeKey — both base64url, which JSON never escapes — so those two are
/// spliced into the bytes `jsonResponse` produced for marker values. Encoding the whole document
/// per request was most of what an options request cost beyond HTTP.
struct SignInOptionsTemplate: Sendable {
    /// Before the first value, between the two, after the second.
    private let pieces: [[UInt8]]
    private let challengeFirst: Bool

    /// Encodes the answer for markers with `encode`; nil when a marker is not found exactly once
    /// (then every request is encoded in full).
    init?(encode: (_ challenge: [UInt8], _ key: String) -> [UInt8]) {
        // 33 bytes of 0xff: 44 underscores in base64url, which nothing else in the document spells.
        let challengeMarker = Array(repeating: "_", count: 44).joined()
        let keyMarker = "KEYFOB-CHALLENGE-KEY-MARKER"
        let bytes = encode(Array(repeating: 0xff, count: 33), keyMarker)
        guard let challenge = Self.onlyRange(of: Array(challengeMarker.utf8), in: bytes),
            let key = Self.onlyRange(of: Array(keyMarker.utf8), in: bytes)
        else { return nil }
        let (first, second) = challenge.lowerBound < key.lowerBound ? (challenge, key) : (key, challenge)
        pieces = [
            Array(bytes[..<first.lowerBound]), Array(bytes[first.upperBound..<second.lowerBound]),
            Array(bytes[second.upperBound...]),
        ]
        challengeFirst = challenge.lowerBound < key.lowerBound
    }

    /// The answer's body for this challenge and key.
    func body(challenge: [UInt8], key: String) -> ByteBuffer {
        let challengeText = Base64URL.encode(challenge)
        let (first, second) = challengeFirst ? (challengeText, key) : (key, challengeText)
        var buffer = ByteBuffer()
        buffer.reserveCapacity(pieces[0].count + pieces[1].count + pieces[2].count + first.utf8.count + second.utf8.count)
        buffer.writeBytes(pieces[0])
        buffer.writeString(first)
        buffer.writeBytes(pieces[1])
        buffer.writeString(second)
        buffer.writeBytes(pieces[2])
        return buffer
    }

    private static func onlyRange(of needle: [UInt8], in haystack: [UInt8]) -> Range<Int>? {
        var found: Range<Int>?
        var start = 0
        while let range = haystack[start...].firstRange(of: needle) {
            guard found == nil else { return nil }
            found = range
            start = range.upperBound
        }
        return found
    }
}
