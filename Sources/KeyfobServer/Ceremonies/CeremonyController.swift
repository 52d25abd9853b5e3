import Foundation
import HTTPTypes
import Hummingbird
import KeyfobCodecs
import KeyfobCrypto
import KeyfobStore
import Logging
import Nostr
import WebAuthn

/// The four passkey ceremony endpoints of DESIGN.md §2, in the shapes of
/// `specs/passkey-server-ios-guide.md`.
///
///     client                        keyfob                         store
///       | GET  /generate-registration-options?username=alice      |
///       |---------------------------->| insert challenge ---------->|
///       |<---- options + challengeKey-|                             |
///       |  (authenticator creates a passkey)                        |
///       | POST /verify-registration {username, challengeKey, cred}  |
///       |---------------------------->| consume challenge --------->|
///       |                             | verify (WebAuthn §7.1)      |
///       |                             | user+credential+session --->| (one transaction)
///       |<---- {verified, token, ...} + session cookie              |
struct CeremonyController: Sendable {
    let store: any UserStore & SignInStore & SessionStore & KeyWrapStore & AuditStore & CeremonyStore
    let configuration: ServerConfiguration
    let sessions: Sessions
    /// The relying party, decoded keys, challenge consumption and the sign counter.
    let passkeys: PasskeyCheck
    let events: EventLog
    let challenges: ChallengeGenerator
    let custody: KeyCustody
    let limits: ClientLimits
    let now: @Sendable () -> Date
    var metrics = KeyfobMetrics()
    var relyingParty: RelyingParty { passkeys.relyingParty }
    var seal: PasskeySeal { passkeys.seal }
    var keys: CredentialKeyCache { passkeys.keys }
    /// Sign-in options are the same but for two values: encoded once (nil: encode each).
    let signInOptions: SignInOptionsTemplate?
    /// Browsers that finished a ceremony here before (they may use the challenge cap's reserve).
    let device: ReturningDevice
    /// Browsers that signed in to a sealed account: their next sign-in opens the key too.
    let sealedAccount: SealedAccountHint
    /// Passkey confirmations of account changes: challenges issued and consumed like these ceremonies'.
    let confirmations: ActionConfirmations
    /// The challenges of the usual sign-in options: sealed, never stored.
    let signInChallenges: SealedChallenges

    init(
        store: any UserStore & SignInStore & SessionStore & KeyWrapStore & AuditStore & CeremonyStore,
        configuration: ServerConfiguration, sessions: Sessions, passkeys: PasskeyCheck,
        events: EventLog, challenges: ChallengeGenerator, custody: KeyCustody, limits: ClientLimits,
        now: @escaping @Sendable () -> Date, metrics: KeyfobMetrics, device: ReturningDevice, sealedAccount: SealedAccountHint,
        signInChallenges: SealedChallenges
    ) {
        (self.device, self.sealedAccount, self.signInChallenges) = (device, sealedAccount, signInChallenges)
        (self.store, self.configuration, self.sessions, self.passkeys, self.events) = (store, configuration, sessions, passkeys, events)
        (self.challenges, self.custody, self.limits, self.now, self.metrics) = (challenges, custody, limits, now, metrics)
        confirmations = ActionConfirmations(passkeys: passkeys, store: store, custody: custody, limits: limits, now: now)
        let relyingParty = passkeys.relyingParty
        signInOptions = SignInOptionsTemplate { challenge, key in
            jsonBytes(Self.signInAnswer(relyingParty, configuration, challenge: challenge, key: key))
        }
    }

    /// What `GET /generate-authentication-options` answers to a browser that names no sealed
    /// account (`SealedAccountHint`): any passkey, and no PRF, so no PRF output is sent with it.
    static func signInAnswer(
        _ relyingParty: RelyingParty, _ configuration: ServerConfiguration,
        challenge: [UInt8], key: String
    ) -> WithField<RequestOptions> {
        let options = relyingParty.requestOptions(
            challenge: challenge, allowCredentials: [],
            userVerification: configuration.requireUserVerification ? .required : .preferred,
            timeoutSeconds: configuration.challengeTimeout)
        return WithField(options: options, name: .challengeKey, value: key)
    }

    func addRoutes(to router: Router<KeyfobRequestContext>) {
        router.get("/generate-registration-options", use: registrationOptions)
        router.post("/generate-registration-options", use: registrationOptions)
        router.post("/verify-registration", use: verifyRegistration)
        router.get("/generate-authentication-options", use: authenticationOptions)
        router.post("/generate-authentication-options", use: authenticationOptions)
        router.post("/verify-authentication", use: verifyAuthentication)
        router.get("/sealed-account", use: sealedAccountName)
    }

    // MARK: - Registration

    struct OptionsRequest: Decodable {
        var username: String?
        /// Sign-in: the usual options for any account, even in a browser that remembers a sealed one.
        var anyAccount: Bool?
        /// Adding a passkey to one's account: the assertion of `/api/confirmations` for `passkey.add`.
        var confirmation: AuthenticationCredential?
    }

    /// The username from `?username=` or a JSON body `{"username": ...}`.
    func requestedUsername(_ request: Request) async throws -> String? {
        try await optionsRequest(request).username
    }

    /// The options request: its username (trimmed, nil when empty) and confirmation.
    func optionsRequest(_ request: Request) async throws -> OptionsRequest {
        var options = OptionsRequest(username: request.queryValue("username"))
        if request.method == .post {
            let bytes = try await request.bodyBytes(limit: configuration.maxBodySize)
            try request.requireJSONContentType(bodyIsEmpty: bytes.isEmpty)
            if !bytes.isEmpty {
                guard let body = try? JSONDecoder().decode(OptionsRequest.self, from: Data(bytes)) else {
                    throw KeyfobError.invalid("request body must be a JSON object like {\"username\": \"alice\"}")
                }
                options.username = body.username ?? options.username
                options.confirmation = body.confirmation
                options.anyAccount = body.anyAccount
            }
        }
        let trimmed = options.username?.trimmingCharacters(in: .whitespaces) ?? ""
        options.username = trimmed.isEmpty ? nil : trimmed
        return options
    }

    /// Whether to put the session token in a ceremony's JSON: only for a client that asks
    /// (`Keyfob-Session: bearer`) and is not a browser (browsers send `Sec-Fetch-Site`, which page
    /// script cannot remove), so script on a page never reads a token; browsers use the cookie.
    static func returnsToken(_ request: Request) -> Bool {
        guard let asked = request.headers[HTTPField.Name("Keyfob-Session")!], asked.lowercased() == "bearer" else { return false }
        return request.headers[HTTPField.Name("Sec-Fetch-Site")!] == nil
    }

    @Sendable func registrationOptions(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let ip = limits.clientIP(request, context)
        try limits.check(limits.options, ip, now: now())
        let asked = try await optionsRequest(request)
        // One's own account, by the session: anonymous accounts too, whose `anon-` names are
        // reserved for new accounts.
        let own = asked.username != nil ? try await sessions.authenticate(request) : nil
        let username: String?
        if let own, asked.username?.lowercased() == own.user.username.lowercased() {
            username = own.user.username
        } else {
            username = try asked.username.map(Usernames.normalize)
        }
        let challenge = challenges.generate()
        var record: ChallengeRecord
        var exclude: [CredentialDescriptor] = []
        let expires = now().addingTimeInterval(TimeInterval(configuration.challengeTimeout))

        if let username {
            if let existing = try await store.user(named: username) {
                // Adding a passkey to an account needs that account's session and a passkey
                // assertion made for it: a stolen session token alone must not add the thief's passkey.
                guard let auth = own, auth.user.id == existing.id else {
                    throw KeyfobError.usernameTaken(username)
                }
                let held = try await store.credentials(ofUser: existing.id)
                try Self.mayAddPasskey(holding: held.count)  // before the confirmation is spent
                _ = try await confirmations.verify(asked.confirmation, .addPasskey, target: "", for: auth)
                exclude = held.map { CredentialDescriptor(id: $0.id, transports: $0.transports) }
                record = ChallengeRecord(
                    challenge: challenge, ceremony: .registration, key: existing.username,
                    userID: existing.id, username: existing.username,
                    isAnonymous: existing.isAnonymous, existingUser: true, expiresAt: expires)
            } else {
                try limits.check(limits.signUps, ip, now: now())
                record = ChallengeRecord(
                    challenge: challenge, ceremony: .registration, key: username,
                    userID: Base64URL.encode(randomBytes(32)), username: username,
                    expiresAt: expires)
            }
        } else {
            try limits.check(limits.signUps, ip, now: now())
            let generated = Usernames.anonymous()
            record = ChallengeRecord(
                challenge: challenge, ceremony: .registration, key: generated,
                userID: Base64URL.encode(randomBytes(32)), username: generated,
                isAnonymous: true, expiresAt: expires)
        }
        record.algorithms = configuration.algorithms.map(\.rawValue)
        record.clientIP = ip
        record.mayUseReserve = try await mayUseReserve(request)
        try await limits.insert(record, into: store, now: now())

        // What the OS passkey picker shows. An anonymous account's `anon-92ced490b7c6` means nothing
        // to a person: it is shown as "Keyfob account 92ce" (its id's start tells two apart).
        let shownName = Usernames.shown(record.username!, isAnonymous: record.isAnonymous)
        let options = relyingParty.creationOptions(
            challenge: challenge, userID: Base64URL.decode(record.userID!)!, userName: shownName,
            algorithms: configuration.algorithms, excludeCredentials: exclude,
            userVerification: configuration.requireUserVerification ? .required : .preferred,
            timeoutSeconds: configuration.challengeTimeout, prf: PasskeySeal.registrationInputs(challenge: challenge))
        return jsonResponse(WithField(options: options, name: .challengeKey, value: record.key))
    }

    struct VerifyRegistrationRequest: Decodable {
        var username: String?
        var challengeKey: String?
        var cred: RegistrationCredential
        /// The PRF output, base64url, for apps that do not send `clientExtensionResults`.
        var prfOutput: String?
        /// A new account: seal its key with this passkey at once (when it gives a PRF output), so
        /// no server-protected copy of the key ever exists.
        var seal: Bool?
        /// What the person calls this passkey ("work laptop"), given as it is made.
        var passkeyName: String?
    }

    struct VerifyRegistrationResponse: Encodable {
        let verified: Bool
        let username: String
        let isAnonymous: Bool
        let credentialId: String
        /// Only for a client that asks for it (`returnsToken`).
        let token: String?
        let expiresAt: Date
        /// Whether the attestation reached a configured trust anchor; when false the recorded
        /// format and AAGUID are only what the client claimed.
        let attestationTrusted: Bool
        /// Added to a passkey-sealed account: whether this passkey can open the sealed key too.
        /// A new account that asked for `seal`: whether its key was sealed by this passkey.
        let sealsKey: Bool?
        /// Whether this passkey's authenticator can seal a key at all (PRF), when its browser said.
        let canSeal: Bool?
    }

    @Sendable func verifyRegistration(_ request: Request, context: KeyfobRequestContext) async throws -> Response {
        let ip = limits.clientIP(request, context)
        try limits.check(limits.verify, ip, now: now())
        let body = try await request.decodeJSON(VerifyRegistrationRequest.self, limit: configuration.maxBodySize)
        let passkeyName = try PasskeyNames.validated(body.passkeyName)
        let pending = try await passkeys.consumeChallenge(
            clientDataJSON: body.cred.response.clientDataJSON,
            ceremony: .registration, key: body.challengeKey)
        guard let userID = pending.userID, let username = pending.username else {
            throw KeyfobError(.challengeNotFound, "this challenge was not issued for a registration")
        }
        if let sent = body.username, !sent.isEmpty, sent.precomposedStringWithCompatibilityMapping.lowercased() != username.lowercased() {
            throw KeyfobError.invalid("username \"\(sent)\" is not the one these options were made for")
        }
        let prfOutput = try Self.prfOutput(body.prfOutput, body.cred.clientExtensionResults)
        var keepBrowserSession = false
        var adding: Sessions.Authenticated?
        if pending.existingUser {
            // The options were confirmed with a passkey for this session; the same session finishes.
            guard let auth = try await sessions.authenticate(request), auth.user.id == userID else {
                throw KeyfobError.usernameTaken(username)
            }
            // A browser adding a passkey keeps its own (unlocked) session cookie.
            keepBrowserSession = auth.viaCookie
            adding = auth
            try Self.mayAddPasskey(holding: try await store.credentials(ofUser: userID).count)
        }

        let verified: VerifiedRegistration
        do {
            verified = try relyingParty.verifyRegistration(
                body.cred, challenge: pending.challenge,
                requireUserVerification: configuration.requireUserVerification,
                allowedAlgorithms: pending.algorithms.compactMap(COSEAlgorithm.init(rawValue:)),
                attestation: configuration.attestationPolicy, now: now())
        } catch {
            events.record(.registrationFailed, ip: ip, username: username, code: KeyfobError(error).code)
            throw KeyfobError(error)
        }

        let created = now()
        let credential = CredentialRecord(
            id: verified.credentialID, userID: userID, publicKey: verified.publicKey.cose,
            algorithm: verified.publicKey.algorithm.rawValue, signCount: verified.signCount,
            transports: (body.cred.response.transports ?? []).filter { $0.count <= 32 }.prefix(8).map { $0 },
            aaguid: verified.aaguid, attestationFormat: verified.attestation.format,
            backupEligible: verified.backupEligible, backupState: verified.backupState, createdAt: created,
            // Making the passkey was its first use (the account page says so, not "never").
            lastUsedAt: created,
            attestationTrusted: verified.attestation.trust == .trusted, name: passkeyName,
            createdOn: PasskeyNames.createdOn(userAgent: request.headers[.userAgent]),
            prfCapable: Self.prfCapable(output: prfOutput, reported: body.cred.clientExtensionResults?.prf))
        let user = UserRecord(id: userID, username: username, isAnonymous: pending.isAnonymous, createdAt: created)
        // A new account's session is unlocked (its passkey was just proven with UV). A session born
        // from adding a passkey to an existing account starts locked: the new passkey has proven
        // nothing about who owns the account until it is used to sign in.
        var new = sessions.create(
            userID: userID, unlocked: verified.userVerified && !pending.existingUser,
            credentialID: verified.credentialID)
        // Every new account gets its nostr key in the transaction that creates it: sealed by this
        // passkey from the start when asked (and it gave a PRF output), the session holding the data key.
        var nostrKey: NostrKeyRecord?
        var wrap: KeyWrapRecord?
        var sealsKey: Bool?
        if !pending.existingUser {
            if body.seal == true, verified.userVerified, let prfOutput {
                let dataKey = PasskeySeal.newDataKey()
                nostrKey = try custody.seal(SecretKey.generate(), userID: userID, version: 1, dataKey: dataKey)
                wrap = try PasskeySeal.newWrap(
                    dataKey, prfOutput: prfOutput, userID: userID, credentialID: verified.credentialID,
                    challenge: pending.challenge, at: created)
                new.record.dataKey = try PasskeySeal.sessionCopy(of: dataKey, token: new.rawToken, tokenHash: new.record.tokenHash)
                sealsKey = true
            } else {
                nostrKey = try custody.newKey(for: userID)
                sealsKey = body.seal == true ? false : nil
            }
        }
        let (token, session) = (new.token, new.record)
        do {
            try await metrics.store("complete_registration") { [nostrKey, wrap] in
                try await store.completeRegistration(
                    user: user, createUser: !pending.existingUser, nostrKey: nostrKey,
                    credential: credential, session: session, wrap: wrap)
            }
        } catch StoreError.usernameTaken {
            events.record(.registrationFailed, ip: ip, username: username, code: .usernameTaken)
            throw KeyfobError(.usernameTaken, "username \"\(username)\" was taken meanwhile; choose another", status: .conflict)
        } catch StoreError.credentialExists {
            events.record(.registrationFailed, ip: ip, username: username, code: .credentialExists)
            throw KeyfobError(.credentialExists, "this passkey is registered already", status: .conflict)
        }
        events.record(.registered, ip: ip, username: username, detail: "format=\(verified.attestation.format) alg=\(credential.algorithm)")
        if pending.existingUser { await store.auditAccountChange(userID: userID, method: "add_passkey", at: created) }
        // A passkey added to a sealed account joins the seal when it brought a PRF output and the
        // session that adds it holds the data key.
        if let adding, try await custody.record(for: userID).passkeySealed {
            sealsKey = try await addWrap(
                for: verified.credentialID, userID: userID, prfOutput: prfOutput, challenge: pending.challenge,
                unlock: adding.unlock)
        }

        let response = VerifyRegistrationResponse(
            verified: true, username: username, isAnonymous: pending.isAnonymous,
            credentialId: Base64URL.encode(verified.credentialID), token: Self.returnsToken(request) ? token : nil,
            expiresAt: session.expiresAt,
            attestationTrusted: credential.attestationTrusted, sealsKey: sealsKey, canSeal: credential.prfCapable)
        var cookies = ceremonyCookies(request, context, token: token, expires: session.expiresAt, session: !keepBrowserSession)
        // A new account signed in in this browser: its next sign-in here opens a sealed key at once.
        if !pending.existingUser, !keepBrowserSession { rememberSealedAccount(wrap != nil ? userID : nil, request, context, in: &cookies) }
        return jsonResponse(response, headers: cookies)
    }

    /// The most passkeys one account holds: more than any person carries, and a bound on what
    /// every list of them costs (a remembered sealed account's sign-in options name them all).
    static let maxPasskeysPerAccount = 32

    static func mayAddPasskey(holding count: Int) throws {
        guard count < maxPasskeysPerAccount else {
            throw KeyfobError(
                .permissionDenied,
                "an account holds at most \(maxPasskeysPerAccount) passkeys: remove one you no longer use on your account page, then add this one",
                status: .forbidden)
        }
    }

    /// A client that presented a returning-device cookie or a valid session may start a ceremony
    /// from the reserve of the server-wide cap (a session is looked up only when one is presented).
    func mayUseReserve(_ request: Request) async throws -> Bool {
        if device.recognises(request) { return true }
        guard request.headers[.authorization] != nil || request.headers[.cookie] != nil else { return false }
        return try await sessions.authenticate(request) != nil
    }

    /// The `Set-Cookie` values of a finished ceremony: the session (unless kept) and the returning-device cookie.
    func ceremonyCookies(
        _ request: Request, _ context: KeyfobRequestContext, token: String, expires: Date,
        session: Bool = true
    ) -> HTTPFields {
        let secure = sessions.secureCookie(for: request, context: context)
        var fields = HTTPFields()
        if session { fields.append(HTTPField(name: .setCookie, value: sessions.cookie(token: token, expires: expires, secure: secure))) }
        if !device.recognises(request), let cookie = device.cookie(secure: secure) {
            fields.append(HTTPField(name: .setCookie, value: cookie))
        }
        return fields
    }
}

extension String {
    /// Zeros in front up to `width` characters.
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}

/// Usernames people choose, and the ones anonymous accounts get.
enum Usernames {
    static let anonymousPrefix = "anon-"

    /// What a person is shown: an anonymous account's `anon-92ced490b7c6` means nothing to them,
    /// so it is "Keyfob account 92ce" (its id's start tells two apart), as its passkey is named.
    static func shown(_ username: String, isAnonymous: Bool) -> String {
        isAnonymous ? "Keyfob account " + username.dropFirst(anonymousPrefix.count).prefix(4) : username
    }

    static func shown(_ user: UserRecord) -> String { shown(user.username, isAnonymous: user.isAnonymous) }

    /// The one spelling of a username: NFKC (full-width and compatibility forms fold to their
    /// plain letters), lowercased, and then only `a-z 0-9 . _ - @ +`, 1 to 64 bytes. ASCII only:
    /// the store's case-insensitive match folds ASCII alone, and mixed scripts make look-alikes
    /// (Cyrillic "а" in "аlice").
    static func normalize(_ name: String) throws -> String {
        let folded = name.precomposedStringWithCompatibilityMapping.lowercased()
        let allowed: Set<Unicode.Scalar> = Set("abcdefghijklmnopqrstuvwxyz0123456789._-@+".unicodeScalars)
        let rule = "a-z, 0-9 and . _ - @ + (letters are not case-sensitive)"
        guard (1...64).contains(folded.utf8.count) else {
            throw KeyfobError.invalid("a username is 1 to 64 characters of \(rule); this one has \(folded.utf8.count) bytes")
        }
        // Name the first character that is not allowed, as the person typed it (and its code point,
        // so a look-alike such as Cyrillic "а" is told apart from "a").
        if let bad = folded.unicodeScalars.first(where: { !allowed.contains($0) }) {
            let code = "U+" + String(bad.value, radix: 16, uppercase: true).leftPadded(to: 4)
            let shown =
                bad == " "
                ? "a space"
                : bad.properties.generalCategory == .control || bad.properties.isWhitespace || bad.value == 0x200B
                    ? "an invisible character (\(code))" : "\"\(String(bad))\" (\(code))"
            throw KeyfobError.invalid("\(shown) cannot be in a username: use \(rule)")
        }
        guard !folded.hasPrefix(anonymousPrefix) else {
            throw KeyfobError.invalid("usernames starting with \"\(anonymousPrefix)\" are reserved for anonymous accounts")
        }
        return folded
    }

    static func anonymous() -> String {
        anonymousPrefix + Hex.encode(randomBytes(6))
    }
}
