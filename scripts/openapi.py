#!/usr/bin/env python3
"""Writes docs/openapi.json (and Public/openapi.json, which the server serves at /openapi.json):
Keyfob's REST contract as OpenAPI 3.1. Edit this file, then run `make openapi`; a Swift test keeps
the served document equal to docs/openapi.json and both equal to what this script writes, and
another compares the document's operations with the routes the router registers.

docs/api.md explains; this document is what clients generate from. Both say the same."""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# DESIGN.md §7: every error is {"error": code, "message": text}.
CODES = [
    "invalid_request", "challenge_not_found", "challenge_expired", "origin_mismatch", "rp_id_mismatch",
    "user_presence_required", "user_verification_required", "unsupported_algorithm", "attestation_invalid",
    "signature_invalid", "credential_not_found", "credential_exists", "counter_regression", "username_taken",
    "user_handle_mismatch", "unauthorized", "signer_locked", "permission_denied", "user_rejected", "invalid_content",
    "invalid_callback", "unsupported_type", "invalid_pubkey", "decrypt_failed", "payload_too_large", "rate_limited",
    "request_not_found", "internal_error", "store_unavailable", "confirmation_required", "key_rolled_back",
    "unverified_transaction",
]

STR = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
B64URL = {"type": "string", "description": "base64url, no padding"}
HEX64 = {"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "64 lowercase hex characters"}
TIME = {"type": "string", "description": "ISO 8601 date and time"}
UNIX = {"type": "integer", "description": "seconds since 1970"}
# A confirmation read only in some cases (adding a passkey to an existing account, signing out
# everywhere, a trusted preset, an import): its shape is Confirmation's, checked only then.
SOMETIMES_CONFIRMED = {"description": "an AuthenticationCredential made for this action (see Confirmation); read only when the action needs it"}


def ref(name):
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema):
    """An optional field: JSON null is the same as leaving it out (Swift's Decodable reads it so)."""
    # A reference stays bare: generators drop an `anyOf` of a reference and null (the field would
    # vanish from the client); null is then refused where the field is read.
    if "$ref" in schema or not schema:
        return schema
    if "oneOf" in schema:
        return {"anyOf": [schema, {"type": "null"}]}
    types = schema.get("type")
    if types is None or isinstance(types, list):
        return schema
    out = dict(schema, type=[types, "null"])
    if "enum" in out:
        out["enum"] = out["enum"] + [None]
    if "const" in out:
        return {"anyOf": [schema, {"type": "null"}]}
    return out


def obj(props=None, required=(), extra=True, description=None):
    props = {k: (v if k in required else nullable(v)) for k, v in (props or {}).items()}
    out = {"type": "object", "properties": props}
    if required:
        out["required"] = list(required)
    if description:
        out["description"] = description
    return out


def arr(items):
    return {"type": "array", "items": items}


SCHEMAS = {
    # `error` is a string, not a closed enum: a code added later must not make a client's decoding
    # of the whole reply fail.
    "Error": obj({
        "error": {"type": "string", "description": "a stable code (DESIGN.md §7): " + ", ".join(CODES)},
        "message": {"type": "string", "description": "what went wrong and what to do, in words"},
        "state": {"type": "string", "description": "an approval request that is gone: expired, approved, rejected, cancelled or unknown"},
        "back": {"type": "string", "description": "an expired redirect-flow request: the app's error callback, for \"Back to the app\""},
        "type": {"type": "string", "description": "a refused Polkadot message: its msgType, for sendError(type, message)"},
    }, ["error"], description="Every refusal."),
    "RegistrationOptions": obj({
        "challenge": B64URL, "rp": obj({"name": STR, "id": STR}), "user": obj({"id": B64URL, "name": STR, "displayName": STR}),
        "pubKeyCredParams": arr(obj({"alg": INT, "type": STR})), "timeout": INT, "attestation": STR,
        "authenticatorSelection": obj(), "excludeCredentials": arr(obj()), "extensions": obj(),
        "challengeKey": {"type": "string", "description": "send it back with the credential"},
    }, ["challenge", "rp", "user", "pubKeyCredParams", "challengeKey"],
        description="PublicKeyCredentialCreationOptions as JSON (base64url), plus challengeKey."),
    "AuthenticationOptions": obj({
        "challenge": B64URL, "timeout": INT, "rpId": STR, "allowCredentials": arr(obj({"id": B64URL, "type": STR})),
        "userVerification": STR, "extensions": obj(),
        "challengeKey": {"type": "string", "description": "sign-in options only: send it back with the assertion"},
        "account": {"type": "string", "description": "a remembered sealed account's name (browsers holding its cookie only)"},
    }, ["challenge"], description="PublicKeyCredentialRequestOptions as JSON (base64url), plus challengeKey on sign-in options."),
    "RegistrationCredential": obj({
        "id": B64URL, "rawId": B64URL, "type": {"type": "string", "description": "public-key"},
        "response": obj({"clientDataJSON": B64URL, "attestationObject": B64URL, "transports": arr(STR)},
                        ["clientDataJSON", "attestationObject"]),
        "clientExtensionResults": obj(),
    }, ["id", "rawId", "type", "response"], description="PublicKeyCredential.toJSON() of navigator.credentials.create, or the iOS guide's body"),
    "AuthenticationCredential": obj({
        "id": B64URL, "rawId": B64URL, "type": {"type": "string", "description": "public-key"},
        "response": obj({"clientDataJSON": B64URL, "authenticatorData": B64URL, "signature": B64URL, "userHandle": B64URL},
                        ["clientDataJSON", "authenticatorData", "signature"]),
        "clientExtensionResults": obj(),
    }, ["id", "rawId", "type", "response"], description="PublicKeyCredential.toJSON() of navigator.credentials.get, or the iOS guide's body"),
    "Protection": obj({
        "level": {"type": "string", "enum": ["server", "passkeys"]}, "sealedBy": INT, "summary": STR,
        "sealingCredentials": arr(STR), "signerSealed": BOOL,
    }),
    "Session": obj({
        "username": STR, "isAnonymous": BOOL, "expiresAt": TIME, "signerLocked": BOOL, "signerUnlockedUntil": TIME,
        "pubkey": HEX64, "npub": STR, "userId": B64URL, "protection": ref("Protection"), "waitingForUnlock": INT,
        "sites": arr(STR), "siteGrants": arr(ref("Grant")),
    }, ["username", "isAnonymous", "expiresAt", "signerLocked", "pubkey", "npub", "userId", "protection"]),
    "Credential": obj({
        "id": B64URL, "name": STR, "authenticatorName": STR, "icon": STR, "createdOn": STR, "algorithm": INT,
        "attestationFormat": STR, "aaguid": STR, "transports": arr(STR), "backedUp": BOOL, "attestationTrusted": BOOL,
        "createdAt": TIME, "lastUsedAt": TIME, "sealsKey": BOOL, "canSeal": BOOL, "current": BOOL,
    }, ["id", "algorithm", "createdAt"]),
    "NostrEvent": obj({
        "id": HEX64, "pubkey": HEX64, "created_at": INT, "kind": INT, "tags": arr(arr(STR)), "content": STR,
        "sig": {"type": "string", "pattern": "^[0-9a-f]{128}$"},
    }, description="A NIP-01 event; what the signer signs needs only kind and content"),
    "Grant": obj({
        "id": STR, "client": STR, "method": STR, "kind": INT, "allow": BOOL, "createdAt": TIME, "expiresAt": TIME,
    }, ["id", "client", "method", "allow"]),
    "HistoryEntry": obj({
        "id": STR, "at": TIME, "client": STR, "transport": STR, "method": STR, "kind": INT, "eventId": STR,
        "outcome": STR, "code": STR,
    }, ["id", "at", "method", "outcome"]),
    "SubstrateAccount": obj({
        "id": STR, "name": STR, "type": {"type": "string", "enum": ["sr25519", "ed25519", "ecdsa"]}, "address": STR,
        "publicKey": STR, "network": INT, "createdAt": TIME, "acceptsUnverified": BOOL,
    }, ["id", "type", "address"]),
    "ApprovalChallenge": obj({
        "challenge": B64URL, "timeout": INT, "rpId": STR, "allowCredentials": arr(obj({"id": B64URL, "type": STR})),
        "userVerification": STR, "extensions": obj(),
        "committed": {"type": "string", "description": "what the passkey approves; the challenge is its SHA-256"},
    }, ["challenge", "committed"], description="Request options (as AuthenticationOptions) with the bytes they commit to, side by side."),
    "Confirmation": {
        "description": "An assertion (AuthenticationCredential) made on the options of POST /api/confirmations for this action",
        **ref("AuthenticationCredential")},
}


def error(description):
    return {"description": description, "content": {"application/json": {"schema": ref("Error")}}}


def json_body(schema, description=None, example=None):
    content = {"schema": schema}
    if example is not None:
        content["example"] = example
    out = {"description": description or "JSON", "content": {"application/json": content}}
    return out


# Every operation may answer these (components/responses); each operation adds its own.
COMMON_RESPONSES = {
    "BadRequest": error("invalid_request (a field of the wrong type is named), invalid_content, …"),
    "TooLarge": error("payload_too_large: bodies over 64 KiB"),
    "NotJSON": error("invalid_request: a body not sent as application/json"),
    "RateLimited": error("rate_limited, with Retry-After"),
    "Unavailable": error("store_unavailable, with Retry-After: the database cannot be reached or cannot write"),
    "Unauthorized": error("unauthorized: no session, or it ended"),
}
COMMON = {status: {"$ref": f"#/components/responses/{name}"} for status, name in
          [("400", "BadRequest"), ("413", "TooLarge"), ("415", "NotJSON"), ("429", "RateLimited"), ("503", "Unavailable")]}
SESSION = [{"bearer": []}, {"session": []}]
ADMIN = [{"adminToken": []}, {"bearer": []}, {"session": []}]
PUBLIC = [{}]


def op(op_id, summary, tag, security=PUBLIC, body=None, ok=None, ok_status="200", errors=(), params=(), description=None,
       body_required=True, extra_ok=None):
    out = {"operationId": op_id, "summary": summary, "tags": [tag], "security": security}
    if description:
        out["description"] = description
    if params:
        out["parameters"] = list(params)
    if body is not None:
        out["requestBody"] = {"required": body_required, **body}
    responses = {ok_status: ok or {"description": "done", "content": {"application/json": {"schema": obj()}}}}
    if extra_ok:
        responses.update(extra_ok)
    if security not in (PUBLIC,) and {} not in security:
        responses["401"] = {"$ref": "#/components/responses/Unauthorized"}
    responses.update(COMMON)
    for status, text in errors:
        responses[status] = error(text)
    out["responses"] = responses
    return out


def path_param(name, description):
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}, "description": description}


def query(name, description, schema=STR):
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def html(description):
    return {"description": description, "content": {"text/html": {"schema": STR}}}


PAGE_ERRORS = {"400": html("a page saying what is wrong (and, when it can, a link back to the app)"),
               "429": html("too many requests from this address"), "503": html("the store cannot be reached")}


def page(op_id, summary, tag, params=(), description=None, redirects=False):
    responses = {"200": html("the page")}
    if redirects:
        responses["303"] = {"description": "to the approval page, or straight back to the app's callback when a remembered choice answers"}
    responses.update(PAGE_ERRORS)
    out = {"operationId": op_id, "summary": summary, "tags": [tag], "security": PUBLIC, "responses": responses}
    if params:
        out["parameters"] = list(params)
    if description:
        out["description"] = description
    return out


USERNAME = {"type": "string", "description": "1–64 bytes of a-z 0-9 . _ - @ + after NFKC and lowercasing"}
CONFIRMED = "403 confirmation_required without `confirmation`; permission_denied"
SIGNER_METHODS = {
    "get_public_key": ("getPublicKey", "The account's nostr public key", obj(), obj({"result": HEX64, "pubkey": HEX64, "npub": STR}, ["result"])),
    "sign_event": ("signEvent", "Sign a nostr event (NIP-01)", obj({
        "id": STR, "event": {"oneOf": [obj({"kind": INT, "content": STR, "tags": arr(arr(STR)), "created_at": INT}, ["kind"]), STR],
                             "description": "the event, or a string holding its JSON; pubkey and id are ignored"}}, ["event"]),
        obj({"id": STR, "result": {"type": "string", "description": "the signature"}, "event": ref("NostrEvent")}, ["result", "event"])),
    "nip04_encrypt": ("nip04Encrypt", "Encrypt for a peer (NIP-04)", obj({"id": STR, "plaintext": STR, "pubkey": HEX64}, ["plaintext", "pubkey"]),
                      obj({"id": STR, "result": STR}, ["result"])),
    "nip04_decrypt": ("nip04Decrypt", "Decrypt from a peer (NIP-04)", obj({"id": STR, "ciphertext": STR, "encryptedText": STR, "pubkey": HEX64}, ["pubkey"]),
                      obj({"id": STR, "result": STR}, ["result"])),
    "nip44_encrypt": ("nip44Encrypt", "Encrypt for a peer (NIP-44 v2)", obj({"id": STR, "plaintext": STR, "pubkey": HEX64}, ["plaintext", "pubkey"]),
                      obj({"id": STR, "result": STR}, ["result"])),
    "nip44_decrypt": ("nip44Decrypt", "Decrypt from a peer (NIP-44 v2)", obj({"id": STR, "ciphertext": STR, "encryptedText": STR, "pubkey": HEX64}, ["pubkey"]),
                      obj({"id": STR, "result": STR}, ["result"])),
    "decrypt_zap_event": ("decryptZapEvent", "Decrypt a private zap request (kind 9734)", obj({"id": STR, "event": {}}, ["event"]),
                          obj({"id": STR, "result": STR, "event": {}}, ["result"])),
}


def operations():
    P = {}

    def add(path, method, operation):
        P.setdefault(path, {})[method] = operation

    # --- Passkey ceremonies (the iOS guide's four endpoints) ---
    reg_example = {"username": "john_doe", "challengeKey": "john_doe", "cred": {
        "id": "base64url-credential-id", "rawId": "base64url-credential-id", "type": "public-key",
        "response": {"clientDataJSON": "base64url-encoded", "attestationObject": "base64url-encoded", "transports": ["internal"]}}}
    auth_example = {"cred": {"id": "base64url-credential-id", "rawId": "base64url-credential-id", "type": "public-key",
                             "response": {"clientDataJSON": "base64url-encoded", "authenticatorData": "base64url-encoded",
                                          "signature": "base64url-encoded", "userHandle": "base64url-encoded-user-id"}}}
    reg_ok = json_body(ref("RegistrationOptions"), "creation options", {
        "challenge": "base64url-encoded-challenge", "rp": {"name": "Keyfob", "id": "example.com"},
        "user": {"id": "base64url-encoded-user-id", "name": "john_doe", "displayName": "john_doe"},
        "pubKeyCredParams": [{"alg": -7, "type": "public-key"}, {"alg": -257, "type": "public-key"}], "timeout": 60000,
        "attestation": "none", "authenticatorSelection": {"residentKey": "required", "userVerification": "required"},
        "challengeKey": "john_doe"})
    add("/generate-registration-options", "get", op(
        "registrationOptions", "Creation options for a new account (or a new passkey of this session's account)", "Passkeys",
        params=[query("username", "the account's name; none: an anonymous account (anon-…)", USERNAME)], ok=reg_ok,
        errors=[("403", "confirmation_required: adding a passkey to an existing account takes POST with a confirmation"),
                ("409", "username_taken")]))
    add("/generate-registration-options", "post", op(
        "registrationOptionsWithBody", "Creation options; adding a passkey to this session's account takes `confirmation` (passkey.add)",
        "Passkeys", body=json_body(obj({"username": USERNAME, "confirmation": SOMETIMES_CONFIRMED})), body_required=False, ok=reg_ok,
        errors=[("403", "confirmation_required, permission_denied (at most 32 passkeys)"), ("409", "username_taken")]))
    add("/verify-registration", "post", op(
        "verifyRegistration", "Register the passkey; signs in", "Passkeys",
        body=json_body(obj({"username": USERNAME, "challengeKey": STR, "cred": ref("RegistrationCredential"),
                            "prfOutput": B64URL, "seal": BOOL, "passkeyName": {"type": "string", "maxLength": 64}},
                           ["challengeKey", "cred"]), example=reg_example),
        ok=json_body(obj({"verified": BOOL, "username": STR, "isAnonymous": BOOL, "credentialId": B64URL,
                          "token": {"type": "string", "description": "only with the request header `Keyfob-Session: bearer`, never to a browser"},
                          "expiresAt": TIME, "attestationTrusted": BOOL, "sealsKey": BOOL, "canSeal": BOOL},
                         ["verified", "username", "isAnonymous"]),
                     example={"verified": True, "username": "john_doe", "isAnonymous": False, "credentialId": "base64url-credential-id",
                              "expiresAt": "2026-12-05T12:00:00Z", "attestationTrusted": False}),
        description="Sets the session cookie; a client that sends `Keyfob-Session: bearer` (and is not a browser) gets `token` too.",
        errors=[("400", "invalid_request, challenge_not_found, challenge_expired, origin_mismatch, rp_id_mismatch, unsupported_algorithm, attestation_invalid"),
                ("401", "signature_invalid"), ("403", "user_presence_required, user_verification_required, permission_denied"),
                ("409", "credential_exists, username_taken")],
        params=[{"name": "Keyfob-Session", "in": "header", "required": False, "schema": {"type": "string", "enum": ["bearer"]},
                 "description": "`bearer`: return the session token in the JSON"}]))
    add("/generate-authentication-options", "get", op(
        "authenticationOptions", "Request options for signing in (discoverable passkeys)", "Passkeys",
        params=[query("username", "ignored for the options' shape: every account gets the same", USERNAME)],
        ok=json_body(ref("AuthenticationOptions"), "request options", {
            "challenge": "base64url-encoded-challenge", "timeout": 60000, "rpId": "example.com", "allowCredentials": [],
            "userVerification": "required", "challengeKey": "k"})))
    add("/generate-authentication-options", "post", op(
        "authenticationOptionsWithBody", "Request options for signing in", "Passkeys",
        body=json_body(obj({"username": USERNAME, "anyAccount": BOOL})), body_required=False,
        ok=json_body(ref("AuthenticationOptions"))))
    add("/verify-authentication", "post", op(
        "verifyAuthentication", "Sign in with a passkey assertion", "Passkeys",
        body=json_body(obj({"cred": ref("AuthenticationCredential"), "challengeKey": STR, "prfOutput": B64URL}, ["cred"]), example=auth_example),
        ok=json_body(obj({"verified": BOOL, "username": STR, "isAnonymous": BOOL, "token": STR, "expiresAt": TIME, "signerSealed": BOOL},
                         ["verified", "username", "isAnonymous"]),
                     example={"verified": True, "username": "john_doe", "isAnonymous": False, "expiresAt": "2026-12-05T12:00:00Z", "signerSealed": False}),
        errors=[("400", "invalid_request, challenge_not_found, challenge_expired, origin_mismatch, rp_id_mismatch"),
                ("401", "signature_invalid, user_handle_mismatch"), ("403", "user_presence_required, user_verification_required"),
                ("404", "credential_not_found"), ("409", "counter_regression")],
        params=[{"name": "Keyfob-Session", "in": "header", "required": False, "schema": {"type": "string", "enum": ["bearer"]},
                 "description": "`bearer`: return the session token in the JSON"}]))
    add("/sealed-account", "get", op("sealedAccount", "The account this browser's sealed-account cookie names, if any", "Passkeys",
                                     ok=json_body(obj({"account": STR}))))

    # --- The account ---
    add("/session", "get", op("session", "Who is signed in", "Account", SESSION, ok=json_body(ref("Session"))))
    add("/logout", "post", op(
        "logout", "Sign out of this session, or everywhere (`everywhere=1`, with a confirmation for sessions.revoke)", "Account",
        SESSION + [{}],
        params=[query("everywhere", "`1` (or `true`): every session, app, grant and waiting request of the account; any other value is 400",
                      {"type": "string", "enum": ["1", "true"]})],
        body=json_body(obj({"confirmation": SOMETIMES_CONFIRMED}, description="read only with everywhere=1")), body_required=False,
        ok=json_body(obj({"signedOut": BOOL, "sessions": INT, "apps": INT, "grants": INT, "requests": INT,
                          "ended": obj({"extensionSession": BOOL, "apps": arr(STR), "sites": arr(STR)}),
                          "passkeys": INT, "passkeysAddedToday": INT}, ["signedOut"])),
        errors=[("403", CONFIRMED)]))
    add("/api/signer/lock", "post", op("lock", "Lock now: every session of the account locked", "Account", SESSION,
                                       ok=json_body(obj({"locked": BOOL, "sessions": INT}, ["locked", "sessions"]))))
    add("/api/extension/session", "post", op(
        "extensionSession", "Connect the browser extension (Keyfob's own page, cookie session)", "Extension", [{"session": []}],
        body=json_body(obj({"confirmation": ref("Confirmation"), "claim": B64URL}, ["claim"])), ok_status="201",
        ok=json_body(obj({"username": STR, "expiresAt": TIME})),
        errors=[("403", "permission_denied (a bearer session), confirmation_required"), ("409", "invalid_request: the claim names a session already")]))
    add("/account/credentials", "get", op("credentials", "The account's passkeys", "Account", SESSION,
                                          ok=json_body(obj({"credentials": arr(ref("Credential"))}, ["credentials"]))))
    add("/account/credentials/{id}", "delete", op(
        "removeCredential", "Remove a passkey (confirmation: passkey.remove, target the id)", "Account", SESSION,
        params=[path_param("id", "the passkey's id (base64url)")], body=json_body(obj({"confirmation": ref("Confirmation")})),
        body_required=False, ok=json_body(obj({"deleted": BOOL}, ["deleted"])),
        errors=[("403", CONFIRMED), ("404", "credential_not_found"), ("409", "invalid_request: the only passkey, or the last that opens a sealed key")]))
    add("/account/credentials/{id}", "patch", op(
        "nameCredential", "Name a passkey", "Account", SESSION, params=[path_param("id", "the passkey's id (base64url)")],
        body=json_body(obj({"name": {"type": "string", "maxLength": 64}}, ["name"]), example={"name": "work laptop"}),
        errors=[("404", "credential_not_found")]))
    add("/api/confirmations", "post", op(
        "confirmationOptions", "Request options to confirm one account change with a passkey", "Account", SESSION,
        body=json_body(obj({"action": {"type": "string", "enum": [
            "passkey.add", "passkey.remove", "key.seal", "key.unseal", "signer.unlock", "key.export", "key.import", "grant.trusted",
            "sessions.revoke", "polkadot.import", "polkadot.export", "polkadot.remove", "extension.connect",
            "polkadot.accept_unverified", "admin.revoke_sessions", "admin.remove_user"]}, "target": STR}, ["action"])),
        ok=json_body(obj({"action": STR, "target": STR, "expiresIn": INT, "options": ref("AuthenticationOptions")}, ["action", "options"])),
        errors=[("403", "permission_denied: no passkey of this account may confirm it")]))

    # --- Sealing ---
    sealing = obj({"cred": ref("AuthenticationCredential"), "prfOutput": B64URL}, ["cred"])
    add("/api/signer/seal", "post", op("seal", "Seal the key with this passkey (PRF), or join the seal", "Sealing", SESSION,
                                       body=json_body(sealing), ok=json_body(ref("Protection")),
                                       errors=[("403", "permission_denied, signer_locked"), ("409", "decrypt_failed")]))
    add("/api/signer/unseal", "post", op("unseal", "Back to server-protected", "Sealing", SESSION, body=json_body(sealing),
                                         ok=json_body(ref("Protection")), errors=[("403", "permission_denied, signer_locked")]))
    add("/api/signer/unlock", "post", op("unlock", "Unlock the signer with a passkey", "Sealing", SESSION, body=json_body(sealing),
                                         ok=json_body(obj({"signerLocked": BOOL, "signerUnlockedUntil": TIME}, ["signerLocked"])),
                                         errors=[("403", "signer_locked: the PRF output does not open the wrap; permission_denied")]))

    # --- The signer (REST) ---
    for method, (op_id, summary, body, reply) in SIGNER_METHODS.items():
        add(f"/api/signer/{method}", "post", op(
            op_id, summary, "Signer", SESSION, body=json_body(body, example={"id": "r1", "event": {"kind": 1, "content": "hello nostr"}}
                                                             if method == "sign_event" else None),
            body_required=method != "get_public_key",
            ok=json_body(reply), errors=[("403", "signer_locked, permission_denied (kinds 14 and 15)"), ("404", "unsupported_type"),
                                         ("409", "key_rolled_back: the stored key is older than its seal (restored from a backup); nothing is signed")]))
    key_body = obj({"nsec": STR, "secret": HEX64, "ncryptsec": STR, "password": STR, "confirmation": ref("Confirmation")},
                   description="exactly one of nsec, secret, or ncryptsec with password")
    add("/api/signer/key", "post", op("importKey", "Replace the account's nostr key (confirmation: key.import)", "Signer", SESSION,
                                      body=json_body(key_body), ok=json_body(obj({"pubkey": HEX64, "npub": STR}, ["pubkey", "npub"])),
                                      errors=[("403", CONFIRMED + ", signer_locked"), ("409", "Polkadot accounts exist")]))
    check_body = obj({"nsec": STR, "secret": HEX64, "ncryptsec": STR, "password": STR},
                     description="exactly one of nsec, secret, or ncryptsec with password")
    add("/api/signer/key/check", "post", op("checkKey", "What importing this key would do; nothing stored", "Signer", SESSION,
                                            body=json_body(check_body), ok=json_body(obj({"pubkey": HEX64, "npub": STR, "sameAsCurrent": BOOL})),
                                            errors=[("403", "signer_locked"), ("409", "Polkadot accounts exist")]))
    add("/api/signer/key/export", "post", op(
        "exportKey", "The key as NIP-49 ncryptsec (confirmation: key.export)", "Signer", SESSION,
        body=json_body(obj({"password": {"type": "string", "minLength": 8}, "confirmation": ref("Confirmation")}, ["password"])),
        ok=json_body(obj({"ncryptsec": STR}, ["ncryptsec"])), errors=[("403", CONFIRMED + ", signer_locked"), ("409", "key_rolled_back")]))
    add("/api/signer/history", "get", op(
        "history", "The signer's audit log, newest first", "Signer", SESSION,
        params=[query("before", "`next` of the page before"), query("limit", "at most this many entries (50 when left out)", {"type": "integer", "minimum": 1, "maximum": 200})],
        ok=json_body(obj({"entries": arr(ref("HistoryEntry")), "next": STR}, ["entries"]))))
    add("/api/signer/history/{entry}/receipt", "get", op(
        "receipt", "The passkey's receipt of an approval", "Signer", SESSION, params=[path_param("entry", "the history entry's id")],
        ok=json_body(obj({"committed": STR, "challenge": B64URL, "credentialId": B64URL, "publicKey": B64URL, "algorithm": INT,
                          "rpId": STR, "assertion": obj()})), errors=[("404", "request_not_found")]))

    # --- Apps that ask: redirect flows and the approval API ---
    flow = "Approvals"
    add("/app/sign", "get", page("appSign", "keyfob link: sign an event, answer at `cb`", flow, redirects=True, params=[
        query("payload", "the event, base64url JSON"), query("cb", "the callback URL"), query("origin", "a name the app gives itself (shown unverified)")]))
    add("/app/pubkey", "get", page("appPubkey", "keyfob link: the public key, answer at `cb`", flow, redirects=True,
                                   params=[query("cb", "the callback URL")]))
    add("/nostrsigner", "get", page("nostrsigner", "NIP-155 / DIP-05 request", flow, redirects=True, params=[
        query("type", "the method"), query("x-success", "NIP-155's callback"), query("callbackUrl", "DIP-05's callback")]))
    add("/nostrsigner/{content}", "get", page("nostrsignerContent", "DIP-05 / NIP-155 request with its content in the path", flow,
                                              redirects=True, params=[path_param("content", "the url-encoded content (may hold slashes)")]))
    add("/approve/{id}", "get", page("approvalPage", "The approval page of a waiting request", flow, params=[path_param("id", "the request")]))
    add("/callback.html", "get", page("nip07Callback", "NIP-07's callback page: posts the answer to its opener", flow))
    request_reply = obj({"id": STR, "transport": STR, "client": STR, "clientName": STR, "method": STR, "kind": INT, "kindName": STR,
                         "event": obj(), "plaintext": STR, "ciphertext": STR, "peer": STR, "warnings": arr(STR), "expiresAt": TIME,
                         "account": obj({"username": STR, "npub": STR, "pubkey": STR}), "signerLocked": BOOL, "needsPasskey": BOOL,
                         "remember": arr(STR), "firstFromClient": BOOL}, ["id", "method"])
    add("/api/requests", "get", op("waitingRequests", "The account's requests waiting for a decision", flow, SESSION,
                                   ok=json_body(obj({"requests": arr(obj({"id": STR, "client": STR, "clientName": STR, "transport": STR,
                                                                          "method": STR, "kind": INT, "kindName": STR, "createdAt": TIME,
                                                                          "expiresAt": TIME}))}, ["requests"]))))
    rid = path_param("id", "the request")
    add("/api/requests/{id}", "get", op("getRequest", "A waiting request, as its page shows it", flow, SESSION, params=[rid],
                                        ok=json_body(request_reply),
                                        errors=[("403", "signer_locked: sealed like the key, unlock first"),
                                                ("404", "request_not_found, with `state` (expired, approved, rejected, cancelled, unknown) and `back`")]))
    remember = {"type": "string", "enum": ["once", "hour", "day", "forever"]}
    add("/api/requests/{id}/approve", "post", op(
        "approveRequest", "Approve: runs the method", flow, SESSION, params=[rid],
        body=json_body(obj({"remember": remember, "preset": STR, "assertion": SOMETIMES_CONFIRMED,
                            "confirmation": SOMETIMES_CONFIRMED})), body_required=False,
        ok=json_body(obj({"redirect": STR})), errors=[("403", "signer_locked, confirmation_required, permission_denied"),
                                                      ("404", "request_not_found")]))
    add("/api/requests/{id}/reject", "post", op(
        "rejectRequest", "Reject", flow, SESSION, params=[rid], body=json_body(obj({"remember": remember})), body_required=False,
        ok=json_body(obj({"redirect": STR})), errors=[("404", "request_not_found")]))
    add("/api/requests/{id}/challenge", "post", op(
        "requestChallenge", "Options whose challenge is SHA-256 of what is approved", flow, SESSION, params=[rid],
        ok=json_body(ref("ApprovalChallenge")), errors=[("404", "request_not_found")]))
    add("/api/signer/grants", "get", op("grants", "What apps may do without asking", flow, SESSION,
                                        ok=json_body(obj({"grants": arr(ref("Grant"))}, ["grants"]))))
    add("/api/signer/grants/{id}", "delete", op("revokeGrant", "Revoke a remembered choice", flow, SESSION, params=[path_param("id", "the grant")],
                                                ok=json_body(obj({"deleted": BOOL})),
                                                errors=[("403", "signer_locked"), ("404", "request_not_found")]))

    # --- NIP-46 bunker ---
    add("/api/signer/bunker", "get", op("bunker", "A bunker:// URL with a new single-use secret", "Bunker", SESSION,
                                        ok=json_body(obj({"url": STR, "pubkey": HEX64, "relays": arr(STR), "secretExpiresAt": UNIX},
                                                         ["url", "pubkey", "relays"])), errors=[("403", "signer_locked")]))
    add("/api/signer/bunker/rotate", "post", op("rotateBunkerSecret", "The same as GET /api/signer/bunker", "Bunker", SESSION,
                                                ok=json_body(obj({"url": STR, "pubkey": HEX64, "relays": arr(STR), "secretExpiresAt": UNIX})),
                                                errors=[("403", "signer_locked")]))
    add("/api/signer/bunker/clients", "get", op("bunkerClients", "Connected NIP-46 clients", "Bunker", SESSION,
                                                ok=json_body(obj({"clients": arr(obj({"pubkey": HEX64, "name": STR, "url": STR, "perms": STR,
                                                                                      "createdAt": TIME, "lastUsedAt": TIME}))}, ["clients"]))))
    add("/api/signer/bunker/clients/{pubkey}", "delete", op(
        "disconnectBunkerClient", "Disconnect a client; what it left waiting is cancelled", "Bunker", SESSION,
        params=[path_param("pubkey", "the client's public key (hex)")], errors=[("403", "signer_locked"), ("404", "request_not_found")]))
    add("/api/signer/nostrconnect", "post", op(
        "nostrconnect", "Connect a nostrconnect:// client", "Bunker", SESSION, body=json_body(obj({"url": STR}, ["url"])),
        ok=json_body(obj({"pubkey": HEX64, "name": STR, "relays": arr(STR), "perms": STR})),
        errors=[("403", "signer_locked"), ("409", "invalid_request: too many clients or relays")]))
    add("/connect/{url}", "get", page("connectPage", "Connect a nostrconnect:// client in a browser", "Bunker",
                                      params=[path_param("url", "the nostrconnect:// URL (may hold slashes)")]))

    # --- Polkadot ---
    pk = "Polkadot"
    add("/api/polkadot/accounts", "get", op("polkadotAccounts", "The account's Substrate accounts", pk, SESSION,
                                            ok=json_body(obj({"accounts": arr(ref("SubstrateAccount"))}, ["accounts"]))))
    add("/api/polkadot/accounts", "post", op(
        "addPolkadotAccount", "Create an account, or import a phrase or a polkadot-js backup (confirmation: polkadot.import)", pk, SESSION,
        body=json_body(obj({"type": {"type": "string", "enum": ["sr25519", "ed25519", "ecdsa"]}, "name": STR, "network": INT,
                            "mnemonic": STR, "path": STR, "backup": obj(), "password": STR, "confirmation": SOMETIMES_CONFIRMED})),
        body_required=False, ok_status="201", ok=json_body(ref("SubstrateAccount")),
        errors=[("403", CONFIRMED + ", signer_locked"), ("409", "permission_denied: 20 accounts at most")]))
    aid = path_param("id", "the Substrate account's id")
    add("/api/polkadot/accounts/{id}/export", "post", op(
        "exportPolkadotAccount", "A polkadot-js JSON backup (confirmation: polkadot.export)", pk, SESSION, params=[aid],
        body=json_body(obj({"password": {"type": "string", "minLength": 8}, "confirmation": ref("Confirmation")}, ["password"])),
        ok=json_body(obj({"encoded": STR, "encoding": obj(), "address": STR, "meta": obj()})),
        errors=[("403", CONFIRMED + ", signer_locked"), ("404", "request_not_found")]))
    add("/api/polkadot/accounts/{id}/remove", "post", op(
        "removePolkadotAccount", "Remove (confirmation: polkadot.remove)", pk, SESSION, params=[aid],
        body=json_body(obj({"confirmation": ref("Confirmation")})), body_required=False,
        errors=[("403", CONFIRMED), ("404", "request_not_found")]))
    add("/api/polkadot/accounts/{id}/settings", "post", op(
        "polkadotAccountSettings", "Whether it signs transactions Keyfob cannot check (confirmation: polkadot.accept_unverified)", pk, SESSION,
        params=[aid], body=json_body(obj({"acceptUnverified": BOOL, "confirmation": ref("Confirmation")}, ["acceptUnverified"])),
        ok=json_body(ref("SubstrateAccount")), errors=[("403", CONFIRMED), ("404", "request_not_found")]))
    message = obj({"id": STR, "msgType": {"type": "string", "description": "pub(authorize.tab), pub(accounts.list), pub(accounts.subscribe), "
                                                                          "pub(metadata.list), pub(metadata.provide), pub(bytes.sign), pub(extrinsic.sign)"},
                   "origin": STR, "request": {}, "url": STR}, ["msgType", "url"])
    polkadot_error = {"description": "a refusal, `{type, error, message}` for sendError", "content": {"application/json": {"schema": ref("Error")}}}
    add("/api/polkadot/message", "post", op(
        "polkadotMessage", "A polkadot-js extension message, as the Nova bridge forwards it", pk, SESSION,
        body=json_body(message, example={"id": "1639543839750.1", "msgType": "pub(accounts.list)", "origin": "dapp-request", "request": None,
                                         "url": "https://singular.rmrk.app/"}),
        ok=json_body(obj({"type": STR, "result": {}}, ["type"])),
        extra_ok={"202": json_body(obj({"type": STR, "pending": obj({"id": STR, "approvalUrl": STR, "resultUrl": STR, "expiresIn": INT})}),
                                   "a signing request waits for the person's passkey")},
        errors=[("403", "permission_denied, unverified_transaction, signer_locked"), ("404", "unsupported_type")]))
    add("/api/polkadot/subscribe", "get", {
        "operationId": "polkadotSubscribe", "summary": "pub(accounts.subscribe)'s updates as server-sent events", "tags": [pk],
        "security": SESSION, "parameters": [query("id", "the subscription's message id"), query("url", "the dapp page's address")],
        "responses": {"200": {"description": "`data: {id, result}` events", "content": {"text/event-stream": {"schema": STR}}},
                      "400": error("invalid_request"), "401": error("unauthorized"), "403": error("permission_denied"),
                      "429": error("rate_limited: 4 streams a session or account, 16 a client address"), "503": error("store_unavailable")}})
    add("/api/polkadot/requests/{id}", "get", op(
        "polkadotRequest", "A signing request's state and outcome", pk, SESSION, params=[rid],
        ok=json_body(obj({"state": {"type": "string", "enum": ["pending", "approved", "rejected", "expired", "cancelled"]}, "outcome": obj()}, ["state"])),
        errors=[("404", "request_not_found")]))
    add("/api/polkadot/requests/{id}/details", "get", op(
        "polkadotRequestDetails", "What the approval page shows", pk, SESSION, params=[rid],
        ok=json_body(obj({"id": STR, "state": STR, "origin": STR})), errors=[("404", "request_not_found")]))
    add("/api/polkadot/requests/{id}/challenge", "post", op(
        "polkadotRequestChallenge", "Options whose challenge is SHA-256 of `committed`", pk, SESSION, params=[rid],
        ok=json_body(ref("ApprovalChallenge")), errors=[("404", "request_not_found")]))
    add("/api/polkadot/requests/{id}/approve", "post", op(
        "approvePolkadotRequest", "Sign with the passkey's assertion over `committed`", pk, SESSION, params=[rid],
        body=json_body(obj({"assertion": ref("AuthenticationCredential")}, ["assertion"])),
        ok=json_body(obj({"type": STR, "result": obj({"id": {}, "signature": STR, "signedTransaction": STR})})),
        errors=[("403", "signer_locked, unverified_transaction"), ("404", "request_not_found")]))
    add("/api/polkadot/requests/{id}/reject", "post", op(
        "rejectPolkadotRequest", "Reject", pk, SESSION, params=[rid], ok=json_body(obj({"type": STR, "error": STR})),
        errors=[("404", "request_not_found")]))

    # --- Operators ---
    ad = "Operators"
    dashboard = page("dashboard", "The operators' live dashboard", ad)
    dashboard["responses"]["403"] = html("who is not an operator: a page saying how to get in")
    add("/dashboard", "get", dashboard)
    add("/dashboard/confirm", "post", {
        "operationId": "dashboardConfirm", "summary": "An account --admin names confirms with the admin token once (the dashboard's form)",
        "tags": [ad], "security": SESSION,
        "requestBody": {"required": False, "content": {"application/x-www-form-urlencoded": {"schema": {"type": "object", "properties": {"token": STR}}}}},
        "responses": {"303": {"description": "to /dashboard: confirmed"},
                      "403": html("a page: sign in with the named account first, or the token is not this server's"),
                      "400": {"$ref": "#/components/responses/BadRequest"}, "413": {"$ref": "#/components/responses/TooLarge"},
                      "503": {"$ref": "#/components/responses/Unavailable"}}})
    add("/api/admin/users", "get", op("adminUsers", "Users, 50 a page by name", ad, ADMIN,
                                      params=[query("query", "a name's prefix"), query("cursor", "`next` of the page before")],
                                      ok=json_body(obj({"users": arr(obj({"username": STR, "isAnonymous": BOOL, "createdAt": TIME,
                                                                          "passkeys": arr(obj()), "hasNostrKey": BOOL, "clients": INT})),
                                                        "next": STR}, ["users"])), errors=[("403", "permission_denied")]))
    add("/api/admin/events", "get", op("adminEvents", "Recent activity, newest first", ad, ADMIN,
                                       params=[query("outcome", "ok or failed"), query("code", "an error code")],
                                       ok=json_body(obj({"events": arr(obj({"time": TIME, "category": STR, "event": STR, "outcome": STR}))}, ["events"])),
                                       errors=[("403", "permission_denied")]))
    add("/api/admin/stream", "get", {
        "operationId": "adminStream", "summary": "Activity as server-sent events", "tags": [ad], "security": ADMIN,
        "responses": {"200": {"description": "one event per activity", "content": {"text/event-stream": {"schema": STR}}},
                      "401": error("unauthorized"), "403": error("permission_denied"), "429": error("rate_limited"),
                      "503": error("store_unavailable")}})
    add("/api/admin/stats", "get", op("adminStats", "The last hour and the server's health", ad, ADMIN,
                                      ok=json_body(obj({"lastHour": obj(), "health": obj()}, ["lastHour", "health"])),
                                      errors=[("403", "permission_denied")]))
    add("/api/admin/lock-all", "post", op("adminLockAll", "The kill switch: every unlocked signer locked", ad, ADMIN,
                                          ok=json_body(obj({"locked": INT}, ["locked"])), errors=[("403", "permission_denied")]))
    uname = path_param("name", "the username")
    add("/api/admin/users/{name}/revoke-sessions", "post", op(
        "adminRevokeSessions", "End a user's sessions (an operator's session: confirmation admin.revoke_sessions)", ad, ADMIN, params=[uname],
        body=json_body(obj({"confirmation": ref("Confirmation")})), body_required=False, ok=json_body(obj({"revoked": BOOL})),
        errors=[("403", "permission_denied, confirmation_required"), ("404", "request_not_found: no such user")]))
    add("/api/admin/users/{name}", "delete", op(
        "adminRemoveUser", "Remove an account (an operator's session: confirmation admin.remove_user)", ad, ADMIN, params=[uname],
        body=json_body(obj({"confirmation": ref("Confirmation")})), body_required=False, ok=json_body(obj({"removed": BOOL})),
        errors=[("403", "permission_denied, confirmation_required"), ("404", "request_not_found: no such user")]))

    # --- Operations: health, metrics, well-known ---
    ops = "Operations"
    add("/healthz", "get", {"operationId": "health", "summary": "Ready to serve", "tags": [ops], "security": PUBLIC, "responses": {
        "200": json_body(obj({"status": {"type": "string", "const": "ok"}}, ["status"])),
        "503": json_body(obj({"status": {"type": "string", "enum": ["starting", "unavailable"]}, "reason": STR}, ["status"]),
                         "starting, or the store cannot read or write")}})
    add("/metrics", "get", {"operationId": "metrics", "summary": "Prometheus metrics (loopback and --metrics-from only)", "tags": [ops],
                            "security": PUBLIC, "responses": {"200": {"description": "text exposition format", "content": {"text/plain": {"schema": STR}}},
                                                              "403": error("permission_denied")}})
    for path, op_id, summary in [
        ("/.well-known/apple-app-site-association", "appleAppSiteAssociation", "webcredentials for --apple-app-id"),
        ("/.well-known/assetlinks.json", "assetLinks", "Android's asset links for --android-package"),
        ("/.well-known/webauthn", "relatedOrigins", "WebAuthn related origins (--related-origin)"),
    ]:
        add(path, "get", {"operationId": op_id, "summary": summary, "tags": [ops], "security": PUBLIC,
                          "responses": {"200": json_body({}), "404": error("request_not_found: not configured")}})
    add("/.well-known/nostr.json", "get", {"operationId": "nostrJson", "summary": "NIP-05 / NIP-46 discovery", "tags": [ops], "security": PUBLIC,
                                           "parameters": [query("name", "`_`")],
                                           "responses": {"200": json_body(obj({"names": obj(), "nip46": obj()}, ["names"])), **COMMON}})
    return P


def document():
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Keyfob",
            "version": "1.0.0",
            "summary": "Passkeys that hold your nostr key and Polkadot accounts",
            "description": "Keyfob's REST contract. docs/api.md explains each endpoint; this document is what clients generate from. "
                           "Bodies are JSON (`Content-Type: application/json`, at most 64 KiB); every field has one type and a field of "
                           "the wrong type is `400 invalid_request`. Apps send `Authorization: Bearer <token>` (the token of "
                           "`/verify-registration` or `/verify-authentication` asked with `Keyfob-Session: bearer`); browsers use the "
                           "session cookie, whose POST, PATCH and DELETE requests must carry an allowed `Origin`.",
            "license": {"name": "See the repository"},
        },
        "servers": [{"url": "http://localhost:8080", "description": "keyfob serve on its defaults"}],
        "tags": [{"name": t} for t in ["Passkeys", "Account", "Sealing", "Signer", "Approvals", "Bunker", "Polkadot", "Extension",
                                        "Operators", "Operations"]],
        "paths": operations(),
        "components": {
            "schemas": SCHEMAS,
            "responses": COMMON_RESPONSES,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "a session token"},
                "session": {"type": "apiKey", "in": "cookie", "name": "__Host-keyfob_session",
                            "description": "browsers' session cookie (`keyfob_session` on plain-http localhost)"},
                "adminToken": {"type": "http", "scheme": "bearer", "bearerFormat": "kfa_…", "description": "the operators' admin token"},
            },
        },
    }


def main():
    text = json.dumps(document(), indent=2, ensure_ascii=False) + "\n"
    targets = [os.path.join(ROOT, "docs", "openapi.json"), os.path.join(ROOT, "Public", "openapi.json")]
    if "--check" in sys.argv:
        stale = [t for t in targets if not os.path.exists(t) or open(t, encoding="utf-8").read() != text]
        if stale:
            sys.exit(f"stale: {', '.join(stale)}; run make openapi")
        return
    for target in targets:
        with open(target, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
