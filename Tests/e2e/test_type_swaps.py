"""Every POST, PATCH and DELETE endpoint that reads a JSON body, sent a valid-shaped body with each field
(at every depth) swapped for a string, a whole number, a fraction, a boolean, null, an array and an
object, against the real binary (#41): every answer is a JSON error below 500 (or a success), and
the process is alive and answering afterwards. (A confirmation or assertion sent as "x", 1, true,
null or 7 once killed the process: Foundation traps on Linux where Darwin throws.)"""
import base64
import copy
import json
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
from conftest import healthy  # noqa: E402
from softkey import Client, SoftKey  # noqa: E402

SWAPS = ["x", 7, 2.5, True, None, [], {}, [1, "a"], {"k": "v"}]


def paths(value, prefix=()):
    """Every field's path in a JSON body, nested ones included (list items by index)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield prefix + (key,)
            yield from paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            yield prefix + (index,)
            yield from paths(item, prefix + (index,))


def swapped(body, path, value):
    body = copy.deepcopy(body)
    target = body
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return body


def test_every_post_endpoint_survives_a_type_swap_at_every_field(server):
    c = Client(f"http://127.0.0.1:{server.port}", server.url)
    key = SoftKey(server.url)
    status, reply = c.register(key, "swapper")
    assert status == 200, reply
    token = reply["token"]
    status, created = c.call("POST", "/api/polkadot/accounts", {"name": "Main"}, token=token)
    assert status == 201, created
    account, address = created["id"], created["address"]
    seed = lambda msg_type, request: {"id": "1", "msgType": msg_type, "origin": "dapp-request", "request": request,  # noqa: E731
                                      "url": "https://dapp.example/"}
    assert c.call("POST", "/api/polkadot/message", seed("pub(authorize.tab)", None), token=token)[0] == 200
    raw = {"address": address, "data": "0x1234", "type": "bytes"}
    status, asked = c.call("POST", "/api/polkadot/message", seed("pub(bytes.sign)", raw), token=token)
    assert status == 202, asked
    polkadot_id = asked["pending"]["id"]
    # A nostr request that needs a passkey (kind 22242), claimed by this session.
    event = {"kind": 22242, "content": "", "tags": [["relay", "wss://r.example"]], "created_at": 1_700_000_000}
    payload = base64.urlsafe_b64encode(json.dumps(event).encode()).decode().rstrip("=")
    connection = c.connect()
    connection.request("GET", f"/app/sign?payload={payload}&cb={urllib.parse.quote('https://client.example/cb', safe='')}",
                       headers={"Authorization": f"Bearer {token}"})
    response = connection.getresponse()
    response.read()
    location = response.getheader("Location") or ""
    assert response.status == 303 and location.startswith("/approve/"), (response.status, location)
    nostr_id = location[len("/approve/"):]
    connection.close()
    assert c.call("GET", f"/api/requests/{nostr_id}", token=token)[0] == 200
    status, options = c.call("POST", "/generate-authentication-options", {})
    assertion = key.assertion(options)
    status, registration_options = c.call("GET", "/generate-registration-options?username=someone")
    registration = SoftKey(server.url).registration(registration_options)
    cred = assertion["cred"]

    endpoints = [
        ("POST", "/generate-registration-options", {"username": "x", "confirmation": cred}),
        ("POST", "/verify-registration", registration),
        ("POST", "/generate-authentication-options", {"username": "swapper"}),
        ("POST", "/verify-authentication", {"challengeKey": "", "cred": cred, "prfOutput": "AAAA"}),
        ("POST", "/api/confirmations", {"action": "passkey.remove", "target": "x"}),
        ("POST", "/logout?everywhere=1", {"confirmation": cred}),
        ("PATCH", f"/account/credentials/{key.id}", {"name": "laptop"}),
        ("DELETE", f"/account/credentials/{key.id}", {"confirmation": cred}),
        ("POST", "/api/signer/key", {"nsec": "nsec1x", "confirmation": cred}),
        ("POST", "/api/signer/key/check", {"ncryptsec": "ncryptsec1x", "password": "long enough"}),
        ("POST", "/api/signer/key/export", {"password": "long enough", "confirmation": cred}),
        ("POST", "/api/signer/sign_event", {"id": "1", "event": {"kind": 1, "content": "hi", "tags": [["t", "x"]], "created_at": 1}}),
        ("POST", "/api/signer/nip44_encrypt", {"plaintext": "hi", "pubkey": "00" * 32}),
        ("POST", "/api/signer/nip04_decrypt", {"ciphertext": "x?iv=y", "pubkey": "00" * 32}),
        ("POST", "/api/signer/seal", {"cred": cred, "confirmBackup": True}),
        ("POST", "/api/signer/unseal", {"cred": cred}),
        ("POST", "/api/signer/unlock", {"cred": cred}),
        ("POST", "/api/signer/nostrconnect", {"uri": "nostrconnect://" + "00" * 32 + "?relay=wss://r.example&secret=s"}),
        ("POST", f"/api/requests/{nostr_id}/challenge", {}),
        ("POST", f"/api/requests/{nostr_id}/approve", {"remember": "once", "preset": "everyday", "assertion": cred, "confirmation": cred}),
        ("POST", f"/api/requests/{nostr_id}/reject", {"remember": "once"}),
        ("POST", "/api/polkadot/accounts", {"name": "n", "network": 0, "type": "sr25519", "mnemonic": "x", "path": "//a",
                                            "backup": {"encoded": "x"}, "password": "p"}),
        ("POST", f"/api/polkadot/accounts/{account}/export", {"password": "long enough", "confirmation": cred}),
        ("POST", f"/api/polkadot/accounts/{account}/remove", {"confirmation": cred}),
        ("POST", "/api/polkadot/message", seed("pub(bytes.sign)", raw)),
        ("POST", f"/api/polkadot/requests/{polkadot_id}/challenge", {}),
        ("POST", f"/api/polkadot/requests/{polkadot_id}/approve", {"assertion": cred}),
        ("POST", f"/api/polkadot/requests/{polkadot_id}/reject", {}),
    ]  # (POST /dashboard/confirm takes an HTML form, not JSON: a page answers it)
    failures, sent = [], 0
    for method, path, body in endpoints:
        # The whole body swapped too (a top-level string or number is what once trapped).
        variants = [(("<body>",), value) for value in SWAPS] + [(p, v) for p in paths(body) for v in SWAPS]
        for where, value in variants:
            sent += 1
            mutated = value if where == ("<body>",) else swapped(body, where, value)
            status, reply = c.call(method, path, mutated, token=token)
            well_formed = isinstance(reply, dict) and (status < 400 or ("error" in reply and "message" in reply))
            if status >= 500 or not well_formed:
                failures.append((method, path, where, value, status, reply))
    assert not failures, f"{len(failures)} of {sent}: {failures[:5]}"
    assert sent > 800, sent
    assert server.process.poll() is None and healthy(server.port)
    assert "fatal error" not in server.logs().lower()
