"""A sealed account against someone holding a copy of the database files (WAL included) and the
master key (#24). This test reads the copy with its own code — Python's `cryptography`, the key
derivations and additional data that docs/security.md states, nothing of Keyfob's — and finds that
the master key opens its own layer and nothing more: no nostr key, no NIP-46 signer key, no
reply and no waiting request. The account is sealed at sign-up, so no server-protected copy of
its key ever existed."""
import asyncio
import os
import shutil
import sqlite3
import tempfile
from datetime import timedelta

import nostr_sdk as n
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from softkey import Client, SoftKey
from test_nip46_relay import approve_next, bunker_url

PURPOSES = ["keyfob nostr-key kek v1", "keyfob bunker-key kek v1", "keyfob pending-request kek v1", "keyfob derived-secret key v1"]


def derived_keys(master):
    return [HKDF(algorithm=hashes.SHA256(), length=32, salt=b"keyfob", info=info.encode()).derive(master) for info in PURPOSES]


def x_only(secret):
    """The x-only public key of a 32-byte secp256k1 secret, hex; None when it is not one."""
    value = int.from_bytes(secret, "big")
    if not 0 < value < 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141:
        return None
    return ec.derive_private_key(value, ec.SECP256K1()).public_key().public_numbers().x.to_bytes(32, "big").hex()


def test_a_copy_of_the_database_and_the_master_key_opens_nothing_of_a_sealed_account(server):
    c = Client(f"http://127.0.0.1:{server.port}", server.url)
    key = SoftKey(server.url, prf_secret=os.urandom(32))
    status, reply = c.register(key, "sealy", seal=True)
    assert status == 200 and reply["sealsKey"] is True, reply
    token = reply["token"]
    pubkey = c.call("POST", "/api/signer/get_public_key", {}, token=token)[1]["result"]
    url, signer, _, _ = bunker_url(c, token)
    peer = n.Keys.generate()
    signed_marker, secret_marker, waiting_marker = "MARKER-signed-4f1c", "MARKER-plaintext-9b2e", "MARKER-waiting-77d0"

    async def session():
        remote = n.NostrConnect(n.NostrConnectUri.parse(url["url"]), n.Keys.generate(), timedelta(seconds=20), None)
        assert (await remote.get_public_key_async()).to_hex() == pubkey
        signing = asyncio.create_task(remote.sign_event_async(
            n.EventBuilder(n.Kind(1), signed_marker).finalize_unsigned(n.PublicKey.parse(pubkey))))
        await asyncio.to_thread(approve_next, c, token, {"remember": "once"})
        signed = await signing
        from_peer = n.nip44_encrypt(peer.secret_key(), n.PublicKey.parse(pubkey), secret_marker, n.Nip44Version.V2)
        decrypting = asyncio.create_task(remote.nip44_decrypt_async(peer.public_key(), from_peer))
        await asyncio.to_thread(approve_next, c, token, {"remember": "once"})
        plaintext = await decrypting
        # One more that nobody approves: it waits, sealed, while the copy is taken.
        waiting = asyncio.create_task(remote.sign_event_async(
            n.EventBuilder(n.Kind(1), waiting_marker).finalize_unsigned(n.PublicKey.parse(pubkey))))
        for _ in range(100):
            if c.call("GET", "/api/requests", token=token)[1]["requests"]:
                break
            await asyncio.sleep(0.05)
        copy = tempfile.mkdtemp(prefix="keyfob-copy-")
        for name in os.listdir(server.data):
            if name.startswith("keyfob.sqlite") or name == "master.key":
                shutil.copy(os.path.join(server.data, name), copy)
        waiting.cancel()
        return signed, plaintext, copy

    signed, plaintext, copy = asyncio.run(session())
    assert signed.verify() and signed.content() == signed_marker and plaintext == secret_marker

    master = open(os.path.join(copy, "master.key"), "rb").read()
    assert len(master) == 32
    keys = derived_keys(master)
    raw = b"".join(open(os.path.join(copy, f), "rb").read() for f in os.listdir(copy) if f.startswith("keyfob.sqlite"))
    for marker in (secret_marker, waiting_marker):
        assert marker.encode() not in raw, f"{marker} is in the database files in the clear"

    db = sqlite3.connect(os.path.join(copy, "keyfob.sqlite"))
    user_id = db.execute("SELECT id FROM users WHERE username = 'sealy'").fetchone()[0]
    request_ids = [r[0] for r in db.execute("SELECT id FROM signer_requests")]
    assert db.execute("SELECT count(*) FROM signer_requests WHERE state = 'pending'").fetchone()[0] >= 1
    assert db.execute("SELECT passkey_sealed FROM bunker_signers WHERE user_id = ?", (user_id,)).fetchone()[0] == 1
    # Every additional data the docs name, for this user and these requests.
    aads = [f"keyfob:{kind}:{version}:{user_id}".encode() for kind in ("nostr-key", "passkey-sealed-nostr-key") for version in range(1, 5)]
    aads += [f"keyfob:bunker-signer{suffix}:{user_id}".encode() for suffix in ("", "-sealed")]
    aads += [f"keyfob:pending-request:{rid}".encode() for rid in request_ids]

    opened = []
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
        for row in db.execute(f"SELECT * FROM {table}"):
            values = dict(zip(columns, row))
            for value in row:
                blob = value if isinstance(value, bytes) else (value.encode() if isinstance(value, str) else None)
                if blob is None:
                    continue
                assert secret_marker.encode() not in blob and waiting_marker.encode() not in blob
                candidates = []
                if len(blob) > 28:
                    candidates.append((blob[:12], blob[12:]))
                nonce = values.get("nonce")
                if isinstance(nonce, bytes) and len(nonce) == 12 and blob is not nonce:
                    candidates.append((nonce, blob))
                for key_bytes in keys:
                    for nonce_bytes, ciphertext in candidates:
                        for aad in aads:
                            try:
                                opened.append(AESGCM(key_bytes).decrypt(nonce_bytes, ciphertext, aad))
                            except Exception:
                                pass
    # The master key opens its own layers (so the test really tried) and finds only ciphertext.
    assert len(opened) >= 2, "the master key opened nothing: the test did not find the key rows"
    for plain in opened:
        for marker in (signed_marker, secret_marker, waiting_marker):
            assert marker.encode() not in plain
        for start in range(0, max(1, len(plain) - 31)):
            assert x_only(plain[start:start + 32]) not in (pubkey, signer), "a copy of the database and master key opened a key"
