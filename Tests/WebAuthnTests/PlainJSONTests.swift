import Foundation
import TestSupport
import Testing

@testable import KeyfobCodecs
@testable import WebAuthn

/// `PlainJSON` skips Foundation on a sign-in's hot path. It may answer nil for anything (the caller
/// then uses Foundation); what it must never do is read bytes differently from Foundation. These
/// tests hold it to that on hand-picked inputs and on thousands of mutations of real ones.
@Suite struct PlainJSONTests {
    static let clientData =
        #"{"type":"webauthn.get","challenge":"dHdlRlZqTlNmYW9Fc2JzZS1GWWFwMURmVFE2d1ZscllpaU1pSGEyQkxYSQ","origin":"https://keyfob.example","crossOrigin":false,"other_keys_can_be_added_here":"do not compare clientDataJSON against a template. See https://goo.gl/yabPex"}"#
    static let signInBody = #"""
        {"challengeKey": "RjTBAHKYbeZVR30", "cred": {"id": "tXBm3OSQw0Ewv7ORmIxmiA", "rawId": "tXBm3OSQw0Ewv7ORmIxmiA", "type": "public-key", "authenticatorAttachment": "platform", "response": {"clientDataJSON": "eyJ0eXBlIjogIndlYmF1dGhuLmdldCJ9", "authenticatorData": "SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFAAAAAA", "signature": "MEYCIQCPVS2EpDpcZV8UVeau3IZGpcFzU0rmn9JZqiOD4a2cmwIhAJWxcB_6HEWxoDBVP1M4Xy-lUVuCjHhpcKGFgmHK4jlc", "userHandle": "hb4fa9uhU9_5XpPNoqZm19g6EU61w3pBA-hXZaITNvc"}, "clientExtensionResults": {}}}
        """#

    @Test func readsThePlainShape() throws {
        let object = try #require(PlainJSON.parse(Array(#" { "a" : "x y/z" , "b":true,"c":false,"d":null,"e":{"f":{}} } "#.utf8)))
        #expect(object.string("a") == "x y/z")
        #expect(object["b"] == .bool(true) && object["c"] == .bool(false) && object["d"] == .null)
        #expect(object.object("e")?.object("f") == PlainJSON(members: []))
        #expect(object.optionalString("a") == .some("x y/z") && object.optionalString("d") == .some(nil))
        #expect(object.optionalString("missing") == .some(nil) && object.optionalString("b") == nil)
    }

    @Test func leavesEveryOtherShapeToFoundation() {
        let others = [
            #"{"a":1}"#, #"{"a":[]}"#, #"{"a":"\n"}"#, #"{"a":"\u0041"}"#, "{\"a\":\"é\"}", "\u{FEFF}{}",
            #"{"a":"x","a":"y"}"#, #"{"a":{"b":{"c":{"d":{}}}}}"#, #"{} {}"#, #"{"a":"x",}"#, #"{"a":"x""#,
            #"{"a" "x"}"#, #"{"a":tru}"#, #"{"a":truex}"#, #"["a"]"#, #""a""#, "{\"a\":\"\t\"}", "", "{",
            "{" + (0..<17).map { #""k\#($0)":null"# }.joined(separator: ",") + "}",
        ]
        for text in others { #expect(PlainJSON.parse(Array(text.utf8)) == nil, "\(text)") }
        // At the limits, still read.
        #expect(PlainJSON.parse(Array(#"{"a":{"b":{"c":{}}}}"#.utf8)) != nil)
        #expect(PlainJSON.parse(Array(("{" + (0..<16).map { #""k\#($0)":null"# }.joined(separator: ",") + "}").utf8)) != nil)
    }

    /// Every input `PlainJSON` reads, Foundation reads to the same values; client data and sign-in
    /// bodies read either way give the same result or the same error.
    @Test func agreesWithFoundationOnMutationsOfRealInputs() throws {
        var generator = SplitMix(seed: 0x504c_4149_4e4a_534f)
        let alphabet = Array(#"{}[]":,\ tfnrue0189aZ/-"#.utf8) + [0x09, 0x0A, 0x00, 0x10, 0x1F, 0x7F, 0x80, 0xC3, 0xA9]
        var read = 0
        for seed in [
            Self.clientData, Self.signInBody,
            #"{"type":"webauthn.get","challenge":"x","origin":"o","crossOrigin":true,"topOrigin":null,"tokenBinding":{"status":"present","id":"i"}}"#,
        ] {
            for round in 0..<4000 {
                var bytes = Array(seed.utf8)
                for _ in 0...(round % 4) {
                    let at = Int.random(in: 0..<bytes.count, using: &generator)
                    let byte = alphabet.randomElement(using: &generator)!
                    switch Int.random(in: 0..<3, using: &generator) {
                    case 0: bytes[at] = byte
                    case 1: bytes.insert(byte, at: at)
                    default: if bytes.count > 1 { bytes.remove(at: at) }
                    }
                }
                guard let plain = PlainJSON.parse(bytes) else { continue }
                read += 1
                let foundation = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
                let text = String(decoding: bytes, as: UTF8.self)
                #expect(foundation.map { Self.same(.object(plain), $0) } == true, "\(text)")
                #expect(
                    Self.result { try CollectedClientData.parse(plain: plain) } == Self.result { try CollectedClientData.parseWithFoundation(bytes) },
                    "\(text)")
                if let credential = plain.object("cred").flatMap(AuthenticationCredential.init(plain:)) {
                    #expect(credential == (try? JSONDecoder().decode(Body.self, from: Data(bytes)))?.cred, "\(text)")
                }
            }
        }
        #expect(read > 2000)  // most single mutations keep the plain shape; the check above is not idle
    }

    @Test func aSignInBodyReadsAsJSONDecoderReadsIt() throws {
        let bytes = Array(Self.signInBody.utf8)
        let credential = try #require(PlainJSON.parse(bytes)?.object("cred").flatMap(AuthenticationCredential.init(plain:)))
        #expect(credential == (try JSONDecoder().decode(Body.self, from: Data(bytes))).cred)
        #expect(credential.clientExtensionResults == ClientExtensionResults())
        // PRF results among the extensions are left to JSONDecoder.
        let withPRF = Self.signInBody.replacingOccurrences(
            of: #""clientExtensionResults": {}"#, with: #""clientExtensionResults": {"prf": {"results": {"first": "AAAA"}}}"#)
        #expect(PlainJSON.parse(Array(withPRF.utf8))?.object("cred").flatMap(AuthenticationCredential.init(plain:)) == nil)
    }

    struct Body: Decodable { var cred: AuthenticationCredential }

    static func result(_ parse: () throws -> CollectedClientData) -> String {
        do { return "\(try parse())" } catch { return "error: \(error)" }
    }

    /// Whether Foundation's value is the same JSON as `plain`'s.
    static func same(_ plain: PlainJSON.Value, _ foundation: Any) -> Bool {
        switch plain {
        case .string(let text): return (foundation as? String) == text
        case .null: return foundation is NSNull
        case .bool(let value):
            guard let number = foundation as? NSNumber, ["c", "B"].contains(String(cString: number.objCType)) else { return false }
            return number.boolValue == value
        case .object(let object):
            guard let dictionary = foundation as? [String: Any], dictionary.count == object.members.count else { return false }
            return object.members.allSatisfy { member in dictionary[member.key].map { same(member.value, $0) } ?? false }
        }
    }
}
