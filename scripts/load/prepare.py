#!/usr/bin/env python3
"""Load-test preparation: registers K users with a software ES256 authenticator ("none"
attestation), then fetches N sign-in options and signs the N assertions ahead of time, writing one
/verify-authentication body per line (each used once by wrk). Also writes bearer tokens for the
signer benchmark. Needs python3-cryptography.

    scripts/load/prepare.py http://127.0.0.1:8080 --origin http://localhost:8080 --users 1000 --logins 20000 --out /tmp/keyfob-load
"""
import argparse
import base64
import http.client
import hashlib
import json
import multiprocessing
import os
import struct
import sys
import urllib.parse

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Tests", "e2e"))
from softkey import b64, cbor, unb64  # noqa: E402  (the tests' software passkey: one CBOR writer)


class Session:
    """One keep-alive connection (a new connection per call would measure Python, not Keyfob)."""
    def __init__(self, base, origin):
        self.origin = origin
        url = urllib.parse.urlsplit(base)
        self.connection = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=30)

    def call(self, path, body=None, token=None, client=None):
        headers = {"Content-Type": "application/json", "Origin": self.origin, "Keyfob-Session": "bearer"}
        if client:
            headers["X-Forwarded-For"] = client  # the server trusts 127.0.0.1 as a proxy (scripts/load/run.py)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None if body is None else json.dumps(body).encode()
        self.connection.request("POST" if data else "GET", path, body=data, headers=headers)
        response = self.connection.getresponse()
        payload = response.read()
        if response.status >= 300:
            raise SystemExit(f"{path}: HTTP {response.status} {payload[:300]!r} (are the server's limits raised? see scripts/load/run.py)")
        return json.loads(payload)


def register(args, i, rp_hash, s):
    key = ec.generate_private_key(ec.SECP256R1())
    numbers = key.public_key().public_numbers()
    cose = cbor({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")})
    credential_id = os.urandom(16)
    options = s.call(f"/generate-registration-options?username=load{i}-{os.getpid()}", client=f"10.199.{i // 256 % 256}.{i % 256}")
    client_data = json.dumps({"type": "webauthn.create", "challenge": options["challenge"], "origin": args.origin}).encode()
    auth_data = rp_hash + bytes([0x45]) + b"\0\0\0\0" + bytes(16) + struct.pack(">H", 16) + credential_id + cose
    attestation = cbor({"fmt": "none", "attStmt": {}, "authData": auth_data})
    reply = s.call("/verify-registration", {"username": options["user"]["name"], "challengeKey": options["challengeKey"], "cred": {
        "id": b64(credential_id), "rawId": b64(credential_id), "type": "public-key",
        "response": {"clientDataJSON": b64(client_data), "attestationObject": b64(attestation)}}})
    return key.private_numbers().private_value, credential_id, unb64(options["user"]["id"]), reply["token"]


def sign_logins(job):
    """One worker: fetches options and signs the assertions for logins start, start+step, ..."""
    args, users, start, step = job
    s = Session(args.base, args.origin)
    rp_hash = hashlib.sha256(args.rp_id.encode()).digest()
    keys = [ec.derive_private_key(u[0], ec.SECP256R1()) for u in users]
    lines = []
    for n in range(start, args.logins, step):
        key, (_, credential_id, handle, _) = keys[n % len(users)], users[n % len(users)]
        # One client address per login, as many people signing in would be.
        options = s.call("/generate-authentication-options", client=f"10.{200 + n // 65536 % 50}.{n // 256 % 256}.{n % 256}")
        client_data = json.dumps({"type": "webauthn.get", "challenge": options["challenge"], "origin": args.origin}).encode()
        auth_data = rp_hash + bytes([0x05]) + b"\0\0\0\0"   # counter stays 0, like synced passkeys
        signature = key.sign(auth_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256()))
        lines.append(json.dumps({"challengeKey": options["challengeKey"], "cred": {
            "id": b64(credential_id), "rawId": b64(credential_id), "type": "public-key",
            "response": {"clientDataJSON": b64(client_data), "authenticatorData": b64(auth_data),
                         "signature": b64(signature), "userHandle": b64(handle)}}}))
    return lines


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("base")
    parser.add_argument("--origin", default="http://localhost:8080")
    parser.add_argument("--rp-id", default="localhost")
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--logins", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--out", default="/tmp/keyfob-load")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    s = Session(args.base, args.origin)
    rp_hash = hashlib.sha256(args.rp_id.encode()).digest()
    users = [register(args, i, rp_hash, s) for i in range(args.users)]
    with open(os.path.join(args.out, "tokens.txt"), "w") as f:
        f.write("\n".join(u[3] for u in users) + "\n")
    with multiprocessing.Pool(args.workers) as pool:
        parts = pool.map(sign_logins, [(args, users, w, args.workers) for w in range(args.workers)])
    with open(os.path.join(args.out, "logins.jsonl"), "w") as f:
        # Interleaved back into login order, so each wrk thread's share mixes users.
        for n in range(args.logins):
            f.write(parts[n % args.workers][n // args.workers] + "\n")
    print(f"{len(users)} users, {args.logins} signed logins in {args.out}")


if __name__ == "__main__":
    main()
