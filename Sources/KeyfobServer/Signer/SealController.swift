import Foundation
import Hummingbird
import KeyfobStore
import Nostr
import WebAuthn

/// Sealing the nostr key with the user's passkeys (PRF), and undoing it. Both need a session and
/// an assertion made for the action (`/api/confirmations`, `key.seal` / `key.unseal`, whose options
/// carry the PRF input) from a passkey the account had before the session signed in.
///
///     POST /api/signer/seal   {cred, prfOutput?}  not sealed: seal under a new data key, wrapped
///                                                  for this passkey; sealed: wrap it for this passkey too
///     POST /api/signer/unseal {cred, prfOutput?}  back to server-protected; every wrap removed
struct SealController: Sendable {
    let sessions: Sessions
    let ceremonies: CeremonyController
    let custody: KeyCustody
    let dispatcher: SignerDispatcher
    let store: any KeyfobStore
    let configuration: ServerConfiguration
    let now: @Sendable () -> Date

    func addRoutes(to router: Router<KeyfobRequestContext>) {
        router.post("/api/signer/seal", use: seal)
        router.post("/api/signer/unseal", use: unseal)
    }

    struct Body: Decodable {
        var cred: AuthenticationCredential
        var prfOutput: String?
    }

    /// The session, the body's verified passkey and its PRF output (nil when it gave none).
    private func proven(_ request: Request, context: KeyfobRequestContext, _ action: ActionConfirmations.Action)
        async throws -> (Sessions.Authenticated, CredentialRecord, [UInt8]?, SignerCaller) {
        let auth = try await sessions.require(request)
        let body = try await request.decodeJSON(Body.self, limit: configuration.maxBodySize)
        let prf = try CeremonyController.prfOutput(body.prfOutput, body.cred.clientExtensionResults)
        let credential = try await ceremonies.confirmations.verify(body.cred, action, target: "", for: auth)
        let caller = SignerCaller(userID: auth.user.id, username: auth.user.username, client: "api", transport: "rest",
                                  limitKey: Hex.encode(auth.session.tokenHash),
                                  ip: sessions.client.resolve(request, peer: context.remoteAddress), unlock: auth.unlock)
        return (auth, credential, prf, caller)
    }

    static let noPRF = APIError(
        "invalid_request",
        "this passkey gave no PRF output: its authenticator cannot seal keys (try a passkey from a platform or security key that supports PRF)")

    @Sendable func seal(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let (auth, credential, prf, caller) = try await proven(request, context: context, .seal)
        guard let prf else {
            await dispatcher.audit(caller, method: "seal_key", outcome: "failed", code: "invalid_request")
            throw Self.noPRF
        }
        let userID = auth.user.id
        let current = try await custody.record(for: userID)
        if !current.passkeySealed {
            let key = try custody.open(current, dataKey: nil)
            var dataKey = PasskeySeal.newDataKey()
            defer { wipe(&dataKey) }
            let next = try custody.seal(key, userID: userID, version: current.version + 1, dataKey: dataKey)
            let wrap = KeyWrapRecord(userID: userID, credentialID: credential.id,
                                     wrapped: try PasskeySeal.wrap(dataKey, prfOutput: prf, userID: userID, credentialID: credential.id),
                                     createdAt: now())
            let copy = try PasskeySeal.sessionCopy(of: dataKey, token: auth.token, tokenHash: auth.session.tokenHash)
            do {
                try await store.changeKeyProtection(next, expectedVersion: current.version, wraps: [wrap],
                                                    keepingSession: auth.session.tokenHash, sessionDataKey: copy)
            } catch StoreError.conflict {
                throw APIError("invalid_request", "the key changed at the same time; reload and try again", status: .conflict)
            }
        } else {
            // Already sealed: this passkey joins the seal, with the data key the session holds
            // (or that this passkey's own wrap gives, when it is one of the sealing passkeys).
            var dataKey: [UInt8]
            if let held = auth.unlock.dataKey(at: now()) {
                dataKey = held
            } else if let opened = try await custody.dataKey(userID: userID, credentialID: credential.id, prfOutput: prf) {
                dataKey = opened
                _ = try await custody.hold(dataKey, in: auth)
            } else {
                await dispatcher.audit(caller, method: "seal_key", outcome: "failed", code: "signer_locked")
                throw APIError.signerSealed
            }
            defer { wipe(&dataKey) }
            let wrapped = try PasskeySeal.wrap(dataKey, prfOutput: prf, userID: userID, credentialID: credential.id)
            _ = try await store.putKeyWrap(KeyWrapRecord(userID: userID, credentialID: credential.id, wrapped: wrapped,
                                                         createdAt: now()))
        }
        await dispatcher.audit(caller, method: "seal_key", outcome: "approved")
        return jsonResponse(try await custody.protection(of: userID, unlock: nil))
    }

    @Sendable func unseal(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let (auth, credential, prf, caller) = try await proven(request, context: context, .unseal)
        let userID = auth.user.id
        let current = try await custody.record(for: userID)
        guard current.passkeySealed else { return jsonResponse(try await custody.protection(of: userID, unlock: nil)) }
        var dataKey: [UInt8]
        if let held = auth.unlock.dataKey(at: now()) {
            dataKey = held
        } else if let prf, let opened = try await custody.dataKey(userID: userID, credentialID: credential.id, prfOutput: prf) {
            dataKey = opened
        } else {
            await dispatcher.audit(caller, method: "unseal_key", outcome: "failed", code: "signer_locked")
            throw APIError.signerSealed
        }
        defer { wipe(&dataKey) }
        let key = try custody.open(current, dataKey: dataKey)
        let next = try custody.seal(key, userID: userID, version: current.version + 1, dataKey: nil)
        do {
            try await store.changeKeyProtection(next, expectedVersion: current.version, wraps: [], keepingSession: nil,
                                                sessionDataKey: nil)
        } catch StoreError.conflict {
            throw APIError("invalid_request", "the key changed at the same time; reload and try again", status: .conflict)
        }
        await dispatcher.audit(caller, method: "unseal_key", outcome: "approved")
        return jsonResponse(try await custody.protection(of: userID, unlock: nil))
    }
}

/// How a user's key is protected, for `/session`, the account page and the seal endpoints.
struct KeyProtection: Encodable, Sendable {
    /// `passkeys` (sealed by the user's passkeys) or `server` (the master key alone).
    let level: String
    /// How many passkeys can open the sealed key (0 when server-protected).
    let sealedBy: Int
    /// "sealed by 2 passkeys" or "server-protected".
    let summary: String
    /// Base64url ids of the passkeys that can open it.
    let sealingCredentials: [String]
    /// Sealed, and the asking session cannot open it now (nil when no session was asked about).
    let signerSealed: Bool?
}

extension KeyCustody {
    /// The data key, opened with one passkey's PRF output and its wrap; nil when that passkey
    /// has no wrap or the output does not open it. The caller wipes it.
    func dataKey(userID: String, credentialID: [UInt8], prfOutput: [UInt8]) async throws -> [UInt8]? {
        guard let wrap = try await store.keyWraps(ofUser: userID).first(where: { $0.credentialID == credentialID }) else { return nil }
        return PasskeySeal.unwrap(wrap.wrapped, prfOutput: prfOutput, userID: userID, credentialID: credentialID)
    }

    /// Gives a signed-in session its copy of the data key (a sealing passkey was just proven);
    /// returns the unlock that now opens the key.
    func hold(_ dataKey: [UInt8], in auth: Sessions.Authenticated) async throws -> SessionUnlock {
        var session = auth.session
        session.dataKey = try PasskeySeal.sessionCopy(of: dataKey, token: auth.token, tokenHash: session.tokenHash)
        try await store.setSessionDataKey(tokenHash: session.tokenHash, dataKey: session.dataKey)
        return SessionUnlock(token: auth.token, session: session)
    }

    /// Whether `unlock` can open the user's key now: always, unless it is passkey-sealed and the
    /// session holds no data key.
    func canOpen(_ userID: String, unlock: SessionUnlock?) async throws -> Bool {
        guard try await record(for: userID).passkeySealed else { return true }
        guard var dataKey = unlock?.dataKey(at: now()) else { return false }
        wipe(&dataKey)
        return true
    }

    func protection(of userID: String, unlock: SessionUnlock?) async throws -> KeyProtection {
        let record = try await record(for: userID)
        guard record.passkeySealed else {
            return KeyProtection(level: "server", sealedBy: 0, summary: "server-protected", sealingCredentials: [],
                                 signerSealed: unlock.map { _ in false })
        }
        let wraps = try await store.keyWraps(ofUser: userID)
        var open: Bool?
        if let unlock {
            var dataKey = unlock.dataKey(at: now())
            open = dataKey != nil
            if dataKey != nil { wipe(&dataKey!) }
        }
        return KeyProtection(level: "passkeys", sealedBy: wraps.count,
                             summary: "sealed by \(wraps.count) passkey\(wraps.count == 1 ? "" : "s")",
                             sealingCredentials: wraps.map { Base64URL.encode($0.credentialID) },
                             signerSealed: open.map { !$0 })
    }
}
