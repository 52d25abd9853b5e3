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
from test_nip46_relay import approve_next


def keyfob_with(relay):
    return Server(args=("--relay", relay.url)).start()


def account(server):
    c = Client(f"http://127.0.0.1:{server.port}", server.url)
    key = SoftKey(server.url)
    status, reply = c.register(key, "alice")
    assert status == 200, reply
    token = reply["token"]
    return c, token, c.call("POST", "/api/signer/get_public_key", {}, token=token)[1]["result"]


def test_rust_nostr_signs_through_keyfob_on_a_third_party_relay(nostr_relay):
    server = keyfob_with(nostr_relay)
    try:
        c, token, pubkey = account(server)
        status, reply = c.call("GET", "/api/signer/bunker", token=token)
        assert status == 200 and reply["relays"] == [f"ws://localhost:{server.nip46_port}/nip46", nostr_relay.url], reply
        # Only the external relay: every message goes through nostr-relay, not Keyfob's own endpoint.
        url = urllib.parse.urlsplit(reply["url"])
        query = urllib.parse.parse_qs(url.query)
        only_external = f"bunker://{url.netloc}?relay={urllib.parse.quote(nostr_relay.url, safe='')}&secret={query['secret'][0]}"

        async def session():
            remote = n.NostrConnect(n.NostrConnectUri.parse(only_external), n.Keys.generate(), timedelta(seconds=20), None)
            got = (await remote.get_public_key_async()).to_hex()
            note = n.EventBuilder(n.Kind(1), "signed through a public relay").finalize_unsigned(n.PublicKey.parse(pubkey))
            signing = asyncio.create_task(remote.sign_event_async(note))
            await asyncio.to_thread(approve_next, c, token, {"remember": "forever"})
            signed = await signing
            started = time.perf_counter()
            again = await remote.sign_event_async(n.EventBuilder(n.Kind(1), "again").finalize_unsigned(n.PublicKey.parse(pubkey)))
            return got, signed, again, time.perf_counter() - started

        got, signed, again, took = asyncio.run(session())
        assert got == pubkey
        assert signed.verify() and signed.author().to_hex() == pubkey and signed.content() == "signed through a public relay"
        assert again.verify() and again.content() == "again"
        assert "nip46.relay_connected" in server.logs()
    finally:
        server.stop()


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


def test_nostr_json_names_the_relays_and_the_connect_page(nostr_relay):
    server = keyfob_with(nostr_relay)
    try:
        import urllib.request
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/.well-known/nostr.json?name=_") as r:
            body = json.load(r)
            assert r.headers["Access-Control-Allow-Origin"] == "*"
        assert body["nip46"]["relays"] == [f"ws://localhost:{server.nip46_port}/nip46", nostr_relay.url]
        assert body["nip46"]["nostrconnect_url"] == f"{server.url}/connect/<nostrconnect>"
    finally:
        server.stop()
