"""Apps ask, the user approves with a passkey: NIP-07 from a page on a second origin, a keyfob
/app/sign link with an https callback, and a kind-0 approval confirmed with the passkey whose
receipt the test verifies itself. Screenshots of the approval page at phone and laptop width."""
import base64
import http.server
import json
import os
import sqlite3
import ssl
import subprocess
import sys
import tempfile
import threading
import urllib.parse

import pytest
from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.dirname(__file__))
from nostr_check import verify_event, verify_es256_receipt  # noqa: E402
from test_browser import add_authenticator, driver, wait_for  # noqa: E402,F401


class Recorder(http.server.SimpleHTTPRequestHandler):
    seen = []

    def do_GET(self):
        Recorder.seen.append(self.path)
        if self.path.startswith("/cb"):
            body = b"<!doctype html><title>client</title><p id=done>callback received</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            super().do_GET()

    def log_message(self, *args):
        pass


def serve(directory, tls=False):
    handler = lambda *a, **k: Recorder(*a, directory=directory, **k)  # noqa: E731
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls:
        cert = os.path.join(directory, "cert.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                        "-keyout", cert, "-out", cert, "-days", "1", "-subj", "/CN=localhost"], check=True, capture_output=True)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert)
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def sign_up(driver, server, name):
    driver.get(server.url + "/?signedout")
    add_authenticator(driver)
    driver.find_element(By.ID, "username").send_keys(name)
    driver.find_element(By.ID, "signup").click()
    wait_for(driver, lambda d: "/account.html" in d.current_url and d.find_element(By.ID, "npub").text.startswith("npub1"))
    return driver.execute_async_script("fetch('/session').then(r => r.json()).then(arguments[0])")["pubkey"]


def nip07_site(server):
    """A nostr web client on another origin that knows Keyfob only through /nip07.js."""
    site = tempfile.mkdtemp(prefix="keyfob-site-")
    with open(os.path.join(site, "index.html"), "w") as f:
        f.write(f"""<!doctype html><title>a nostr client</title>
<script src="{server.url}/nip07.js"></script>
<button id=sign onclick="window.nostr.signEvent({{kind: 1, content: 'from the site', tags: []}})
  .then(v => out.textContent = JSON.stringify(v), e => out.textContent = 'error ' + e.code)">sign</button>
<pre id=out></pre>""")
    return serve(site)


def open_approval_popup(driver, main):
    """Switches to the approval window a page's call opened, once its choices are shown."""
    wait_for(driver, lambda d: len(d.window_handles) == 2)
    driver.switch_to.window([h for h in driver.window_handles if h != main][0])
    wait_for(driver, lambda d: not d.find_element(By.ID, "choices-card").get_attribute("hidden"))


def approve_in_popup(driver, main, remember="once", shots=None):
    open_approval_popup(driver, main)
    # A web page's client asked for nothing when it connected: that option is not shown, empty (#27).
    assert not driver.find_element(By.ID, "preset-requested").is_displayed()
    if shots:
        driver.save_screenshot(shots)
    driver.find_element(By.ID, "remember").send_keys({"once": "Just", "hour": "For an hour", "forever": "Until I revoke it"}[remember])
    driver.find_element(By.ID, "approve").click()
    wait_for(driver, lambda d: len(d.window_handles) == 1)
    driver.switch_to.window(main)


def test_the_nip07_demo_page_asks_and_signs(server, driver):
    """Keyfob's own NIP-07 demo: both of its buttons, each approved in Keyfob's window."""
    pubkey = sign_up(driver, server, "demi")
    driver.get(server.url + "/demo.html")
    main = driver.current_window_handle
    output = lambda d: d.find_element(By.ID, "output").text  # noqa: E731
    driver.find_element(By.ID, "pubkey").click()
    approve_in_popup(driver, main)
    wait_for(driver, lambda d: output(d) != "")
    assert output(driver) == pubkey
    driver.find_element(By.ID, "sign").click()
    approve_in_popup(driver, main)
    wait_for(driver, lambda d: output(d) != pubkey)
    assert output(driver).startswith("{"), output(driver)  # an approval is never read as the window closing
    event = json.loads(output(driver))
    assert event["pubkey"] == pubkey and event["content"] == "Hello from a NIP-07 page" and verify_event(event)
    # A locked signer: the approval page says before the click that the passkey will be asked.
    locked = driver.execute_async_script(
        "fetch('/api/signer/lock', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'})"
        ".then((r) => arguments[0](r.status))")
    assert locked == 200
    driver.find_element(By.ID, "sign").click()
    open_approval_popup(driver, main)
    assert driver.find_element(By.ID, "approve").text == "Approve with passkey"
    assert driver.find_element(By.ID, "passkey-note").text.startswith("Your signer is locked: approving asks for your passkey")
    driver.close()  # the window closed undecided: the page's call ends
    driver.switch_to.window(main)
    wait_for(driver, lambda d: output(d).startswith("error"))


def test_an_approval_pressed_after_the_request_expired_says_so_and_the_site_hears(server, driver):
    """#56: an approval window left open past the request's life once answered "this request was
    decided already, has expired, or is not yours" with both buttons live and no way back, while
    the site waited. Now the page says it expired, keeps no button but "Back to the app", and that
    ends the site's call."""
    sign_up(driver, server, "late")
    httpd = nip07_site(server)
    try:
        driver.get(f"http://127.0.0.1:{httpd.server_port}/index.html")
        main = driver.current_window_handle
        driver.find_element(By.ID, "sign").click()
        open_approval_popup(driver, main)
        # Five minutes later, as far as the server knows.
        db = sqlite3.connect(os.path.join(server.data, "keyfob.sqlite"))
        db.execute("UPDATE signer_requests SET expires_at = expires_at - 600")
        db.commit()
        db.close()
        driver.find_element(By.ID, "approve").click()
        wait_for(driver, lambda d: d.find_element(By.ID, "title").text == "This request is gone")
        assert "expired" in driver.find_element(By.ID, "status").text and "Nothing was signed" in driver.find_element(By.ID, "status").text
        assert not driver.find_element(By.ID, "approve").is_displayed() and not driver.find_element(By.ID, "reject").is_displayed()
        driver.save_screenshot(server.data + "/approve-expired.png")
        driver.find_element(By.ID, "back-to-app").click()
        wait_for(driver, lambda d: len(d.window_handles) == 1)
        driver.switch_to.window(main)
        wait_for(driver, lambda d: d.find_element(By.ID, "out").text.startswith("error"))
        assert driver.find_element(By.ID, "out").text == "error user_rejected"
    finally:
        httpd.shutdown()


def test_nip07_from_a_page_on_another_origin(server, driver):
    pubkey = sign_up(driver, server, "nina")
    site = tempfile.mkdtemp(prefix="keyfob-demo-")
    with open(os.path.join(site, "index.html"), "w") as f:
        f.write(f"""<!doctype html><title>a nostr client</title>
<script src="{server.url}/nip07.js"></script>
<button id=pk onclick="window.nostr.getPublicKey().then(v => out.textContent = v, e => out.textContent = 'error ' + e.code)">pk</button>
<button id=sign onclick="window.nostr.signEvent({{kind: 1, content: 'hello from another origin', tags: [['t', 'nip07']]}})
  .then(v => out.textContent = JSON.stringify(v), e => out.textContent = 'error ' + e.code)">sign</button>
<pre id=out></pre>""")
    httpd = serve(site)
    try:
        driver.get(f"http://127.0.0.1:{httpd.server_port}/index.html")
        main = driver.current_window_handle
        out = lambda d: d.find_element(By.ID, "out").text  # noqa: E731

        driver.find_element(By.ID, "pk").click()
        approve_in_popup(driver, main, shots=server.data + "/approve-popup.png")
        wait_for(driver, lambda d: out(d) != "")
        assert out(driver) == pubkey
        # Clients call getPublicKey on every page load: after the first answer, no popup (#27).
        driver.refresh()
        driver.find_element(By.ID, "pk").click()
        wait_for(driver, lambda d: out(d) != "")
        assert out(driver) == pubkey and len(driver.window_handles) == 1

        # Rejected on the approval page: the page's call ends with user_rejected, nothing signed.
        driver.find_element(By.ID, "sign").click()
        open_approval_popup(driver, main)
        driver.find_element(By.ID, "reject").click()
        wait_for(driver, lambda d: len(d.window_handles) == 1)
        driver.switch_to.window(main)
        wait_for(driver, lambda d: out(d).startswith("error"))
        assert out(driver) == "error user_rejected", out(driver)

        driver.find_element(By.ID, "sign").click()
        approve_in_popup(driver, main, remember="hour")
        wait_for(driver, lambda d: out(d).startswith("{"))
        event = json.loads(out(driver))
        assert event["pubkey"] == pubkey and event["content"] == "hello from another origin"
        assert verify_event(event)

        # Remembered for an hour: the popup opens and closes by itself, no approval.
        driver.execute_script("document.getElementById('out').textContent = ''")
        driver.find_element(By.ID, "sign").click()
        wait_for(driver, lambda d: out(d).startswith("{"), timeout=20)
        assert verify_event(json.loads(out(driver)))
        history = driver.execute_async_script(
            f"window.open('{server.url}/account.html', '_self'); arguments[0](1)")
        assert history == 1
        # What the app may do is one row for the app, in words, with one Revoke (#27).
        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#grants li.grant"))
        rows = driver.find_elements(By.CSS_SELECTOR, "#grants li.grant")
        assert len(rows) == 1 and f"127.0.0.1:{httpd.server_port} may sign a note" in rows[0].text, rows[0].text
        logs = server.logs()
        assert f"client=http://127.0.0.1:{httpd.server_port}" in logs and "transport=nip07" in logs
    finally:
        httpd.shutdown()


@pytest.fixture
def tls_driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=390,844",
                 "--ignore-certificate-errors"):
        options.add_argument(flag)
    d = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    yield d
    d.quit()


def test_a_keyfob_link_with_an_https_callback(server, tls_driver):
    driver = tls_driver
    pubkey = sign_up(driver, server, "lena")
    callback_dir = tempfile.mkdtemp(prefix="keyfob-cb-")
    httpd = serve(callback_dir, tls=True)
    try:
        event = {"kind": 1, "content": "signed through a universal link", "tags": [], "created_at": 1_700_000_000}
        payload = base64.urlsafe_b64encode(json.dumps(event).encode()).decode().rstrip("=")
        cb = f"https://localhost:{httpd.server_port}/cb"
        driver.get(f"{server.url}/app/sign?payload={payload}&cb={urllib.parse.quote(cb, safe='')}&origin=Example%20App")
        wait_for(driver, lambda d: not d.find_element(By.ID, "choices-card").get_attribute("hidden"))
        assert f"localhost:{httpd.server_port}" in driver.find_element(By.ID, "client").text
        assert "not verified" in driver.find_element(By.ID, "client-claimed").text
        driver.save_screenshot(server.data + "/approve-phone.png")
        driver.set_window_size(1280, 900)
        driver.save_screenshot(server.data + "/approve-laptop.png")
        driver.find_element(By.ID, "approve").click()
        wait_for(driver, lambda d: any(p.startswith("/cb?") for p in Recorder.seen))
        path = [p for p in Recorder.seen if p.startswith("/cb?")][-1]
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(path).query))
        assert query["ok"] == "1" and query["pubkey"] == pubkey
        signed = {**event, "pubkey": query["pubkey"], "id": query["id"], "sig": query["sig"]}
        assert verify_event(signed)
    finally:
        httpd.shutdown()


def test_a_profile_change_needs_the_passkey_and_leaves_a_receipt(server, driver):
    sign_up(driver, server, "rosa")
    event = {"kind": 0, "content": json.dumps({"name": "rosa"}), "tags": []}
    payload = base64.urlsafe_b64encode(json.dumps(event).encode()).decode().rstrip("=")
    cb = urllib.parse.quote("http://127.0.0.1:9/cb-not-served", safe="")
    driver.get(f"{server.url}/app/sign?payload={payload}&cb={cb}")
    wait_for(driver, lambda d: not d.find_element(By.ID, "choices-card").get_attribute("hidden"))
    assert "profile" in driver.find_element(By.ID, "what").text
    assert driver.find_element(By.ID, "warnings").text.strip() != ""
    assert not driver.find_element(By.ID, "passkey-note").get_attribute("hidden")
    driver.save_screenshot(server.data + "/approve-kind0.png")
    driver.find_element(By.ID, "approve").click()
    wait_for(driver, lambda d: "cb-not-served" in d.current_url)
    assert "ok=1" in driver.current_url
    driver.get(server.url + "/account.html")
    receipt = driver.execute_async_script("""
        const done = arguments[0];
        fetch('/api/signer/history').then(r => r.json()).then(h => {
          const entry = h.entries.find(e => e.kind === 0 && e.outcome === 'approved');
          return fetch(`/api/signer/history/${entry.id}/receipt`);
        }).then(r => r.json()).then(done, e => done(String(e)));""")
    assert "event:" in receipt["committed"]
    assert verify_es256_receipt(receipt)
    tampered = dict(receipt, committed=receipt["committed"].replace("nonce:", "nonce:0"))
    assert not verify_es256_receipt(tampered)


def approval_page(driver, server, event):
    payload = base64.urlsafe_b64encode(json.dumps(event).encode()).decode().rstrip("=")
    cb = urllib.parse.quote("http://127.0.0.1:9/cb-not-served", safe="")
    driver.get(f"{server.url}/app/sign?payload={payload}&cb={cb}")
    wait_for(driver, lambda d: not d.find_element(By.ID, "choices-card").get_attribute("hidden"))


def in_first_viewport(driver, element_id):
    """Whether the element is wholly inside the viewport with the page scrolled to the top."""
    driver.execute_script("window.scrollTo(0, 0)")
    return driver.execute_script(
        "const r = document.getElementById(arguments[0]).getBoundingClientRect();"
        "return r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth;", element_id)


@pytest.mark.parametrize("width", [390, 320])
def test_on_a_phone_the_approval_page_says_what_in_a_line_and_approve_is_in_reach(server, driver, width):
    """#27: the summary first (what, in words; a profile change lists the fields it replaces), the
    details behind a disclosure, one "Allow" control, Approve and Reject in the first viewport."""
    sign_up(driver, server, f"phone{width}")
    driver.set_window_size(width, 844)
    try:
        tags = [["t", "gm"]] + [["p", "a" * 64]] * 12
        approval_page(driver, server, {"kind": 1, "content": "gm from my phone " + "and a long tail " * 20, "tags": tags})
        assert driver.find_element(By.ID, "what").text == "Sign a note"
        assert driver.find_element(By.ID, "summary").text.startswith("“gm from my phone")
        assert "#gm" in driver.find_element(By.ID, "summary").text
        assert not driver.find_element(By.ID, "details").is_displayed()  # behind "Details"
        assert driver.find_element(By.ID, "account-name").text == f"phone{width}"
        for control in ("approve", "reject", "remember"):
            assert in_first_viewport(driver, control), f"{control} is not in the first viewport at {width}×844"
        driver.save_screenshot(os.path.join(server.data, f"approve-note-{width}.png"))
        shutil_copy_screenshot(driver, f"approve-note-{width}.png")

        approval_page(driver, server, {"kind": 0, "content": json.dumps({"name": "rosa", "about": "hi", "picture": "https://x/p.png"}), "tags": []})
        assert driver.find_element(By.ID, "what").text == "Replace your profile"
        assert [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#fields li")] == ["name: rosa", "about: hi", "picture: https://x/p.png"]
        assert driver.find_element(By.ID, "approve").text == "Approve with passkey"
        assert not driver.find_element(By.ID, "remember").is_displayed()  # asked every time: nothing to remember
        assert in_first_viewport(driver, "approve")
        shutil_copy_screenshot(driver, f"approve-profile-{width}.png")
    finally:
        driver.set_window_size(1280, 900)


def shutil_copy_screenshot(driver, name):
    folder = os.path.join(os.path.dirname(__file__), "..", "..", ".build", "screenshots")
    os.makedirs(folder, exist_ok=True)
    driver.save_screenshot(os.path.join(folder, name))
