"""The bunker on an external relay (issue #9): a real third-party relay (`nostr-relay` from PyPI)
on loopback, Keyfob started with --relay, and rust-nostr (`nostr-sdk`) as the NIP-46 client —
with a bunker:// URL that names only that relay, and with a nostrconnect:// URL the user pastes."""
import asyncio
import json
import time
import urllib.parse
from datetime import timedelta

import nostr_sdk as n

from conftest import Server
from softkey import Client, SoftKey
from test_nip46_relay import approve_next, full_session, signed_in


def keyfob_with(relay):
    return Server(args=("--relay", relay.url)).start()


def account(server):
    c = Client(f"http://127.0.0.1:{server.port}", server.url)
    key = SoftKey(server.url)
    status, reply = c.register(key, "alice")
    assert status == 200, reply
    token = reply["token"]
    return c, token, c.call("POST", "/api/signer/get_public_key", {}, token=token)[1]["result"]


def test_a_pasted_nostrconnect_url_connects_rust_nostr_through_its_relay(nostr_relay):
    server = keyfob_with(nostr_relay)
    try:
        c, token, pubkey = account(server)
        app = n.Keys.generate()
        uri = (f"nostrconnect://{app.public_key().to_hex()}?relay={urllib.parse.quote(nostr_relay.url, safe='')}"
               f"&secret=0s3cr3t&perms=sign_event%3A1&metadata={urllib.parse.quote(json.dumps({'name': 'Nostrudel'}))}")

        async def session():
            remote = n.NostrConnect(n.NostrConnectUri.parse(uri), app, timedelta(seconds=20), None)
            # rust-nostr waits on the relay for the signer's answer to connect (its secret)…
            asking = asyncio.create_task(remote.get_public_key_async())
            await asyncio.sleep(0.5)
            # …which comes once the user pastes the URL on their account page.
            status, reply = await asyncio.to_thread(c.call, "POST", "/api/signer/nostrconnect", {"url": uri}, token)
            assert status == 200 and reply["name"] == "Nostrudel", reply
            got = (await asking).to_hex()
            signing = asyncio.create_task(remote.sign_event_async(
                n.EventBuilder(n.Kind(1), "via nostrconnect").finalize_unsigned(n.PublicKey.parse(pubkey))))
            await asyncio.to_thread(approve_next, c, token, {"remember": "once"})
            return got, await signing

        got, signed = asyncio.run(session())
        assert got == pubkey
        assert signed.verify() and signed.content() == "via nostrconnect"
        clients = c.call("GET", "/api/signer/bunker/clients", token=token)[1]["clients"]
        assert [x["name"] for x in clients] == ["Nostrudel"]
        assert "0s3cr3t" not in server.logs()
    finally:
        server.stop()


class RawRelayClient:
    """A NIP-46 client from parts on a set of relays: one websocket per relay, the same events to each."""

    def __init__(self, relays, signer_hex):
        import websocket
        self.keys = n.Keys.generate()
        self.signer = n.PublicKey.parse(signer_hex)
        self.sockets = []
        for relay in relays:
            ws = websocket.create_connection(relay, timeout=5)
            ws.send(json.dumps(["REQ", "r", {"kinds": [24133], "#p": [self.keys.public_key().to_hex()]}]))
            self.sockets.append(ws)

    def send(self, method, *params, request_id="1"):
        request = json.dumps({"id": request_id, "method": method, "params": list(params)})
        content = n.nip44_encrypt(self.keys.secret_key(), self.signer, request, n.Nip44Version.V2)
        event = n.EventBuilder(n.Kind(24133), content).tags([n.Tag.public_key(self.signer)]).finalize(self.keys)
        for ws in self.sockets:
            ws.send(json.dumps(["EVENT", json.loads(event.as_json())]))

    def replies(self, wait):
        """Every reply event seen on any relay within `wait` seconds: {event id: decrypted message}."""
        import websocket
        seen = {}
        deadline = time.time() + wait
        for ws in self.sockets:
            while time.time() < deadline:
                ws.settimeout(max(0.05, min(0.3, deadline - time.time())))
                try:
                    frame = json.loads(ws.recv())
                except websocket.WebSocketTimeoutException:
                    if time.time() >= deadline:
                        break
                    continue
                if frame[0] == "EVENT" and frame[2]["pubkey"] == self.signer.to_hex():
                    seen[frame[2]["id"]] = json.loads(n.nip44_decrypt(self.keys.secret_key(), self.signer, frame[2]["content"]))
            deadline = max(deadline, time.time() + 0.3)  # the other relays' copies are in already
        return seen


def test_a_request_seen_on_two_relays_is_answered_once_and_links_come_back_after_a_relay_restart(nostr_relay):
    from conftest import NostrRelay
    second = NostrRelay().start()
    server = Server(args=("--relay", nostr_relay.url, "--relay", second.url)).start()
    try:
        c, token, pubkey = account(server)
        status, reply = c.call("GET", "/api/signer/bunker", token=token)
        secret = urllib.parse.parse_qs(urllib.parse.urlsplit(reply["url"]).query)["secret"][0]
        client = RawRelayClient([nostr_relay.url, second.url], reply["pubkey"])
        time.sleep(3)  # the signer key became active with the secret: the next refresh subscribes for it
        client.send("connect", reply["pubkey"], secret)
        answers = client.replies(wait=3)
        # The same request arrived through both relays; one answer (the same event, carried by both).
        assert [m["result"] for m in answers.values()] == ["ack"], answers

        # The first relay goes away and comes back on its port: the link reconnects and subscribes again.
        nostr_relay.stop()
        time.sleep(1)
        nostr_relay.start()
        deadline = time.time() + 20
        while time.time() < deadline and sum(1 for line in server.logs().splitlines()
                                             if "nip46.relay_connected" in line and nostr_relay.url in line) < 2:
            time.sleep(0.2)
        alone = RawRelayClient([nostr_relay.url], reply["pubkey"])
        alone.keys = client.keys  # the connected client, now only on the restarted relay
        alone.sockets[0].send(json.dumps(["REQ", "r", {"kinds": [24133], "#p": [client.keys.public_key().to_hex()]}]))
        time.sleep(0.5)
        alone.send("get_public_key", request_id="2")
        answers = alone.replies(wait=5)
        # (nostr-relay keeps kind-24133 events although they are ephemeral: the old "ack" comes again.)
        assert [m.get("result") for m in answers.values() if m["id"] == "2"] == [pubkey], answers
    finally:
        server.stop()
        second.stop()


def test_with_postgresql_one_instance_holds_the_relays_and_another_takes_over(nostr_relay):
    from test_postgres import MASTER_KEY, ORIGIN, instance, postgres_url
    database = postgres_url()
    a = instance(database, "--relay", nostr_relay.url).start()
    b = instance(database, "--relay", nostr_relay.url).start()
    try:
        def holding():
            return [s for s in (a, b) if "holding the external NIP-46 relays" in s.logs()]

        deadline = time.time() + 10
        while time.time() < deadline and not holding():
            time.sleep(0.1)
        time.sleep(1)
        assert len(holding()) == 1
        holder = holding()[0]
        other = b if holder is a else a
        c = Client(f"http://127.0.0.1:{other.port}", ORIGIN)
        status, reply = c.register(SoftKey(ORIGIN), "alice")
        assert status == 200, reply
        token = reply["token"]
        status, bunker = c.call("GET", "/api/signer/bunker", token=token)
        secret = urllib.parse.parse_qs(urllib.parse.urlsplit(bunker["url"]).query)["secret"][0]
        client = RawRelayClient([nostr_relay.url], bunker["pubkey"])
        time.sleep(3)  # the holder's next refresh subscribes for the new signer key
        client.send("connect", bunker["pubkey"], secret)
        assert [m["result"] for m in client.replies(wait=3).values()] == ["ack"]  # answered once, by the holder

        # A request that waits for approval, approved on the instance that does not hold the relays.
        client.send("sign_event", json.dumps({"kind": 1, "content": "across instances", "tags": []}), request_id="2")
        waiting = [m for m in client.replies(wait=3).values() if m["id"] == "2"]
        assert waiting and waiting[0]["result"] == "auth_url", waiting
        approve_next(c, token, {"remember": "once"})
        signed = [m for m in client.replies(wait=4).values() if m["id"] == "2" and m["result"] != "auth_url"]
        assert len(signed) == 1 and json.loads(signed[0]["result"])["content"] == "across instances", signed

        # The holder stops: the other takes the relays over.
        holder.stop()
        deadline = time.time() + 20
        while time.time() < deadline and "holding the external NIP-46 relays" not in other.logs():
            time.sleep(0.2)
        assert "holding the external NIP-46 relays" in other.logs()
        time.sleep(3)
        client.send("ping", request_id="3")
        assert [m["result"] for m in client.replies(wait=4).values() if m["id"] == "3"] == ["pong"]
    finally:
        a.stop()
        b.stop()


def test_rust_nostr_does_everything_through_a_third_party_relay(nostr_relay):
    """The same session as through Keyfob's own endpoint, with a bunker URL naming only nostr-relay."""
    server = keyfob_with(nostr_relay)
    try:
        c, token, pubkey, key = signed_in(server, with_key=True)
        status, reply = c.call("GET", "/api/signer/bunker", token=token)
        assert status == 200 and reply["relays"] == [f"ws://localhost:{server.nip46_port}/nip46", nostr_relay.url], reply
        # Only the external relay: every message goes through nostr-relay, not Keyfob's own endpoint.
        url = urllib.parse.urlsplit(reply["url"])
        secret = urllib.parse.parse_qs(url.query)["secret"][0]
        only_external = f"bunker://{url.netloc}?relay={urllib.parse.quote(nostr_relay.url, safe='')}&secret={secret}"
        full_session(server, c, token, pubkey, key, only_external)
        assert "nip46.relay_connected" in server.logs()
    finally:
        server.stop()
