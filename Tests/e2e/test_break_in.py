"""The break-in remedy, end to end in Chromium (#43): an intruder's NIP-46 client allowed kind 1
"forever" (rust-nostr's NIP-44 and keys, Keyfob's own relay), a Polkadot dapp connected with its
account stream open; the owner presses "Lock now", then "Sign out everywhere" (confirmed with the
passkey), signs in again and unlocks: the old client gets nothing, the old bunker URL connects
nothing, the dapp must ask again, the stream has ended. Screenshots at 390 px of the lock and of
the sign-out result."""
import http.client
import json
import os
import sys
import tempfile
import urllib.parse

from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.dirname(__file__))
from test_accounts import sign_up  # noqa: E402
from test_approvals import approve_in_popup, nip07_site  # noqa: E402
from test_browser import driver, wait_for  # noqa: E402,F401
from test_nip46_relay import RawClient  # noqa: E402
from test_polkadot import shots  # noqa: E402

NOTE = json.dumps({"kind": 1, "content": "from the intruder's client", "tags": []})


def fetch(driver, path, body=None):
    """(status, JSON) of a same-origin call with the page's cookie session."""
    return driver.execute_async_script(
        "const [path, body, done] = arguments;"
        "fetch(path, body === null ? {} : {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)})"
        ".then(async r => done([r.status, await r.json().catch(() => null)]))", path, body)


def test_signing_out_everywhere_leaves_no_app_connected(server, driver):
    sign_up(driver, server, "owner")
    # A web client allowed "until I revoke it" through NIP-07's popup.
    site = nip07_site(server)
    driver.get(f"http://127.0.0.1:{site.server_port}/index.html")
    main = driver.current_window_handle
    driver.find_element(By.ID, "sign").click()
    approve_in_popup(driver, main, remember="forever")
    wait_for(driver, lambda d: d.find_element(By.ID, "out").text.startswith("{"))
    driver.get(server.url + "/account.html")
    driver.set_window_size(390, 844)
    status, bunker = fetch(driver, "/api/signer/bunker")
    assert status == 200, bunker
    relay = bunker["relays"][0].replace("localhost", "127.0.0.1")
    secret = urllib.parse.parse_qs(urllib.parse.urlsplit(bunker["url"]).query)["secret"][0]
    intruder = RawClient(relay, bunker["pubkey"])
    assert intruder.ask("connect", bunker["pubkey"], secret)["result"] == "ack"
    waiting = intruder.ask("sign_event", NOTE)
    request_id = waiting["error"].rsplit("/approve/", 1)[1]
    assert fetch(driver, f"/api/requests/{request_id}/approve", {"remember": "forever"})[0] == 200
    assert "sig" in intruder.next_reply()["result"]
    assert "sig" in intruder.ask("sign_event", NOTE)["result"]  # allowed forever: no page
    _, spare = fetch(driver, "/api/signer/bunker")  # a URL the intruder copied, unused
    # A Polkadot dapp, its account stream open (cookie sessions are the popup's; a bearer app's
    # stream is the same code: the page's own cookie is sent by the browser, so read it here).
    status, account = fetch(driver, "/api/polkadot/accounts", {"name": "Main"})
    assert status == 201, account
    dapp = {"id": "1", "msgType": "pub(authorize.tab)", "origin": "dapp-request", "request": None, "url": "https://dapp.example/"}
    cookie = driver.get_cookie("keyfob_session")["value"]
    stream = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    stream.request("POST", "/api/polkadot/message", body=json.dumps(dapp),
                   headers={"Cookie": f"keyfob_session={cookie}", "Origin": server.url, "Content-Type": "application/json"})
    assert stream.getresponse().read() and True
    stream.request("GET", "/api/polkadot/subscribe?id=1&url=https%3A%2F%2Fdapp.example%2F",
                   headers={"Cookie": f"keyfob_session={cookie}", "Origin": server.url})
    events = stream.getresponse()
    assert events.status == 200 and events.readline()
    # The dapp asks for a signature and it waits for the owner.
    ask = dict(dapp, id="2", msgType="pub(bytes.sign)", request={"address": account["address"], "data": "0x6869", "type": "bytes"})
    status, asked = fetch(driver, "/api/polkadot/message", ask)
    assert status == 202 and asked["pending"]["id"], asked
    polkadot_id = asked["pending"]["id"]

    # Lock now: the signer locks on the page; the intruder's allowed client waits.
    driver.get(server.url + "/account.html")
    wait_for(driver, lambda d: d.find_element(By.ID, "lock").is_displayed())
    driver.find_element(By.ID, "lock").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "signer-state").get_attribute("data-locked") == "true"
             and "Locked" in d.find_element(By.ID, "status").text)
    assert not driver.find_element(By.ID, "lock").is_displayed() and driver.find_element(By.ID, "unlock").is_displayed()
    driver.execute_script("document.getElementById('signer-state').scrollIntoView({block: 'center'})")
    driver.save_screenshot(f"{shots(server)}/lock-now-390.png")
    locked = intruder.ask("sign_event", NOTE)  # a grant never skips the lock: nothing is signed
    assert locked is None or '"sig"' not in (locked.get("result") or ""), locked
    # It waits on the approval page for the owner (the intruder's request, left waiting).
    waiting_id = locked["error"].rsplit("/approve/", 1)[1]

    # Sign out everywhere, one click from the key card, confirmed with the passkey; the result
    # says what ended, by name, and what to check next.
    driver.execute_script("window.scrollTo(0, 0)")
    driver.find_element(By.ID, "signout-all-link").click()
    button = driver.find_element(By.ID, "signout-all")
    wait_for(driver, lambda d: button.is_displayed() and d.switch_to.active_element == button)
    button.click()
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".ask-inline button.danger"))
    driver.find_element(By.CSS_SELECTOR, ".ask-inline button.danger").click()
    wait_for(driver, lambda d: "signedout" in d.current_url, timeout=20)
    wait_for(driver, lambda d: "signed out everywhere" in d.find_element(By.ID, "status").text, timeout=20)
    text = driver.find_element(By.ID, "status").text
    assert "1 app was disconnected" in text and "3 permissions revoked" in text and "new bunker URL" in text, text
    assert "2 waiting requests were cancelled" in text, text
    assert "ended (this browser" in text and f"127.0.0.1:{site.server_port}" in text, text
    assert "check your passkeys: you have 1, 1 added today" in text, text
    driver.save_screenshot(f"{shots(server)}/signed-out-everywhere-390.png")
    assert events.read() is not None  # the stream ended (read returns at its end)

    # The owner signs in again (unlocked by the passkey): the old client gets nothing.
    driver.find_element(By.ID, "signin").click()
    wait_for(driver, lambda d: "/account.html" in d.current_url)
    assert fetch(driver, "/api/signer/sign_event", {"event": {"kind": 1, "content": "mine"}})[0] == 200
    assert intruder.ask("sign_event", NOTE, wait=1) is None
    assert intruder.ask("get_public_key", wait=1) is None
    spare_secret = urllib.parse.parse_qs(urllib.parse.urlsplit(spare["url"]).query)["secret"][0]
    retry = RawClient(relay, bunker["pubkey"])
    assert "unauthorized" in retry.ask("connect", bunker["pubkey"], spare_secret)["error"]
    # The intruder's waiting request is gone: its page says it was cancelled, with no Approve.
    driver.get(f"{server.url}/approve/{waiting_id}")
    wait_for(driver, lambda d: d.find_element(By.ID, "title").text == "This request is gone")
    assert "cancelled" in driver.find_element(By.ID, "status").text
    assert not driver.find_element(By.ID, "approve").is_displayed()
    driver.save_screenshot(f"{shots(server)}/break-in-request-cancelled-390.png")
    # The dapp's waiting request too: its page says it was cancelled, with nothing to press.
    driver.get(f"{server.url}/polkadot-approve.html?id={polkadot_id}")
    wait_for(driver, lambda d: "the site's permission ended" in d.find_element(By.ID, "who").text)
    assert driver.find_element(By.ID, "title").text == "This request was cancelled"
    assert not driver.find_element(By.ID, "approve").is_displayed()
    assert not driver.find_element(By.ID, "reject").is_displayed()
    driver.save_screenshot(f"{shots(server)}/break-in-polkadot-cancelled-390.png")
    dapp["msgType"] = "pub(accounts.list)"
    status, denied = fetch(driver, "/api/polkadot/message", dapp)
    assert status == 403 and denied["error"] == "permission_denied", denied
    stream.close()
    # The web client asks on the approval page again (its grant was revoked).
    driver.get(f"http://127.0.0.1:{site.server_port}/index.html")
    main = driver.current_window_handle
    driver.find_element(By.ID, "sign").click()
    wait_for(driver, lambda d: len(d.window_handles) == 2)
    driver.switch_to.window([h for h in driver.window_handles if h != main][0])
    wait_for(driver, lambda d: not d.find_element(By.ID, "choices-card").get_attribute("hidden"))
    driver.close()
    driver.switch_to.window(main)
    site.shutdown()


def test_the_account_page_keeps_up_with_apps_and_says_what_each_grant_lasts(server, driver):
    """At 390 px (#43): a client that connects appears in "Connect an app" while the page is open;
    after Approve on a long request the result is in view (not under the sticky bar); each app's
    grants say their own end; sealing says, before and after, that connected apps need a new URL."""
    from selenium.webdriver.support.ui import Select
    from test_sealing import add_authenticator as add_prf_authenticator, make_the_backup_step

    driver.get(server.url + "/?signedout")
    add_prf_authenticator(driver, prf=True)
    driver.find_element(By.ID, "username").send_keys("pat")
    driver.find_element(By.ID, "signup").click()
    wait_for(driver, lambda d: "/account.html" in d.current_url and d.find_element(By.ID, "npub").text.startswith("npub1"))
    driver.set_window_size(390, 844)
    _, bunker = fetch(driver, "/api/signer/bunker")
    secret = urllib.parse.parse_qs(urllib.parse.urlsplit(bunker["url"]).query)["secret"][0]
    client = RawClient(bunker["relays"][0].replace("localhost", "127.0.0.1"), bunker["pubkey"])
    assert client.ask("connect", bunker["pubkey"], secret, "", json.dumps({"name": "Phone client"}))["result"] == "ack"
    # The list catches up by itself (it is polled with the waiting requests).
    wait_for(driver, lambda d: "Phone client" in d.find_element(By.ID, "bunker-clients").text, timeout=12)
    driver.execute_script("document.getElementById('bunker-clients').scrollIntoView({block: 'center'})")
    driver.save_screenshot(f"{shots(server)}/connected-apps-390.png")

    def approve(event, remember):
        waiting = client.ask("sign_event", json.dumps(event))
        driver.get(server.url + "/approve/" + waiting["error"].rsplit("/approve/", 1)[1])
        wait_for(driver, lambda d: not d.find_element(By.ID, "choices-card").get_attribute("hidden"))
        Select(driver.find_element(By.ID, "remember")).select_by_value(remember)
        driver.find_element(By.ID, "approve").click()
        wait_for(driver, lambda d: d.find_element(By.ID, "status").text.startswith("Done"))
        assert "sig" in client.next_reply()["result"]

    approve({"kind": 1, "content": "A long note. " * 400, "tags": []}, "hour")
    box = driver.execute_script("const r = document.getElementById('status').getBoundingClientRect(); return [r.top, r.bottom, innerHeight];")
    assert box[0] >= 0 and box[1] <= box[2], f"the result is out of view: {box}"
    driver.save_screenshot(f"{shots(server)}/approved-long-390.png")
    approve({"kind": 7, "content": "+", "tags": []}, "forever")

    driver.get(server.url + "/account.html#activity")
    wait_for(driver, lambda d: "until" in d.find_element(By.ID, "grants").text)
    grants = driver.find_element(By.ID, "grants").text
    assert "until you revoke it" in grants and grants.count("until") == 2, grants
    driver.execute_script("document.getElementById('grants').scrollIntoView({block: 'center'})")
    driver.save_screenshot(f"{shots(server)}/grant-durations-390.png")

    # Sealing: the backup first, then a word before and after about the connected app.
    make_the_backup_step(driver)
    driver.find_element(By.ID, "seal").click()
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".ask-inline"))
    assert "1 connected app will be disconnected" in driver.find_element(By.CSS_SELECTOR, ".ask-inline").text
    driver.find_element(By.CSS_SELECTOR, ".ask-inline button").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "status").get_attribute("data-status") in ("ok", "error"), timeout=20)
    assert "new bunker URL" in driver.find_element(By.ID, "status").text, driver.find_element(By.ID, "status").text
    assert "1 app was disconnected" in driver.find_element(By.ID, "status").text
    driver.execute_script("document.getElementById('status').scrollIntoView({block: 'center'})")
    driver.save_screenshot(f"{shots(server)}/sealed-apps-need-new-url-390.png")
    wait_for(driver, lambda d: "No client is connected" in d.find_element(By.ID, "bunker-clients").text)
