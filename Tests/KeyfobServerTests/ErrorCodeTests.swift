import Nostr
import Testing
import WebAuthn

@testable import KeyfobServer

/// The WebAuthn and nostr cores keep their own error codes; every one of them must be one of §7's,
/// so the server's mapping (`ErrorCode(rawValue:)`) never falls back to `invalid_request` for a
/// code it forgot. (Polkadot's kinds map through an exhaustive switch: the compiler checks them.)
@Suite struct ErrorCodeTests {
    @Test func everyWebAuthnCodeIsAServerCode() {
        for code in WebAuthnError.Code.allCases {
            #expect(ErrorCode(rawValue: code.rawValue) != nil, "\(code.rawValue)")
        }
    }

    @Test func everyNostrCodeIsAServerCode() {
        for code in NostrError.Code.allCases {
            #expect(ErrorCode(rawValue: code.rawValue) != nil, "\(code.rawValue)")
        }
    }

    @Test func everyCodeHasAClientErrorOrServerStatusAndASentence() {
        for code in ErrorCode.allCases {
            #expect((400...599).contains(code.status.code), "\(code)")
            #expect(code.defaultMessage.count > 10 && !code.defaultMessage.contains("_"), "\(code)")
            #expect("\(code)" == code.rawValue)
        }
    }
}
