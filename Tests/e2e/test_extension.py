"""#45: Keyfob's browser extension (Extension/, `make extension`) in Chromium, loaded unpacked.
Plain pages on other origins, with no Keyfob script, use window.nostr and window.injectedWeb3.keyfob;
every signature is approved in a Keyfob window with the (virtual) passkey and verified here with
independent code (BIP-340 in nostr_check, schnorrkel in py-sr25519-bindings, scalecodec)."""
import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

import pytest
import sr25519
from scalecodec.utils.ss58 import ss58_decode
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.dirname(__file__))
from conftest import ROOT  # noqa: E402
from nostr_check import verify_event  # noqa: E402
from test_approvals import approve_in_popup, serve, sign_up  # noqa: E402
from test_browser import wait_for  # noqa: E402
from test_polkadot import carry_passkeys, decoded_transaction, metadata_def, payload, popup, shots, signing_payload  # noqa: E402


@pytest.fixture
def extension_driver(server):
    """Chromium with the extension built for this test's server, and the extension's id."""
    folder = os.path.join(tempfile.mkdtemp(prefix="keyfob-extension-"), "keyfob")
    subprocess.run([os.path.join(ROOT, "scripts", "build-extension.sh"), server.url, folder], check=True, capture_output=True)
    # What any content script on Keyfob's page could read, asked from the extension's own content
    # script world (the most a content script can be): written to the page when the test asks.
    with open(os.path.join(folder, "content.js"), "a") as f:
        f.write(PROBE)
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=430,932",
                 f"--load-extension={folder}", "--disable-features=DisableLoadExtensionCommandLineSwitch"):
        options.add_argument(flag)
    d = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    try:
        def worker(drv):
            targets = drv.execute_cdp_cmd("Target.getTargets", {})["targetInfos"]
            return [t["url"].split("/")[2] for t in targets if t["url"].startswith("chrome-extension://") and t["url"].endswith("/background.js")]
        wait_for(d, worker)
        yield d, worker(d)[0]
    finally:
        d.quit()


PROBE = """
window.addEventListener("message", async (event) => {
  if (event.source !== window || !event.data || event.data.keyfobProbe !== 1) return;
  const seen = {};
  for (const area of ["local", "session"]) {
    try { seen[area] = JSON.stringify(await chrome.storage[area].get(null)); } catch (error) { seen[area] = "refused: " + error.message; }
  }
  document.documentElement.dataset.probe = JSON.stringify(seen);
});
"""

# Every message posted on Keyfob's /extension.html, as any script there would see it.
RECORDER = "window.__messages = []; addEventListener('message', (e) => { try { window.__messages.push(JSON.stringify(e.data)); } catch {} });"


PAGE = """<!doctype html><title>a site that never heard of Keyfob</title>
<script>
const show = (v) => {{ document.getElementById('out').textContent = typeof v === 'string' ? v : JSON.stringify(v); }};
const fail = (e) => show('error ' + (e.code || '') + ' ' + e.message);
let dot = null;
const hex = (text) => '0x' + Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, '0')).join('');
function pk() {{ window.nostr.getPublicKey().then(show, fail); }}
function sign() {{ window.nostr.signEvent({{kind: 1, content: 'hello from a page without Keyfob', tags: []}}).then(show, fail); }}
function connect() {{ window.injectedWeb3.keyfob.enable('Plain dapp').then(async (i) => {{ dot = i; show(await i.accounts.get()); }}, fail); }}
function raw(address) {{ dot.signer.signRaw({{ address, data: hex('hello extension'), type: 'bytes' }}).then(show, fail); }}
function provide() {{ dot.metadata.provide({metadata}).then(show, fail); }}
function tx(address) {{ dot.signer.signPayload(Object.assign({payload}, {{ address }})).then(show, fail); }}
// A page that names another origin in every message it can send: the extension never reads it.
function forged(origin) {{
  window.postMessage({{ keyfobExtension: 'request', id: 'forged-1', kind: 'nostr', method: 'getPublicKey', params: [], origin, url: origin + '/' }}, '*');
}}
window.addEventListener('message', (e) => {{ if (e.data && e.data.keyfobExtension === 'reply' && e.data.id === 'forged-1') show(e.data.error ? 'error ' + e.data.error.code : e.data.result); }});
</script>
<button id=pk onclick="pk()">pk</button> <button id=sign onclick="sign()">sign</button>
<button id=connect onclick="connect()">connect</button> <button id=provide onclick="provide()">provide</button>
<pre id=out></pre>"""


def call_with_token(server, token, path, body, method="POST"):
    """POST (or `method`) `body` with the extension's token as a bearer: (status, error code)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{server.url}{path}", data=data, method=method,
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as reply:
            return reply.status, None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()).get("error")


def test_pages_that_never_heard_of_keyfob_sign_through_the_extension(server, extension_driver):
    driver, extension_id = extension_driver
    pubkey = sign_up(driver, server, "extra")
    passkeys = driver.get_credentials()
    created = driver.execute_async_script(
        "fetch('/api/polkadot/accounts', {method: 'POST', headers: {'Content-Type': 'application/json'},"
        " body: JSON.stringify({name: 'Main', network: 0})}).then(r => r.json()).then(arguments[0])")
    address = created["address"]
    public_key = bytes.fromhex(ss58_decode(address))

    # The popup before and after: not connected; Sign in opens Keyfob's page, which connects it
    # after a passkey confirmation.
    popup_url = f"chrome-extension://{extension_id}/popup.html"
    driver.get(popup_url)
    wait_for(driver, lambda d: d.find_element(By.ID, "state").text.startswith("Not connected to localhost:"))
    assert driver.find_element(By.ID, "signin").is_displayed()
    recorder = driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORDER})
    driver.get(f"{server.url}/extension.html")
    wait_for(driver, lambda d: d.find_element(By.ID, "connect-card").is_displayed())
    driver.find_element(By.ID, "connect").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "status").get_attribute("data-status") == "ok", timeout=20)
    assert "signs as extra" in driver.find_element(By.ID, "status").text
    driver.save_screenshot(shots(server) + "/extension-connected-page.png")
    # #55: the token went to the extension directly. No message on the page carried it, and a
    # content script on Keyfob's page cannot read the extension's storage.
    messages = driver.execute_script("return window.__messages")
    driver.execute_script("window.postMessage({keyfobProbe: 1}, location.origin)")
    wait_for(driver, lambda d: d.execute_script("return document.documentElement.dataset.probe"))
    probe = json.loads(driver.execute_script("return document.documentElement.dataset.probe"))
    driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": recorder["identifier"]})
    driver.get(popup_url)
    wait_for(driver, lambda d: d.find_element(By.ID, "state").text == f"Connected to localhost:{server.port} as extra.")
    token = driver.execute_async_script("chrome.storage.session.get('token').then((v) => arguments[0](v.token))")
    assert token and len(token) == 43
    assert probe["local"].startswith("refused:") and probe["session"].startswith("refused:"), probe
    assert messages is not None and not any(token in m for m in messages), messages
    # The token alone connects no site: a named origin is refused until the person consents in a
    # Keyfob window (below, for the plain page's origin).
    named = call_with_token(server, token, "/api/polkadot/message",
                            {"msgType": "pub(authorize.tab)", "request": {"origin": "x"}, "url": "https://named.example/"})
    assert named == (403, "permission_denied"), named
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 340, "height": 420, "deviceScaleFactor": 1, "mobile": False})
    driver.save_screenshot(shots(server) + "/extension-popup.png")
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    site = tempfile.mkdtemp(prefix="keyfob-plain-site-")
    with open(os.path.join(site, "index.html"), "w") as f:
        f.write(PAGE.format(metadata=json.dumps(metadata_def()), payload=json.dumps(payload(address))))
    first, second = serve(site), serve(site)
    try:
        origin = f"http://127.0.0.1:{first.server_port}"
        driver.get(f"{origin}/index.html")
        main = driver.current_window_handle
        out = lambda d: d.find_element(By.ID, "out").text  # noqa: E731
        assert driver.execute_script("return typeof window.nostr.signEvent === 'function' && typeof window.injectedWeb3.keyfob.enable")

        # NIP-07: the approval page names the origin the browser reported.
        driver.find_element(By.ID, "pk").click()
        wait_for(driver, lambda d: len(d.window_handles) == 2)
        driver.switch_to.window([h for h in driver.window_handles if h != main][0])
        wait_for(driver, lambda d: origin in d.find_element(By.TAG_NAME, "body").text)
        # At the size the extension opens it (440 × 760).
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 440, "height": 760, "deviceScaleFactor": 1, "mobile": False})
        driver.save_screenshot(shots(server) + "/extension-approval-window.png")
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        driver.switch_to.window(main)
        approve_in_popup(driver, main, remember="forever")
        wait_for(driver, lambda d: out(d) != "")
        assert out(driver) == pubkey
        # Allowed until revoked: the next call is answered from the extension's cache, no window.
        driver.execute_script("document.getElementById('out').textContent = ''")
        driver.find_element(By.ID, "pk").click()
        wait_for(driver, lambda d: out(d) == pubkey)
        assert len(driver.window_handles) == 1
        # #56: the popup says what the site may do and revokes it there; #55: the key the extension
        # kept is forgotten too, and the site asks again. (Opened as a tab, the popup speaks of the
        # web page used last.)
        driver.switch_to.new_window("tab")
        driver.get(popup_url)
        wait_for(driver, lambda d: d.find_element(By.ID, "site-may").is_displayed())
        assert driver.find_element(By.ID, "site-name").text == f"127.0.0.1:{first.server_port}"
        assert driver.find_element(By.ID, "site-may").text == "May read your public key, until you revoke it"
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 340, "height": 600, "deviceScaleFactor": 1, "mobile": False})
        driver.save_screenshot(shots(server) + "/extension-popup-site.png")
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        driver.find_element(By.ID, "revoke-site").click()
        wait_for(driver, lambda d: d.find_element(By.ID, "status").text.endswith("asks you again for everything."))
        wait_for(driver, lambda d: "asks you each time" in d.find_element(By.ID, "site-may-title").text)
        assert not driver.find_element(By.ID, "revoke-site").is_displayed()
        driver.close()
        driver.switch_to.window(main)
        driver.execute_script("document.getElementById('out').textContent = ''")
        driver.find_element(By.ID, "pk").click()
        wait_for(driver, lambda d: len(d.window_handles) == 2)
        approve_in_popup(driver, main)
        wait_for(driver, lambda d: out(d) == pubkey)
        driver.find_element(By.ID, "sign").click()
        approve_in_popup(driver, main, remember="forever")
        wait_for(driver, lambda d: out(d).startswith("{"))
        event = json.loads(out(driver))
        assert event["pubkey"] == pubkey and verify_event(event)
        # #56: remembered ("until I revoke it"), the next signEvent is answered with no window at
        # all, as NIP-07 extensions do: the extension asks the server first.
        driver.execute_script("document.getElementById('out').textContent = ''")
        driver.find_element(By.ID, "sign").click()
        windows = set()
        wait_for(driver, lambda d: windows.add(len(d.window_handles)) or out(d).startswith("{"), timeout=20)
        assert windows == {1}, windows
        again = json.loads(out(driver))
        assert again["pubkey"] == pubkey and verify_event(again)
        assert f"client={origin}" in server.logs()

        # Polkadot: the extension's own question, then a raw signature and a checked transaction,
        # each approved in Keyfob's window with the passkey.
        driver.execute_script("document.getElementById('out').textContent = ''")
        driver.find_element(By.ID, "connect").click()
        wait_for(driver, lambda d: len(d.window_handles) == 2 or out(d).startswith("error"))
        assert len(driver.window_handles) == 2, out(driver)
        driver.switch_to.window([h for h in driver.window_handles if h != main][0])
        wait_for(driver, lambda d: d.find_element(By.ID, "origin").text == origin)
        # The person chooses the accounts the site sees (here the one there is, ticked).
        boxes = driver.find_elements(By.CSS_SELECTOR, "#account-choice input[type=checkbox]")
        assert [b.get_attribute("value") for b in boxes] == [address] and boxes[0].is_selected()
        driver.save_screenshot(shots(server) + "/extension-consent-window.png")
        driver.find_element(By.ID, "allow").click()
        driver.switch_to.window(main)
        wait_for(driver, lambda d: out(d).startswith("["))
        assert [a["address"] for a in json.loads(out(driver))] == [address]

        def approved(script, uses, check=lambda: None):
            driver.execute_script("document.getElementById('out').textContent = ''; " + script)
            popup(driver, main, passkeys, uses=uses)
            wait_for(driver, lambda d: "polkadot-approve.html" in d.current_url and d.find_element(By.ID, "request-card").is_displayed())
            assert driver.find_element(By.ID, "client-note").text == "verified by your browser"
            check()
            driver.find_element(By.ID, "approve").click()
            wait_for(driver, lambda d: len(d.window_handles) == 1, timeout=20)
            driver.switch_to.window(main)
            wait_for(driver, lambda d: out(d).startswith("{"))
            return json.loads(out(driver))

        signature = bytes.fromhex(approved(f"raw({json.dumps(address)})", 0)["signature"][2:])
        assert sr25519.verify(signature, b"<Bytes>hello extension</Bytes>", public_key)
        # Before the site provides its metadata, its transaction cannot be checked: refused, and a
        # Keyfob window says so in plain words while the site gets the reason.
        driver.execute_script(f"document.getElementById('out').textContent = ''; tx({json.dumps(address)})")
        wait_for(driver, lambda d: out(d).startswith("error"))
        assert out(driver).startswith("error unverified_transaction"), out(driver)
        wait_for(driver, lambda d: len(d.window_handles) == 2)
        driver.switch_to.window([h for h in driver.window_handles if h != main][0])
        wait_for(driver, lambda d: d.find_element(By.ID, "refused-card").is_displayed())
        assert driver.find_element(By.ID, "title").text == "Nothing was signed"
        assert f"127.0.0.1:{first.server_port}" in driver.find_element(By.ID, "who").text
        assert "could not check this transaction" in driver.find_element(By.ID, "refused-why").text
        driver.save_screenshot(shots(server) + "/extension-refused-unchecked.png")
        driver.find_element(By.ID, "refused-close").click()
        wait_for(driver, lambda d: len(d.window_handles) == 1)
        driver.switch_to.window(main)
        driver.find_element(By.ID, "provide").click()
        wait_for(driver, lambda d: out(d) == "true")
        shown = {}

        def checked():
            assert driver.find_element(By.ID, "call-note").text.startswith("Checked:")
            details = driver.find_element(By.ID, "details").get_attribute("textContent")
            shown["hash"] = bytes.fromhex(details.split("Metadata hash signed")[1][2:66])
        result = approved(f"tx({json.dumps(address)})", 1, checked)
        signature = bytes.fromhex(result["signature"][2:])
        assert sr25519.verify(signature[1:], signing_payload(shown["hash"]), public_key)
        assert decoded_transaction(result["signedTransaction"])["mode"] == 1

        # Another origin is asked anew, and naming the first origin in its messages gets it nothing.
        other = f"http://127.0.0.1:{second.server_port}"
        driver.get(f"{other}/index.html")
        main = driver.current_window_handle
        driver.execute_script(f"forged({json.dumps(origin)})")
        wait_for(driver, lambda d: len(d.window_handles) == 2)
        driver.switch_to.window([h for h in driver.window_handles if h != main][0])
        wait_for(driver, lambda d: other in d.find_element(By.TAG_NAME, "body").text)
        assert origin not in driver.find_element(By.TAG_NAME, "body").text
        driver.close()
        driver.switch_to.window(main)
        wait_for(driver, lambda d: out(d) == "error user_rejected")

        # Sign out everywhere (with the passkey, on Keyfob's account page): the extension's session
        # ends with the others, and a page gets nothing, without a Keyfob window.
        driver.switch_to.new_window("tab")  # a passkey of its own, its counter past the windows' copies
        driver.get(f"{server.url}/account.html")
        carry_passkeys(driver, passkeys, ahead=100)
        ended = driver.execute_async_script(
            "const done = arguments[0]; confirmAction('sessions.revoke').then((confirmation) =>"
            " api('/logout?everywhere=1', {method: 'POST', body: {confirmation}})).then(done, (e) => done(String(e)))")
        assert ended["signedOut"] is True and ended["sessions"] >= 2, ended
        driver.close()
        driver.switch_to.window(main)
        driver.get(popup_url)
        wait_for(driver, lambda d: d.find_element(By.ID, "state").text.startswith("Not connected"))
        # #56: a site's call to a disconnected extension opens Keyfob's sign-in window (nothing is
        # given until the person signs in and connects again); closed, the site hears why.
        driver.get(f"{origin}/index.html")
        main = driver.current_window_handle
        driver.find_element(By.ID, "sign").click()
        popup(driver, main)
        wait_for(driver, lambda d: "/extension.html" in d.current_url and d.find_element(By.ID, "signin-card").is_displayed())
        driver.close()
        driver.switch_to.window(main)
        wait_for(driver, lambda d: out(d).startswith("error"))
        assert out(driver).startswith("error unauthorized"), out(driver)
        # Signed in and connected in that window, the site's call goes on to its approval.
        driver.execute_script("document.getElementById('out').textContent = ''")
        driver.find_element(By.ID, "sign").click()
        popup(driver, main, passkeys, uses=20)
        signin_window = driver.current_window_handle
        wait_for(driver, lambda d: d.find_element(By.ID, "signin-card").is_displayed())
        assert driver.find_element(By.ID, "asked-by").text.startswith(f"{origin} asked Keyfob through the extension")
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 440, "height": 760, "deviceScaleFactor": 1, "mobile": False})
        driver.save_screenshot(shots(server) + "/extension-sign-in-window.png")
        driver.find_element(By.ID, "signin").click()
        wait_for(driver, lambda d: d.find_element(By.ID, "connect-card").is_displayed(), timeout=20)
        driver.find_element(By.ID, "connect").click()
        # The extension closed it (by its handle: the approval window may already be opening).
        wait_for(driver, lambda d: signin_window not in d.window_handles, timeout=20)
        driver.switch_to.window(main)
        approve_in_popup(driver, main)
        wait_for(driver, lambda d: out(d).startswith("{"), timeout=20)
        assert verify_event(json.loads(out(driver)))
        # #56: Lock now, from the popup: every session of the account locks (the browser's too).
        driver.switch_to.new_window("tab")
        driver.get(popup_url)
        wait_for(driver, lambda d: d.find_element(By.ID, "lock").is_displayed())
        driver.find_element(By.ID, "lock").click()
        wait_for(driver, lambda d: d.find_element(By.ID, "status").text.startswith("Locked on every device"))
        driver.get(f"{server.url}/account.html")
        assert driver.execute_async_script("api('/session').then((s) => arguments[0](s.signerLocked))") is True
        driver.close()
        driver.switch_to.window(main)
    finally:
        first.shutdown()
        second.shutdown()
