import Foundation
import KeyfobCodecs
import WebAuthn

// libFuzzer entry point: every WebAuthn parser on the same bytes, then the
// bytes as authenticator data of an assertion. Build and run: README "Fuzzing".
// In a normal build this is an empty program.

private let relyingParty = RelyingParty(id: "localhost", name: "fuzz", origins: ["http://localhost:8080"])

@_cdecl("LLVMFuzzerTestOneInput")
public func webAuthnFuzz(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = size == 0 || data == nil ? [] : Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? CBORDecoder.decode(bytes)
    _ = try? AttestationObject(bytes: bytes)
    _ = try? AuthenticatorData(bytes: bytes)
    _ = try? CredentialPublicKey(cose: bytes)
    _ = try? CollectedClientData.parse(bytes)
    let credential = RegistrationCredential(
        id: "AAAA", rawId: "AAAA",
        response: .init(
            clientDataJSON: Base64URL.encode(Array(#"{"type":"webauthn.create","challenge":"AAAA","origin":"http://localhost:8080"}"#.utf8)),
            attestationObject: Base64URL.encode(bytes)))
    _ = try? relyingParty.verifyRegistration(credential, challenge: [0, 0, 0], requireUserVerification: false)
    // The bytes as a request body whose fields carry assertions (an approval's `assertion`, an
    // account change's `confirmation`, a sign-in's `cred`): decoded as the server decodes them,
    // with JSONDecoder, which throws on every shape.
    _ = try? JSONDecoder().decode(AssertionBody.self, from: Data(bytes))
    return 0
}

private struct AssertionBody: Decodable {
    var remember: String?
    var assertion: AuthenticationCredential?
    var confirmation: AuthenticationCredential?
    var cred: AuthenticationCredential?
}
