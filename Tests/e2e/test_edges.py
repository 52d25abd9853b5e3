"""Only the page that asked gets the answer (issue #23), in real Chromium: a page on a second
origin tries the NIP-07 callback pollution against a user who trusts a first origin (a grant, an
unlocked session) and receives nothing."""
import base64
import json
import os
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

from selenium.webdriver.common.by import By

from test_approvals import approve_in_popup, serve, sign_up
from test_browser import driver, wait_for  # noqa: F401  (the Chromium fixture)


def page(directory, body):
    with open(os.path.join(directory, "index.html"), "w") as f:
        f.write(body)


def test_a_second_origin_cannot_receive_the_first_ones_nip07_results(server, driver):
    sign_up(driver, server, "nora")
    trusted_dir, evil_dir = tempfile.mkdtemp(prefix="keyfob-trusted-"), tempfile.mkdtemp(prefix="keyfob-evil-")
    page(trusted_dir, f"""<!doctype html><title>trusted client</title>
<script src="{server.url}/nip07.js"></script>
<button id=sign onclick="window.nostr.signEvent({{kind: 1, content: 'trusted', tags: []}})
  .then(v => out.textContent = JSON.stringify(v), e => out.textContent = 'error ' + e.code)">sign</button>
<pre id=out></pre>""")
    trusted, evil = serve(trusted_dir), serve(evil_dir)
    trusted_origin = f"http://127.0.0.1:{trusted.server_port}"
    evil_origin = f"http://127.0.0.1:{evil.server_port}"
    payload = base64.urlsafe_b64encode(json.dumps({"kind": 1, "content": "stolen", "tags": [],
                                                   "created_at": int(time.time())}).encode()).decode().rstrip("=")
    enc = urllib.parse.quote
    polluted = [
        f"{server.url}/callback.html?origin={enc(trusted_origin, safe='')}&rid=y&origin={enc(evil_origin, safe='')}",
        f"{server.url}/callback.html?origin={enc(trusted_origin, safe='')}&rid=y&ori%67in={enc(evil_origin, safe='')}",
        f"{server.url}/callback.html?origin=%ZZ{enc(trusted_origin, safe='')}&rid=y&origin={enc(evil_origin, safe='')}",
        f"http://localhost.:{server.port}/callback.html?origin={enc(evil_origin, safe='')}&rid=y",
    ]
    attempts = [f"{server.url}/app/sign?" + urllib.parse.urlencode({"payload": payload, "cb": cb, "origin": trusted_origin})
                for cb in polluted]
    page(evil_dir, """<!doctype html><title>evil page</title>
<pre id=got></pre>
<script>
window.addEventListener("message", e => { document.getElementById("got").textContent += e.origin + " " + JSON.stringify(e.data) + "\\n"; });
function attack(url) { window.open(url, "attack", "popup,width=400,height=600"); }
</script>""")
    try:
        # The user trusts the first origin for an hour: its signatures need no page from now on.
        driver.get(f"{trusted_origin}/index.html")
        main = driver.current_window_handle
        driver.find_element(By.ID, "sign").click()
        approve_in_popup(driver, main, remember="hour")
        wait_for(driver, lambda d: d.find_element(By.ID, "out").text.startswith("{"))

        driver.get(f"{evil_origin}/index.html")
        main = driver.current_window_handle
        for url in attempts:
            driver.execute_script("attack(arguments[0])", url)
            wait_for(driver, lambda d: len(d.window_handles) == 2)
            popup = [h for h in driver.window_handles if h != main][0]
            driver.switch_to.window(popup)
            wait_for(driver, lambda d: d.find_elements(By.ID, "problem") or d.find_elements(By.ID, "status"))
            text = driver.find_element(By.TAG_NAME, "body").text
            assert "Nothing was signed" in text or "not sent anywhere" in text, text
            driver.save_screenshot(os.path.join(server.data, "nip07-pollution-refused.png"))
            driver.close()
            driver.switch_to.window(main)
            time.sleep(0.5)
            assert driver.find_element(By.ID, "got").text == "", driver.find_element(By.ID, "got").text
        # The callback page itself, opened by the evil page with a result it made up and two
        # origins, posts nothing either.
        driver.execute_script("attack(arguments[0])", polluted[0] + "&ok=1&sig=00")
        wait_for(driver, lambda d: len(d.window_handles) == 2)
        time.sleep(1)
        assert driver.find_element(By.ID, "got").text == ""
        logs = server.logs()
        assert "stolen" not in logs
    finally:
        trusted.shutdown()
        evil.shutdown()


def test_the_plain_session_cookie_counts_only_on_localhost(server):
    """A sibling subdomain can set a plain `keyfob_session` cookie for the parent domain (login
    CSRF into the attacker's account): on a public host only the `__Host-` cookie counts."""
    from softkey import Client, SoftKey
    c = Client(f"http://127.0.0.1:{server.port}", server.url)
    status, reply = c.register(SoftKey(server.url), "carol")
    assert status == 200
    token = reply["token"]
    for host, name, ok in [(f"localhost:{server.port}", "keyfob_session", True), ("keyfob.example", "keyfob_session", False),
                           ("keyfob.example", "__Host-keyfob_session", True), ("127.0.0.1", "keyfob_session", True)]:
        request = urllib.request.Request(f"http://127.0.0.1:{server.port}/session",
                                         headers={"Host": host, "Cookie": f"{name}={token}"})
        try:
            with urllib.request.urlopen(request, timeout=5) as r:
                status = r.status
        except urllib.error.HTTPError as error:
            status = error.code
        assert (status == 200) == ok, (host, name, status)
