"""A sealed account against someone holding a copy of the database files (WAL included) and the
master key (#24). This test reads the copy with its own code — Python's `cryptography`, the key
derivations and additional data that docs/security.md states, nothing of Keyfob's — and finds that
the master key opens its own layer and nothing more: no nostr key, no NIP-46 signer key, no
reply and no waiting request. The account is sealed at sign-up, so no server-protected copy of
its key ever existed."""
import asyncio
import base64
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import urllib.parse
import uuid
from datetime import timedelta

import nostr_sdk as n
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from conftest import Server
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


def sealed_account_at_work(server, copy_database):
    """A sealed sign-up, its NIP-46 signer used (a note signed, a NIP-44 message decrypted) and one
    request left waiting; then `copy_database()` while it waits. Returns what the copy must not
    give: (the nostr pubkey, the signer pubkey, the markers, what copy_database returned)."""
    c = Client(f"http://127.0.0.1:{server.port}", server.url)
    key = SoftKey(server.url, prf_secret=os.urandom(32))
    status, reply = c.register(key, "sealy", seal=True)
    assert status == 200 and reply["sealsKey"] is True, reply
    token = reply["token"]
    pubkey = c.call("POST", "/api/signer/get_public_key", {}, token=token)[1]["result"]
    url, signer, _, _ = bunker_url(c, token)
    peer = n.Keys.generate()
    markers = ("MARKER-signed-4f1c", "MARKER-plaintext-9b2e", "MARKER-waiting-77d0")

    async def session():
        remote = n.NostrConnect(n.NostrConnectUri.parse(url["url"]), n.Keys.generate(), timedelta(seconds=20), None)
        assert (await remote.get_public_key_async()).to_hex() == pubkey
        signing = asyncio.create_task(remote.sign_event_async(
            n.EventBuilder(n.Kind(1), markers[0]).finalize_unsigned(n.PublicKey.parse(pubkey))))
        await asyncio.to_thread(approve_next, c, token, {"remember": "once"})
        signed = await signing
        from_peer = n.nip44_encrypt(peer.secret_key(), n.PublicKey.parse(pubkey), markers[1], n.Nip44Version.V2)
        decrypting = asyncio.create_task(remote.nip44_decrypt_async(peer.public_key(), from_peer))
        await asyncio.to_thread(approve_next, c, token, {"remember": "once"})
        plaintext = await decrypting
        # One more that nobody approves: it waits, sealed, while the copy is taken.
        waiting = asyncio.create_task(remote.sign_event_async(
            n.EventBuilder(n.Kind(1), markers[2]).finalize_unsigned(n.PublicKey.parse(pubkey))))
        for _ in range(100):
            if c.call("GET", "/api/requests", token=token)[1]["requests"]:
                break
            await asyncio.sleep(0.05)
        copied = copy_database()
        waiting.cancel()
        return signed, plaintext, copied

    signed, plaintext, copied = asyncio.run(session())
    assert signed.verify() and signed.content() == markers[0] and plaintext == markers[1]
    return pubkey, signer, markers, copied


def nothing_opens(master, tables, pubkey, signer, markers):
    """Every value of every row (`tables`: name → list of {column: value}) tried with every key the
    master key gives and every additional data the docs name: the master key opens its own layers
    and finds no key, reply or plaintext."""
    keys = derived_keys(master)
    user_id = next(r["id"] for r in tables["users"] if r["username"] == "sealy")
    request_ids = [r["id"] for r in tables["signer_requests"]]
    assert any(r["state"] == "pending" for r in tables["signer_requests"])
    assert any(r["user_id"] == user_id and r["passkey_sealed"] in (1, True) for r in tables["bunker_signers"])
    aads = [f"keyfob:{kind}:{version}:{user_id}".encode() for kind in ("nostr-key", "passkey-sealed-nostr-key") for version in range(1, 5)]
    aads += [f"keyfob:bunker-signer{suffix}:{user_id}".encode() for suffix in ("", "-sealed")]
    aads += [f"keyfob:pending-request:{rid}".encode() for rid in request_ids]
    opened = []
    for rows in tables.values():
        for values in rows:
            for value in values.values():
                blob = value if isinstance(value, bytes) else (value.encode() if isinstance(value, str) else None)
                if blob is None:
                    continue
                for marker in markers[1:]:
                    assert marker.encode() not in blob, f"{marker} is stored in the clear"
                candidates = [(blob[:12], blob[12:])] if len(blob) > 28 else []
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
    # The master key opens its own layers (so this really tried) and finds only ciphertext.
    assert len(opened) >= 2, "the master key opened nothing: the key rows were not found"
    for plain in opened:
        for marker in markers:
            assert marker.encode() not in plain
        for start in range(0, max(1, len(plain) - 31)):
            assert x_only(plain[start:start + 32]) not in (pubkey, signer), "a copy of the database and master key opened a key"


def test_a_copy_of_the_database_and_the_master_key_opens_nothing_of_a_sealed_account(server):
    def copy_files():
        copy = tempfile.mkdtemp(prefix="keyfob-copy-")
        for name in os.listdir(server.data):
            if name.startswith("keyfob.sqlite") or name == "master.key":
                shutil.copy(os.path.join(server.data, name), copy)
        return copy

    pubkey, signer, markers, copy = sealed_account_at_work(server, copy_files)
    master = open(os.path.join(copy, "master.key"), "rb").read()
    assert len(master) == 32
    raw = b"".join(open(os.path.join(copy, f), "rb").read() for f in os.listdir(copy) if f.startswith("keyfob.sqlite"))
    for marker in markers[1:]:
        assert marker.encode() not in raw, f"{marker} is in the database files in the clear"
    db = sqlite3.connect(os.path.join(copy, "keyfob.sqlite"))
    tables = {}
    for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
        columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
        tables[table] = [dict(zip(columns, row)) for row in db.execute(f"SELECT * FROM {table}")]
    nothing_opens(master, tables, pubkey, signer, markers)


def test_the_same_copy_from_postgresql_opens_nothing(tmp_path):
    """The same on PostgreSQL, read with psql. The docs' exception (old row versions stay in the
    table's pages until VACUUM, and in WAL archives) does not arise: sealed at sign-up, the key
    never had a server-protected row."""
    base = os.environ.get("KEYFOB_TEST_POSTGRES")
    assert base, "KEYFOB_TEST_POSTGRES is not set: run through `make test` or `scripts/postgres.sh run pytest Tests/e2e`"
    schema = f"e2e_{uuid.uuid4().hex[:16]}"
    master = os.urandom(32)
    server = Server(args=["--database", f"{base}?schema={schema}"],
                    env={"KEYFOB_MASTER_KEY": base64.b64encode(master).decode()}).start()
    url = urllib.parse.urlsplit(base)

    def psql(query):
        result = subprocess.run(["psql", "-h", url.hostname, "-p", str(url.port), "-U", url.username or "keyfob",
                                 "-d", url.path.lstrip("/"), "-Atc", query], capture_output=True, text=True, check=True)
        return [line for line in result.stdout.splitlines() if line]

    def dump():
        tables = {}
        for table in psql(f"SELECT table_name FROM information_schema.tables WHERE table_schema = '{schema}'"):
            rows = [json.loads(line) for line in psql(f"SELECT row_to_json(t) FROM {schema}.{table} t")]
            # bytea comes as "\\x<hex>".
            tables[table] = [{k: bytes.fromhex(v[2:]) if isinstance(v, str) and v.startswith("\\x") else v for k, v in r.items()}
                             for r in rows]
        return tables

    try:
        pubkey, signer, markers, tables = sealed_account_at_work(server, dump)
    finally:
        server.stop()
    nothing_opens(master, tables, pubkey, signer, markers)
