"""A relying party in Python with Keyfob's ceremony wire format, for `make load` to measure beside
Keyfob in the same run (BENCHMARKS.md): py_webauthn for the ceremonies, a bare ASGI app on
uvicorn (two workers, as one would deploy it on two cores), and SQLite in WAL mode for users,
passkeys, sessions and unfinished ceremonies (shared by the workers): as durable as Keyfob's SQLite
store (synchronous=NORMAL), a sign count updated and a session row written per login.

    PEER_DB=/tmp/peer-py.sqlite PEER_ORIGIN=http://localhost:18082 \
        uvicorn --app-dir Benchmarks/peers/python peer:app --host 127.0.0.1 --port 18082 --workers 2
"""
import hashlib
import json
import os
import secrets
import sqlite3
import time
import urllib.parse

from webauthn import (generate_authentication_options, generate_registration_options, options_to_json,
                      verify_authentication_response, verify_registration_response)
from webauthn.helpers import base64url_to_bytes
from webauthn.helpers.structs import AuthenticatorSelectionCriteria, ResidentKeyRequirement

RP_ID = os.environ.get("PEER_RP_ID", "localhost")
ORIGIN = os.environ.get("PEER_ORIGIN", "http://localhost:18082")
CEREMONY_SECONDS = 600  # long enough for the harness's pre-signed logins

SCHEMA = """
CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY, handle BLOB NOT NULL UNIQUE, name TEXT NOT NULL UNIQUE, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS credentials (id BLOB PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), public_key BLOB NOT NULL,
  sign_count INTEGER NOT NULL, created_at INTEGER NOT NULL, last_used_at INTEGER);
CREATE TABLE IF NOT EXISTS sessions (token_hash BLOB PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ceremonies (key TEXT PRIMARY KEY, challenge BLOB NOT NULL, username TEXT, handle BLOB, expires_at INTEGER NOT NULL);
"""


def connect():
    db = sqlite3.connect(os.environ.get("PEER_DB", "peer-py.sqlite"), isolation_level=None, timeout=5, check_same_thread=False)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.executescript(SCHEMA)
    return db


db = connect()


class Refusal(Exception):
    def __init__(self, status, code):
        self.status, self.code = status, code


def remember(challenge, username=None, handle=None):
    key = secrets.token_urlsafe(16)
    db.execute("INSERT INTO ceremonies VALUES (?, ?, ?, ?, ?)", (key, challenge, username, handle, int(time.time()) + CEREMONY_SECONDS))
    return key


def take(key):
    """The ceremony for `key`, removed: each challenge answers once."""
    row = db.execute("DELETE FROM ceremonies WHERE key = ? RETURNING challenge, username, handle, expires_at", (key,)).fetchone()
    if row is None or row[3] < time.time():
        raise Refusal(400, "challenge_not_found")
    return row


def with_key(options, key):
    document = json.loads(options_to_json(options))
    document["challengeKey"] = key
    return document


def registration_options(query, _body):
    name = (query.get("username") or [""])[0]
    if not name or len(name) > 64:
        raise Refusal(400, "invalid_username")
    handle = secrets.token_bytes(16)
    options = generate_registration_options(
        rp_id=RP_ID, rp_name="Python peer", user_name=name, user_id=handle,
        authenticator_selection=AuthenticatorSelectionCriteria(resident_key=ResidentKeyRequirement.REQUIRED))
    return with_key(options, remember(options.challenge, name, handle))


def fields(body):
    try:
        body = json.loads(body)
        return body, body["challengeKey"], body["cred"]
    except (ValueError, KeyError, TypeError):
        raise Refusal(400, "invalid_body")


def new_session(cursor, user_id):
    token = secrets.token_urlsafe(32)
    cursor.execute("INSERT INTO sessions VALUES (?, ?, ?)", (hashlib.sha256(token.encode()).digest(), user_id, int(time.time())))
    return token


def verify_registration(_query, body):
    body, key, cred = fields(body)
    challenge, username, handle, _ = take(key)
    if username != body.get("username"):
        raise Refusal(400, "challenge_not_found")
    try:
        verified = verify_registration_response(credential=cred, expected_challenge=challenge, expected_origin=ORIGIN, expected_rp_id=RP_ID)
    except Exception:
        raise Refusal(400, "verification_failed")
    now = int(time.time())
    try:
        db.execute("BEGIN IMMEDIATE")
        user_id = db.execute("INSERT INTO users (handle, name, created_at) VALUES (?, ?, ?)", (handle, username, now)).lastrowid
        db.execute("INSERT INTO credentials (id, user_id, public_key, sign_count, created_at) VALUES (?, ?, ?, ?, ?)",
                   (verified.credential_id, user_id, verified.credential_public_key, verified.sign_count, now))
        token = new_session(db, user_id)
        db.execute("COMMIT")
    except sqlite3.IntegrityError:
        db.execute("ROLLBACK")
        raise Refusal(409, "username_taken")
    return {"verified": True, "username": username, "token": token}


def authentication_options(_query, _body):
    options = generate_authentication_options(rp_id=RP_ID)
    return with_key(options, remember(options.challenge))


def verify_authentication(_query, body):
    _, key, cred = fields(body)
    challenge = take(key)[0]
    try:
        credential_id = base64url_to_bytes(cred["rawId"])
        handle = base64url_to_bytes(cred["response"]["userHandle"])
    except (KeyError, TypeError, ValueError):
        raise Refusal(400, "invalid_credential")
    # One read: the passkey with its account.
    row = db.execute("SELECT u.id, u.name, c.public_key, c.sign_count FROM credentials c JOIN users u ON u.id = c.user_id "
                     "WHERE c.id = ? AND u.handle = ?", (credential_id, handle)).fetchone()
    if row is None:
        raise Refusal(400, "verification_failed")
    user_id, name, public_key, sign_count = row
    try:
        verified = verify_authentication_response(
            credential=cred, expected_challenge=challenge, expected_rp_id=RP_ID, expected_origin=ORIGIN,
            credential_public_key=public_key, credential_current_sign_count=sign_count)
    except Exception:
        raise Refusal(400, "verification_failed")
    db.execute("BEGIN IMMEDIATE")
    # The counter moves only from what was read: a concurrent login with the same count loses.
    moved = db.execute("UPDATE credentials SET sign_count = ?, last_used_at = ? WHERE id = ? AND sign_count = ?",
                       (verified.new_sign_count, int(time.time()), credential_id, sign_count)).rowcount
    if moved != 1:
        db.execute("ROLLBACK")
        raise Refusal(409, "counter_conflict")
    token = new_session(db, user_id)
    db.execute("COMMIT")
    return {"verified": True, "username": name, "token": token}


ROUTES = {
    ("GET", "/generate-registration-options"): registration_options,
    ("POST", "/verify-registration"): verify_registration,
    ("GET", "/generate-authentication-options"): authentication_options,
    ("POST", "/generate-authentication-options"): authentication_options,
    ("POST", "/verify-authentication"): verify_authentication,
    ("GET", "/healthz"): lambda _q, _b: {"status": "ok"},
}


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if len(body) > 65536:
            break
        if not message.get("more_body"):
            break
    handler = ROUTES.get((scope["method"], scope["path"]))
    try:
        if handler is None:
            raise Refusal(404, "not_found")
        status, answer = 200, handler(urllib.parse.parse_qs(scope["query_string"].decode()), body)
    except Refusal as refusal:
        status, answer = refusal.status, {"error": refusal.code}
    payload = json.dumps(answer).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})
