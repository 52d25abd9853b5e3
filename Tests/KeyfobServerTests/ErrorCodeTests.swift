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

    /// The redirect flows answer in their own spec's codes: every server code maps onto one of
    /// DIP-05's six and one of NIP-155's eight, the ones they share as they are, and a failure on
    /// the server's side (the database away) is the spec's internal error, not the app's mistake.
    @Test func everyCodeMapsOntoDIP05sAndNIP155sOwnCodes() {
        let dip05 = ["user_rejected", "invalid_content", "invalid_callback", "unsupported_type", "invalid_pubkey", "internal_error"]
        let nip155 = [
            "user_cancelled", "permission_denied", "invalid_request", "unsupported_method", "payload_too_large", "not_logged_in",
            "rate_limited", "internal_error",
        ]
        for code in ErrorCode.allCases {
            #expect(dip05.contains(SignerCodec.dip05Code(code.rawValue)), "\(code) → \(SignerCodec.dip05Code(code.rawValue))")
            #expect(nip155.contains(SignerCodec.nip155Code(code.rawValue)), "\(code) → \(SignerCodec.nip155Code(code.rawValue))")
            if dip05.contains(code.rawValue) { #expect(SignerCodec.dip05Code(code.rawValue) == code.rawValue) }
            if nip155.contains(code.rawValue) { #expect(SignerCodec.nip155Code(code.rawValue) == code.rawValue) }
        }
        for code in [ErrorCode.internalError, .storeUnavailable] {
            #expect(SignerCodec.dip05Code(code.rawValue) == "internal_error")
            #expect(SignerCodec.nip155Code(code.rawValue) == "internal_error")
        }
        #expect(SignerCodec.nip155Code(ErrorCode.userRejected.rawValue) == "user_cancelled")
        #expect(SignerCodec.nip155Code(ErrorCode.signerLocked.rawValue) == "not_logged_in")
    }
}
