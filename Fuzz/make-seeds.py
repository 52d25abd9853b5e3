#!/usr/bin/env python3
"""Writes the seed corpora (Fuzz/seeds-<target>/) from the test vectors in Tests/Vectors.
The seeds are committed; re-run this after adding vectors. libFuzzer writes what it finds to
Fuzz/corpus-<target>/ (not committed)."""
import base64
import hashlib
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VECTORS = os.path.join(ROOT, "Tests", "Vectors")


def b64url(text):
    text = text.replace("+", "-").replace("/", "_").rstrip("=")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def write(target, data):
    folder = os.path.join(ROOT, "Fuzz", f"seeds-{target}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def webauthn():
    folder = os.path.join(VECTORS, "webauthn")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".json"):
            continue
        vector = json.load(open(os.path.join(folder, name)))
        response = vector.get("credential", {}).get("response", {})
        for field in ("attestationObject", "authenticatorData", "clientDataJSON"):
            if isinstance(response.get(field), str):
                write("WebAuthnFuzz", b64url(response[field]))
        if isinstance(vector.get("credential_public_key_b64url"), str):
            write("WebAuthnFuzz", b64url(vector["credential_public_key_b64url"]))


def nostr():
    folder = os.path.join(VECTORS, "nostr")
    serial = json.load(open(os.path.join(folder, "generated_nip01_serialization.json")))
    for item in serial["valid"]:
        write("NostrFuzz", json.dumps(item["event"]).encode())
    zaps = json.load(open(os.path.join(folder, "generated_nip57_private_zap.json")))
    for item in zaps["vectors"]:
        write("NostrFuzz", json.dumps(item["zap_request"]).encode())
    nip44 = json.load(open(os.path.join(folder, "nip44.vectors.json")))
    for item in nip44["v2"]["valid"]["encrypt_decrypt"][:10]:
        write("NostrFuzz", item["payload"].encode())
    nip19 = json.load(open(os.path.join(folder, "nip19.json")))
    for text in json.dumps(nip19).split('"'):
        if text.startswith(("npub1", "nsec1", "note1", "nprofile1", "nevent1")):
            write("NostrFuzz", text.encode())
    for url in ["nostrsigner:?type=get_public_key&callbackUrl=https://client.example/cb",
                "nostrsigner:%7B%22kind%22%3A1%7D?type=sign_event&callbackUrl=primal://cb&returnType=event",
                "https://keyfob.example/app/sign?payload=eyJraW5kIjoxfQ&cb=https://client.example/cb&origin=x"]:
        write("NostrFuzz", url.encode())
    # NIP-46 messages and URLs, NIP-01 relay frames (the bunker's inputs).
    key = "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
    for text in ['{"id":"r1","method":"sign_event","params":["{\\"kind\\":1,\\"content\\":\\"hi\\",\\"tags\\":[]}"]}',
                 '{"id":"a","result":"auth_url","error":"https://keyfob.example/approve/x"}',
                 f"bunker://{key}?relay=wss%3A%2F%2Fr.example&secret=abc",
                 f"nostrconnect://{key}?relay=wss%3A%2F%2Fr&secret=x&perms=sign_event%3A1%2Cnip44_encrypt&name=App",
                 f'["REQ","s1",{{"kinds":[24133],"#p":["{key}"],"since":1,"limit":5}}]', '["CLOSE","s1"]']:
        write("NostrFuzz", text.encode())


if __name__ == "__main__":
    webauthn()
    nostr()
    for target in ("WebAuthnFuzz", "NostrFuzz"):
        print(target, len(os.listdir(os.path.join(ROOT, "Fuzz", f"seeds-{target}"))), "seeds")
