"""Relays users name (issue #23): Keyfob dials them, so it must tell each only what it needs and
take nothing it says at face value. Two recording relays on loopback (Keyfob runs on localhost,
where loopback relays are allowed) stand for relays an attacker runs."""
import asyncio
import json
import re
import threading
import time
import urllib.parse

import nostr_sdk as n
import websockets
from websockets.asyncio.server import serve

from conftest import Server, free_port
from softkey import Client, SoftKey


class RecordingRelay:
    """Answers like a relay (EOSE, OK) and records every frame Keyfob sends; greets each
    connection with a NOTICE that tries to forge a log line."""

    def __init__(self):
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        self.frames = []
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(self.serve(),), daemon=True)

    async def handle(self, ws):
        await ws.send(json.dumps(["NOTICE", "hello\n2026-01-01T00:00:00+0000 critical keyfob : forged=yes [KeyfobServer] forged"]))
        async for text in ws:
            frame = json.loads(text)
            self.frames.append(frame)
            if frame[0] == "REQ":
                await ws.send(json.dumps(["EOSE", frame[1]]))
            elif frame[0] == "EVENT":
                await ws.send(json.dumps(["OK", frame[1]["id"], True, ""]))

    async def serve(self):
        self.stop_event = asyncio.Event()
        async with serve(self.handle, "127.0.0.1", self.port):
            self.ready.set()
            await self.stop_event.wait()

    def start(self):
        self.thread.start()
        self.ready.wait(5)
        return self

    def stop(self):
        self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(5)

    def subscribed_keys(self):
        return {key for f in self.frames if f[0] == "REQ" for filt in f[2:] for key in filt.get("#p", [])}

    def event_authors(self):
        return {f[1]["pubkey"] for f in self.frames if f[0] == "EVENT"}


def account(server, name):
    c = Client(f"http://127.0.0.1:{server.port}", server.url)
    status, reply = c.register(SoftKey(server.url), name)
    assert status == 200, reply
    token = reply["token"]
    signer = c.call("GET", "/api/signer/bunker", token=token)[1]["pubkey"]
    return c, token, signer


def nostrconnect(client_hex, relay, secret):
    return f"nostrconnect://{client_hex}?relay={urllib.parse.quote(relay.url, safe='')}&secret={secret}"


def wait_for(condition, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_each_client_relay_hears_only_its_own_users_signer_key_and_cannot_forge_log_lines():
    first, second = RecordingRelay().start(), RecordingRelay().start()
    server = Server().start()
    try:
        alice, alice_token, alice_signer = account(server, "alice")
        bob, bob_token, bob_signer = account(server, "bob")
        # Both accounts connect the same client key, each through a relay of its own.
        client = n.Keys.generate().public_key().to_hex()
        status, reply = alice.call("POST", "/api/signer/nostrconnect", {"url": nostrconnect(client, first, "a-secret")}, alice_token)
        assert status == 200, reply
        status, reply = bob.call("POST", "/api/signer/nostrconnect", {"url": nostrconnect(client, second, "b-secret")}, bob_token)
        assert status == 200, reply
        assert wait_for(lambda: first.event_authors() and second.event_authors())
        time.sleep(2.5)  # a refresh of the links (every 2 s) must not widen what each is asked for
        # Each relay is asked for the signer key of the account whose client named it, and no other.
        assert first.subscribed_keys() == {alice_signer}, first.frames
        assert second.subscribed_keys() == {bob_signer}, second.frames
        # Each client's answer goes to its own relay: bob's pasting did not redirect alice's client.
        assert first.event_authors() == {alice_signer}
        assert second.event_authors() == {bob_signer}
        logs = server.logs()
        assert "a-secret" not in logs and "b-secret" not in logs
        # The relay's NOTICE is in the log, on one line, its newline escaped.
        notices = [line for line in logs.splitlines() if "nip46.relay_notice" in line]
        assert notices and all("hello\\n2026" in line for line in notices), notices
        assert not any(re.match(r"^2026-01-01T00:00:00\+0000 critical", line) for line in logs.splitlines())
    finally:
        server.stop()
        first.stop()
        second.stop()


def test_relays_inside_the_network_are_refused_and_pastes_are_capped():
    recording = RecordingRelay().start()
    server = Server().start()
    try:
        relays = ["ws://10.0.0.1", "wss://10.0.0.1:7000", "wss://169.254.169.254/latest", "wss://[fd00:ec2::254]",
                  "wss://100.100.100.200", "wss://[::ffff:10.1.2.3]", "wss://224.0.0.1", "wss://0.0.0.0",
                  "wss://relay.example/\nforged", "wss://user:pw@relay.example", "https://relay.example"]
        for i, relay in enumerate(relays):
            if i % 5 == 0:  # each paste counts against the account's rate limit, refused or not
                c, token, _ = account(server, f"carol{i}")
            url = f"nostrconnect://{n.Keys.generate().public_key().to_hex()}?relay={urllib.parse.quote(relay, safe='')}&secret=x"
            status, reply = c.call("POST", "/api/signer/nostrconnect", {"url": url}, token)
            assert status == 400 and reply["error"] == "invalid_request", (relay, status, reply)
        assert "forged" not in server.logs()
        # Pastes are rate limited per account: ten in a burst, then 429 with Retry-After.
        c, token, _ = account(server, "dave")
        statuses = []
        for _ in range(12):
            url = f"nostrconnect://{n.Keys.generate().public_key().to_hex()}?relay={urllib.parse.quote(recording.url, safe='')}&secret=x"
            statuses.append(c.call("POST", "/api/signer/nostrconnect", {"url": url}, token)[0])
        assert statuses[:10] == [200] * 10 and statuses[10:] == [429, 429], statuses
    finally:
        server.stop()
        recording.stop()
