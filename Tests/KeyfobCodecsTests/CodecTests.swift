import Foundation
import KeyfobCodecs
import Testing

/// The codec floor both cores and the server read with: each codec agrees with Foundation where
/// both read, and refuses what it must (`PlainJSON` has its own suite in WebAuthnTests, beside
/// the sign-in bodies it reads; form decoding is held to `URLSearchParams` in QueryInteropTests).
@Suite struct CodecTests {
    @Test func hexRoundTripsAndIsStrict() {
        let bytes = (0..<256).map { UInt8($0) }
        #expect(Hex.decode(Hex.encode(bytes)) == bytes)
        #expect(Hex.encode([0xAB, 0x01]) == "ab01" && Hex.decode("AB01") == [0xAB, 0x01])
        for bad in ["a", "0g", "zz", " 00", "0x00"] { #expect(Hex.decode(bad) == nil, "\(bad)") }
    }

    @Test func base64URLAgreesWithFoundationAtEveryLength() {
        var state: UInt64 = 42
        for length in 0..<70 {
            let bytes = (0..<length).map { _ -> UInt8 in
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return UInt8(truncatingIfNeeded: state >> 33)
            }
            let standard = Data(bytes).base64EncodedString()
            let url = standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
            #expect(Base64URL.encode(bytes) == url)
            #expect(Base64URL.decode(url) == bytes && Base64URL.decode(standard) == bytes)
        }
        for bad in ["a", "ab$c", "ab c", "a===", "abc=d"] { #expect(Base64URL.decode(bad) == nil, "\(bad)") }
    }

    @Test func formDecodingReadsPlusAsSpaceAndRefusesBrokenUTF8() throws {
        let items = try #require(FormURLEncoded.items("a=1+2&b=%2B&c&d=%E2%9C%93"))
        #expect(items.map(\.name) == ["a", "b", "c", "d"] && items.map(\.value) == ["1 2", "+", "", "✓"])
        #expect(FormURLEncoded.items("a=%FF") == nil)
    }
}
