"""A software passkey (ES256, "none" attestation) and a small JSON client, for tests that drive
Keyfob's ceremonies over HTTP without a browser. Needs the cryptography package."""
import base64
import hashlib
import hmac
import http.client
import json
import os
import ssl
import struct
import urllib.parse

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def cbor(value) -> bytes:
    """The little CBOR a 'none' attestation and a COSE key need."""
    def head(major, n):
        if n < 24:
            return bytes([major << 5 | n])
        if n < 256:
            return bytes([major << 5 | 24, n])
        if n < 65536:
            return bytes([major << 5 | 25]) + struct.pack(">H", n)
        return bytes([major << 5 | 26]) + struct.pack(">I", n)
    if isinstance(value, int):
        return head(0, value) if value >= 0 else head(1, -1 - value)
    if isinstance(value, bytes):
        return head(2, len(value)) + value
    if isinstance(value, str):
        return head(3, len(value.encode())) + value.encode()
    if isinstance(value, dict):
        return head(5, len(value)) + b"".join(cbor(k) + cbor(v) for k, v in value.items())
    raise TypeError(value)


class SoftKey:
    """One passkey for `rp_id`, used from `origin`; `counter` is what its next assertion reports."""

    def __init__(self, origin, rp_id="localhost", private_value=None, credential_id=None, prf_secret=None):
        self.origin = origin
        # hmac-secret's per-credential secret: set, this passkey answers the PRF extension.
        self.prf_secret = prf_secret
        self.rp_hash = hashlib.sha256(rp_id.encode()).digest()
        self.key = ec.derive_private_key(private_value, ec.SECP256R1()) if private_value else ec.generate_private_key(ec.SECP256R1())
        self.credential_id = credential_id or os.urandom(16)
        self.user_handle = None
        self.counter = 0

    @property
    def id(self):
        return b64(self.credential_id)

    def prf(self, salt):
        """The PRF output for `salt` (WebAuthn L3 §10.1.4: HMAC-SHA256 over SHA-256("WebAuthn PRF" 0x00 salt))."""
        return hmac.new(self.prf_secret, hashlib.sha256(b"WebAuthn PRF\x00" + salt).digest(), hashlib.sha256).digest()

    def prf_results(self, options, creating):
        """clientExtensionResults for the options' PRF inputs (eval, or evalByCredential for this passkey)."""
        prf = (options.get("extensions") or {}).get("prf")
        if not prf or self.prf_secret is None:
            return None
        inputs = prf.get("eval") or (prf.get("evalByCredential") or {}).get(self.id)
        if not inputs:
            return {"prf": {"enabled": True}} if creating else None
        results = {"first": b64(self.prf(unb64(inputs["first"])))}
        if inputs.get("second"):
            results["second"] = b64(self.prf(unb64(inputs["second"])))
        return {"prf": {"enabled": True, "results": results} if creating else {"results": results}}

    def registration(self, options):
        """The /verify-registration body answering `options`."""
        numbers = self.key.public_key().public_numbers()
        cose = cbor({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")})
        client_data = json.dumps({"type": "webauthn.create", "challenge": options["challenge"], "origin": self.origin}).encode()
        auth_data = (self.rp_hash + bytes([0x45]) + struct.pack(">I", self.counter) + bytes(16)
                     + struct.pack(">H", len(self.credential_id)) + self.credential_id + cose)
        self.user_handle = unb64(options["user"]["id"])
        cred = {"id": self.id, "rawId": self.id, "type": "public-key",
                "response": {"clientDataJSON": b64(client_data), "attestationObject": b64(cbor({"fmt": "none", "attStmt": {}, "authData": auth_data}))}}
        extensions = self.prf_results(options, creating=True)
        if extensions:
            cred["clientExtensionResults"] = extensions
        return {"username": options["user"]["name"], "challengeKey": options["challengeKey"], "cred": cred}

    def assertion(self, options, counter=None):
        """The /verify-authentication body answering `options`, reporting `counter` (default: the next one)."""
        if counter is None:
            self.counter += 1
            counter = self.counter
        client_data = json.dumps({"type": "webauthn.get", "challenge": options["challenge"], "origin": self.origin}).encode()
        auth_data = self.rp_hash + bytes([0x05]) + struct.pack(">I", counter)
        signature = self.key.sign(auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256()))
        cred = {"id": self.id, "rawId": self.id, "type": "public-key",
                "response": {"clientDataJSON": b64(client_data), "authenticatorData": b64(auth_data),
                             "signature": b64(signature), "userHandle": b64(self.user_handle)}}
        extensions = self.prf_results(options, creating=False)
        if extensions:
            cred["clientExtensionResults"] = extensions
        return {"challengeKey": options["challengeKey"], "cred": cred}


class Client:
    """JSON over one keep-alive connection to `base`, sending `origin` as the browser would."""

    def __init__(self, base, origin, timeout=30):
        self.origin = origin
        url = urllib.parse.urlsplit(base)
        self.https = url.scheme == "https"
        self.host, self.port, self.timeout = url.hostname, url.port or (443 if self.https else 80), timeout
        self.connection = None

    def connect(self):
        if self.https:  # the tests' proxy has a throwaway self-signed certificate
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=ssl._create_unverified_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def call(self, method, path, body=None, token=None, client=None):
        """(status, JSON reply) — never raises on an HTTP status."""
        # A bearer client: it asks for its session token in the JSON of a ceremony (browsers never get it).
        headers = {"Origin": self.origin, "Keyfob-Session": "bearer"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if client:
            headers["X-Forwarded-For"] = client
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(2):
            if self.connection is None:
                self.connection = self.connect()
            try:
                self.connection.request(method, path, body=data, headers=headers)
                response = self.connection.getresponse()
                payload = response.read()
                break
            except (http.client.HTTPException, ConnectionError):
                self.connection.close()
                self.connection = None
                if attempt:
                    raise
        try:
            reply = json.loads(payload) if payload else None
        except ValueError:
            reply = payload
        return response.status, reply

    def confirmation(self, key, action, token, target=""):
        """An assertion by `key` made for `action` on `target` (`/api/confirmations`), as account changes take it."""
        status, reply = self.call("POST", "/api/confirmations", {"action": action, "target": target}, token=token)
        assert status == 200, (status, reply)
        options = dict(reply["options"], challengeKey="")
        return key.assertion(options)["cred"]

    def register(self, key, username, token=None, client=None, confirm_with=None, seal=False):
        """A new account; with `token` and `confirm_with` (an older passkey of the account), a passkey added to it."""
        if confirm_with is not None:
            body = {"username": username, "confirmation": self.confirmation(confirm_with, "passkey.add", token)}
            status, options = self.call("POST", "/generate-registration-options", body, token=token, client=client)
        else:
            status, options = self.call("GET", f"/generate-registration-options?username={urllib.parse.quote(username)}",
                                        token=token, client=client)
        assert status == 200, (status, options)
        body = key.registration(options)
        if seal:  # the key sealed by this passkey from the start
            body["seal"] = True
        return self.call("POST", "/verify-registration", body, token=token, client=client)

    def sign_in(self, key, counter=None, client=None):
        status, options = self.call("POST", "/generate-authentication-options", {}, client=client)
        assert status == 200, (status, options)
        return self.call("POST", "/verify-authentication", key.assertion(options, counter), client=client)
