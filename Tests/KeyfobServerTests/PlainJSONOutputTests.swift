import Foundation
import KeyfobCodecs
import TestSupport
import Testing

@testable import KeyfobServer

/// A sign-in's answer is written without JSONEncoder when its strings need no escaping: byte for
/// byte what `jsonBytes` (JSONEncoder, sorted keys, ISO 8601 dates) gives, and `jsonBytes` itself
/// whenever a string or a date is outside what the plain writer handles.
@Suite struct PlainJSONOutputTests {
    typealias Answer = CeremonyController.VerifyAuthenticationResponse

    @Test func aSignInAnswerIsWhatJSONEncoderWrites() {
        var generator = SplitMix(seed: 0x5349_474e_494e)
        let names = [
            "alice", "bob.smith", "x", "with space", "a/b", "quote\"d", "back\\slash", "tab\there", "nul\u{0}", "émile", "日本", "del\u{7F}", "",
        ]
        let dates: [Double] = [0, 1.999, -0.5, 951_782_400, 1_795_000_000.9999, 4_102_444_799, 253_402_300_799.5, 253_402_300_800, -62_135_596_800]
        var plain = 0
        for round in 0..<3000 {
            let seconds = round < dates.count ? dates[round] : Double.random(in: -1e9...3e11, using: &generator)
            let answer = Answer(
                verified: true, username: names[round % names.count], isAnonymous: round % 3 == 0,
                token: round % 2 == 0 ? nil : (round % 5 == 0 ? "to\"ken" : "kfs_\(round)"),
                expiresAt: Date(timeIntervalSince1970: seconds), signerSealed: round % 7 == 0)
            #expect(answer.json == jsonBytes(answer), "\(answer)")
            var out = PlainJSONOutput(capacity: 0)
            out.string(answer.username)
            out.date(answer.expiresAt)
            if out.isPlain { plain += 1 }
        }
        #expect(plain > 1000)  // the plain writer, not only the fallback, is what was compared
    }
}
