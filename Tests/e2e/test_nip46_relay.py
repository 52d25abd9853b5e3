"""The built-in NIP-46 relay (ws://…/nip46, issue #9) and the bunker behind it, with real
third-party software: rust-nostr's Python binding (`nostr-sdk` on PyPI) as relay clients and as a
NIP-46 client (NostrConnect with the bunker URL); raw NIP-46 frames for the refusals."""
import asyncio
from datetime import timedelta

import nostr_sdk as n


def test_rust_nostr_clients_exchange_a_nip46_message_through_keyfob(server):
    async def exchange():
        url = n.RelayUrl.parse(f"ws://127.0.0.1:{server.nip46_port}/nip46")
        sender, signer = n.Keys.generate(), n.Keys.generate()
        publisher, subscriber = n.Client(), n.Client()
        for client in (publisher, subscriber):
            await client.add_relay(url)
            await client.connect(timedelta(seconds=5))
        wanted = n.Filter().kind(n.Kind(24133)).pubkey(signer.public_key())
        stream = await subscriber.stream_events(n.ReqTarget.auto([wanted]), timeout=timedelta(seconds=10),
                                                policy=n.ReqExitPolicy.WAIT_FOR_EVENTS_AFTER_EOSE(1))
        await asyncio.sleep(0.3)  # the REQ is in before the message goes out: nothing is stored
        message = n.EventBuilder(n.Kind(24133), "sealed request").tags([n.Tag.public_key(signer.public_key())]).finalize(sender)
        sent = await publisher.send_event(message)
        note = n.EventBuilder(n.Kind(1), "hello").finalize(sender)
        refused = await publisher.send_event(note)
        item = await stream.next()
        for client in (publisher, subscriber):
            await client.shutdown()
        return message, sent, refused, item

    message, sent, refused, item = asyncio.run(exchange())
    assert [str(u) for u in sent.success] and not sent.failed
    assert not refused.success
    assert list(refused.failed.values()) == ["blocked: this relay carries NIP-46 messages (kind 24133) only"]
    assert item is not None and item.event is not None
    assert item.event.as_json() == message.as_json()


# The bunker behind the relay (issue #9): signer keys, bunker URLs, connect with a single-use
# secret, the methods that need no approval, and signing through grants and auth_url.

import json
import time
import urllib.parse

import websocket

from softkey import Client, SoftKey
from test_browser import driver  # noqa: F401  (the Chromium fixture)


def signed_in(server, with_key=False):
    """An account with an unlocked session: (client, token, the nostr pubkey REST reports[, its passkey])."""
    c = Client(f"http://127.0.0.1:{server.port}", server.url)
    key = SoftKey(server.url)
    status, reply = c.register(key, "alice")
    assert status == 200, reply
    token = reply["token"]
    pubkey = c.call("POST", "/api/signer/get_public_key", {}, token=token)[1]["result"]
    return (c, token, pubkey, key) if with_key else (c, token, pubkey)


class RawClient:
    """A NIP-46 client from parts: nostr-sdk's keys, NIP-44 and event signing; websocket-client frames."""

    def __init__(self, relay, signer_hex):
        self.keys = n.Keys.generate()
        self.signer = n.PublicKey.parse(signer_hex)
        self.ws = websocket.create_connection(relay, timeout=5)
        self.ws.send(json.dumps(["REQ", "r", {"kinds": [24133], "#p": [self.keys.public_key().to_hex()]}]))
        assert json.loads(self.ws.recv())[0] == "EOSE"
        self.counter = 0

    def ask(self, method, *params, wait=5):
        self.counter += 1
        request = json.dumps({"id": str(self.counter), "method": method, "params": list(params)})
        content = n.nip44_encrypt(self.keys.secret_key(), self.signer, request, n.Nip44Version.V2)
        event = n.EventBuilder(n.Kind(24133), content).tags([n.Tag.public_key(self.signer)]).finalize(self.keys)
        self.ws.send(json.dumps(["EVENT", json.loads(event.as_json())]))
        return self.next_reply(wait)

    def next_reply(self, wait=5):
        """The next reply to the last request (after an auth_url, the final one), or None."""
        deadline = time.time() + wait
        while time.time() < deadline:
            self.ws.settimeout(max(0.1, deadline - time.time()))
            try:
                frame = json.loads(self.ws.recv())
            except websocket.WebSocketTimeoutException:
                break
            if frame[0] == "EVENT":
                reply = frame[2]
                assert reply["pubkey"] == self.signer.to_hex() and ["p", self.keys.public_key().to_hex()] in reply["tags"]
                answer = json.loads(n.nip44_decrypt(self.keys.secret_key(), self.signer, reply["content"]))
                assert answer["id"] == str(self.counter)
                return answer
        return None  # no answer


def bunker_url(c, token, rotate=False):
    status, reply = c.call("POST" if rotate else "GET", "/api/signer/bunker" + ("/rotate" if rotate else ""),
                           {} if rotate else None, token=token)
    assert status == 200, reply
    url = urllib.parse.urlsplit(reply["url"])
    query = urllib.parse.parse_qs(url.query)
    return reply, url.netloc, query["relay"][0], query["secret"][0]


def test_rust_nostr_connects_with_the_bunker_url_and_gets_the_users_key(server):
    c, token, pubkey = signed_in(server)
    reply, signer, relay, _ = bunker_url(c, token)
    assert relay == f"ws://localhost:{server.nip46_port}/nip46" and signer != pubkey  # a signer key of its own

    async def connect():
        uri = n.NostrConnectUri.parse(reply["url"])
        remote = n.NostrConnect(uri, n.Keys.generate(), timedelta(seconds=10), None)
        return (await remote.get_public_key_async()).to_hex()

    assert asyncio.run(connect()) == pubkey
    clients = c.call("GET", "/api/signer/bunker/clients", token=token)[1]["clients"]
    assert len(clients) == 1 and clients[0]["lastUsedAt"]


def test_the_bunker_answers_only_connected_clients_with_a_fresh_secret(server):
    c, token, pubkey = signed_in(server)
    _, signer, relay, replaced = bunker_url(c, token)
    _, _, _, secret = bunker_url(c, token)
    assert secret != replaced  # every URL shown has a new secret; the unused one before it stops working
    client = RawClient(relay.replace("localhost", "127.0.0.1"), signer)
    assert client.ask("ping", wait=1) is None  # not connected: silence
    assert "unauthorized" in client.ask("connect", signer, "not-the-secret")["error"]
    assert "unauthorized" in client.ask("connect", signer, replaced)["error"]
    assert client.ask("connect", signer, secret, "sign_event:1,nip44_encrypt", json.dumps({"name": "Raw test"})) \
        == {"id": "4", "result": "ack"}
    assert client.ask("ping") == {"id": "5", "result": "pong"}
    assert client.ask("get_public_key") == {"id": "6", "result": pubkey}
    assert client.ask("switch_relays") == {"id": "7", "result": None}
    assert "unknown method" in client.ask("frobnicate")["error"]
    waiting = client.ask("sign_event", json.dumps({"kind": 1, "content": "hi", "tags": []}))
    assert waiting["result"] == "auth_url" and "/approve/" in waiting["error"], waiting
    listed = c.call("GET", "/api/signer/bunker/clients", token=token)[1]["clients"]
    assert listed[0]["name"] == "Raw test" and listed[0]["perms"] == "sign_event:1,nip44_encrypt"
    # The secret was single use: a second client cannot reuse it; a rotated one works.
    other = RawClient(relay.replace("localhost", "127.0.0.1"), signer)
    assert "unauthorized" in other.ask("connect", signer, secret)["error"]
    _, _, _, fresh = bunker_url(c, token, rotate=True)
    assert fresh != secret and other.ask("connect", signer, fresh)["result"] == "ack"
    # Revoked on the account: no answer any more. logout: the client ends it itself.
    assert c.call("DELETE", f"/api/signer/bunker/clients/{other.keys.public_key().to_hex()}", token=token)[0] == 200
    assert c.call("DELETE", f"/api/signer/bunker/clients/{other.keys.public_key().to_hex()}", token=token)[0] == 404
    assert other.ask("ping", wait=1) is None
    assert client.ask("logout")["result"] == "ack"
    assert client.ask("ping", wait=1) is None
    # Nothing secret in the logs: not the bunker secrets.
    assert secret not in server.logs() and fresh not in server.logs()


def test_the_account_page_shows_the_bunker_url_and_disconnects_clients(server, driver):
    """The account page's bunker card in Chromium: the URL (copyable), then the client that used it,
    disconnected with one click. A screenshot goes to .build/screenshots/."""
    import os

    from selenium.webdriver.common.by import By

    from test_accounts import sign_up
    from test_browser import wait_for

    if True:
        sign_up(driver, server, "bunkeruser")
        driver.find_element(By.ID, "bunker-show").click()
        wait_for(driver, lambda d: d.find_element(By.ID, "bunker-url").get_attribute("value").startswith("bunker://"))
        url = driver.find_element(By.ID, "bunker-url").get_attribute("value")
        assert f"relay=ws%3A%2F%2Flocalhost%3A{server.nip46_port}%2Fnip46" in url
        # The QR code, read back by an independent decoder (zbar), is exactly the URL.
        import subprocess
        import tempfile
        with tempfile.NamedTemporaryFile(suffix=".png") as png:
            png.write(driver.find_element(By.ID, "bunker-qr").screenshot_as_png)
            png.flush()
            decoded = subprocess.run(["zbarimg", "--raw", "-q", png.name], capture_output=True, text=True, check=True)
        assert decoded.stdout.strip() == url
        signer = urllib.parse.urlsplit(url).netloc
        secret = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["secret"][0]
        client = RawClient(f"ws://127.0.0.1:{server.nip46_port}/nip46", signer)
        assert client.ask("connect", signer, secret, "sign_event:1,nip44_encrypt", json.dumps({"name": "Coracle"}))["result"] == "ack"
        driver.refresh()
        wait_for(driver, lambda d: "Coracle (unverified)" in d.find_element(By.ID, "bunker-clients").text)
        folder = os.path.join(os.path.dirname(__file__), "..", "..", ".build", "screenshots")
        os.makedirs(folder, exist_ok=True)
        # A signing request waits on the account page (refreshed every 5 s) and on the approval page.
        waiting = client.ask("sign_event", json.dumps({"kind": 1, "content": "from Coracle, via the bunker", "tags": []}))
        assert waiting["result"] == "auth_url"
        wait_for(driver, lambda d: "Coracle (unverified) wants to sign a note (kind 1)" in d.find_element(By.ID, "waiting").text,
                 timeout=10)
        driver.execute_script("document.getElementById('waiting-card').scrollIntoView()")
        driver.save_screenshot(os.path.join(folder, "account-waiting.png"))
        driver.find_element(By.CSS_SELECTOR, "#waiting a").click()
        wait_for(driver, lambda d: "from Coracle, via the bunker" in d.find_element(By.ID, "summary").text)
        # One name on every page (#56): the apps list's and the waiting list's, its key beside it.
        assert driver.find_element(By.ID, "client").text == "Coracle (unverified)"
        assert driver.find_element(By.ID, "client-claimed").text.startswith("key npub1")
        assert "sign_event:1, nip44_encrypt" in driver.find_element(By.ID, "preset-requested").text
        requested = driver.find_element(By.CSS_SELECTOR, "input[value=requested]")
        # The decision bar stays at the bottom of the screen: scroll the choice above it, as a person does.
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", requested)
        requested.click()
        driver.save_screenshot(os.path.join(folder, "approve-nip46.png"))
        driver.find_element(By.ID, "approve").click()
        answer = client.next_reply()
        signed = json.loads(answer["result"])
        assert signed["content"] == "from Coracle, via the bunker" and n.Event.from_json(answer["result"]).verify()
        # The question is answered: the page's title says so (#56: "Approve this?" stayed).
        wait_for(driver, lambda d: d.find_element(By.ID, "title").text == "Done")
        # What it asked for is granted now: the next note is signed at once.
        again = client.ask("sign_event", json.dumps({"kind": 1, "content": "again", "tags": []}))
        assert json.loads(again["result"])["content"] == "again"
        driver.get(server.url + "/account.html")
        wait_for(driver, lambda d: "Coracle (unverified)" in d.find_element(By.ID, "bunker-clients").text)
        driver.find_element(By.ID, "bunker-show").click()
        wait_for(driver, lambda d: not d.find_element(By.ID, "bunker").get_attribute("hidden"))
        driver.execute_script("document.getElementById('bunker-title').scrollIntoView()")
        driver.save_screenshot(os.path.join(folder, "account-bunker.png"))
        driver.find_element(By.CSS_SELECTOR, "#bunker-clients button").click()
        wait_for(driver, lambda d: "No client is connected" in d.find_element(By.ID, "bunker-clients").text)
        assert client.ask("ping", wait=1) is None


# Signing through the bunker with rust-nostr as the client: the first request waits for the user
# (auth_url; rust-nostr keeps waiting for the real answer), who approves from the API; what they
# remember then runs at once while their signer is unlocked.

def approve_next(c, token, body=None, key=None, wait=10):
    """Approves the user's next waiting request (as the account page lists them); returns it."""
    deadline = time.time() + wait
    while time.time() < deadline:
        requests = c.call("GET", "/api/requests", token=token)[1]["requests"]
        if requests:
            request = requests[0]
            body = dict(body or {})
            if key is not None:  # a dangerous kind: the passkey confirms the committed bytes
                status, options = c.call("POST", f"/api/requests/{request['id']}/challenge", {}, token=token)
                assert status == 200, options
                body["assertion"] = key.assertion({**options, "challengeKey": None})["cred"]
            status, reply = c.call("POST", f"/api/requests/{request['id']}/approve", body, token=token)
            assert status == 200 and reply["redirect"] is None, reply
            return request
        time.sleep(0.05)
    raise AssertionError("no request came to approve")


def test_rust_nostr_signs_and_encrypts_through_the_bunker_with_approval(server):
    c, token, pubkey, key = signed_in(server, with_key=True)
    reply, _, _, _ = bunker_url(c, token)
    full_session(server, c, token, pubkey, key, reply["url"])


def full_session(server, c, token, pubkey, key, url):
    """rust-nostr connected with `url`: get_public_key, kind 1 approved then remembered, NIP-44 both
    ways with a third key, kind 0 confirmed with the passkey; every step checked independently."""
    reply = {"url": url}
    peer = n.Keys.generate()

    async def session():
        remote = n.NostrConnect(n.NostrConnectUri.parse(reply["url"]), n.Keys.generate(), timedelta(seconds=20), None)
        assert (await remote.get_public_key_async()).to_hex() == pubkey
        note = n.EventBuilder(n.Kind(1), "hello from rust-nostr through Keyfob").finalize_unsigned(n.PublicKey.parse(pubkey))
        signing = asyncio.create_task(remote.sign_event_async(note))
        first = await asyncio.to_thread(approve_next, c, token, {"remember": "forever"})
        signed = await signing
        # Remembered (kind 1, forever) and the session is unlocked: no approval this time.
        again = await remote.sign_event_async(n.EventBuilder(n.Kind(1), "second").finalize_unsigned(n.PublicKey.parse(pubkey)))
        encrypting = asyncio.create_task(remote.nip44_encrypt_async(peer.public_key(), "to the peer"))
        await asyncio.to_thread(approve_next, c, token, {"remember": "hour"})
        ciphertext = await encrypting
        from_peer = n.nip44_encrypt(peer.secret_key(), n.PublicKey.parse(pubkey), "from the peer", n.Nip44Version.V2)
        decrypting = asyncio.create_task(remote.nip44_decrypt_async(peer.public_key(), from_peer))
        await asyncio.to_thread(approve_next, c, token, {"remember": "once"})
        plaintext = await decrypting
        # Kind 0 always waits, and is approved with the passkey.
        profile = n.EventBuilder(n.Kind(0), json.dumps({"name": "alice"})).finalize_unsigned(n.PublicKey.parse(pubkey))
        signing = asyncio.create_task(remote.sign_event_async(profile))
        zero = await asyncio.to_thread(approve_next, c, token, {}, key)
        profile_signed = await signing
        return first, signed, again, ciphertext, plaintext, zero, profile_signed

    first, signed, again, ciphertext, plaintext, zero, profile_signed = asyncio.run(session())
    assert first["transport"] == "nip46" and first["kind"] == 1 and first["client"].startswith("nip46:")
    for event in (signed, again, profile_signed):
        assert event.verify() and event.author().to_hex() == pubkey
    assert signed.content() == "hello from rust-nostr through Keyfob" and again.content() == "second"
    assert n.nip44_decrypt(peer.secret_key(), n.PublicKey.parse(pubkey), ciphertext) == "to the peer"
    assert plaintext == "from the peer"
    assert zero["kind"] == 0 and profile_signed.kind().as_u16() == 0
    history = c.call("GET", "/api/signer/history", token=token)[1]["entries"]
    nip46 = [e for e in history if e["transport"] == "nip46" and e["outcome"] == "approved"]
    assert len(nip46) == 5, history
    assert "to the peer" not in server.logs() and "from the peer" not in server.logs()


def test_the_connect_page_connects_a_nostrconnect_client(server, driver):
    """`/connect/<nostrconnect URL>` (nostr.json's nostrconnect_url) in Chromium: what the client
    claims, then one button that connects it; the client hears its secret on its relay."""
    import os

    from selenium.webdriver.common.by import By

    from test_accounts import sign_up
    from test_browser import wait_for

    sign_up(driver, server, "connector")
    app = RawClient(f"ws://127.0.0.1:{server.nip46_port}/nip46", n.Keys.generate().public_key().to_hex())
    relay = urllib.parse.quote(f"ws://localhost:{server.nip46_port}/nip46", safe="")
    uri = (f"nostrconnect://{app.keys.public_key().to_hex()}?relay={relay}&secret=page-secret"
           f"&perms=sign_event%3A1%2Cnip44_encrypt&name=Coracle&url=https%3A%2F%2Fcoracle.social")
    driver.get(server.url + "/connect/" + urllib.parse.quote(uri, safe=""))
    # One name on every page (#56): the connect page calls it what the account and approval pages do.
    wait_for(driver, lambda d: d.find_element(By.ID, "client").text == "Coracle (unverified)")
    npub = driver.execute_script("return npubFromHex(arguments[0])", app.keys.public_key().to_hex())
    assert npub == app.keys.public_key().to_bech32(), npub  # the page's bech32 agrees with rust-nostr's
    assert f"key {npub[:12]}…{npub[-6:]}" in driver.find_element(By.ID, "client-url").text
    assert "sign_event:1, nip44_encrypt" in driver.find_element(By.ID, "details").text
    folder = os.path.join(os.path.dirname(__file__), "..", "..", ".build", "screenshots")
    os.makedirs(folder, exist_ok=True)
    driver.save_screenshot(os.path.join(folder, "connect.png"))
    driver.find_element(By.ID, "connect").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "status").get_attribute("data-status") == "ok")
    assert "Go back to Coracle" in driver.find_element(By.ID, "status").text
    # The answer to connect carries the client's own secret, from the account's signer key.
    deadline = time.time() + 5
    answer = None
    while time.time() < deadline and answer is None:
        app.ws.settimeout(1)
        try:
            frame = json.loads(app.ws.recv())
        except Exception:
            continue
        if frame[0] == "EVENT":
            signer = n.PublicKey.parse(frame[2]["pubkey"])
            answer = json.loads(n.nip44_decrypt(app.keys.secret_key(), signer, frame[2]["content"]))
    assert answer and answer["result"] == "page-secret"
    driver.get(server.url + "/account.html")
    wait_for(driver, lambda d: "Coracle (unverified)" in d.find_element(By.ID, "bunker-clients").text)
