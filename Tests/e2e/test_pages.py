"""Every page, in the light and the dark theme, at two phone widths and a laptop width: axe-core (Deque's
accessibility engine, from PyPI's axe-core-python) finds nothing serious or critical — contrast
included — and each is photographed. `make screenshots` writes the photographs to docs/screenshots/."""
import base64
import json
import os
import subprocess
import sys
import urllib.parse

import axe_core_python
from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.dirname(__file__))
from conftest import BINARY  # noqa: E402
from test_accounts import sign_up  # noqa: E402
from test_browser import driver, wait_for  # noqa: E402,F401

with open(os.path.join(os.path.dirname(axe_core_python.__file__), "axe.min.js")) as f:
    AXE = f.read()
THEMES = ("light", "dark")
WIDTHS = ((320, 640), (390, 844), (1280, 900))


def serious_findings(driver):
    """axe-core's WCAG 2.1 A and AA rules on the page as it stands: what is serious or critical.
    One exclusion: the sign-in field's `autocomplete="username webauthn"` (passkey autofill) uses
    the HTML standard's `webauthn` token, which this axe version (4.4) does not know yet."""
    driver.execute_script(AXE)
    found = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const wcag = {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']};
        (async () => [
          await axe.run(document, {runOnly: wcag, rules: {'autocomplete-valid': {enabled: false}}}),
          await axe.run({exclude: [['#username[autocomplete="username webauthn"]']]}, {runOnly: {type: 'rule', values: ['autocomplete-valid']}}),
        ])().then((runs) => done(runs.flatMap((r) => r.violations).filter((v) => v.impact === 'serious' || v.impact === 'critical')
            .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 4).map((n) => n.target.join(' ')).join('; ')}`)),
                (e) => done(['axe failed: ' + e]));""")
    return found


def look_at(driver, name, ready, folder, findings):
    """Checks and photographs the current page in each theme and width; `ready` waits for its content."""
    for theme in THEMES:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": theme}]})
        for width, height in WIDTHS:
            driver.set_window_size(width, height)
            driver.execute_script("window.scrollTo(0, 0)")
            wait_for(driver, ready)
            findings += [f"{name} ({theme}, {width}px): {f}" for f in serious_findings(driver)]
            # Nothing wider than the screen: a page that scrolls sideways hides what is cut off.
            wide = driver.execute_script("return document.documentElement.scrollWidth - innerWidth")
            if wide > 0:
                findings.append(f"{name} ({theme}, {width}px): {wide}px wider than the screen")
            driver.save_screenshot(os.path.join(folder, f"{name}-{theme}-{width}.png"))
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    driver.set_window_size(1280, 900)


def shown(element_id):
    return lambda d: d.find_element(By.ID, element_id).is_displayed()


def test_every_page_in_both_themes_is_accessible_and_photographed(server, driver):
    folder = os.environ.get("KEYFOB_SCREENSHOTS") or os.path.join(server.data, "screenshots")
    os.makedirs(folder, exist_ok=True)
    findings = []
    driver.get(server.url + "/?signedout")
    look_at(driver, "sign-in", shown("signup"), folder, findings)
    # A newcomer's first screen holds both ways in, "Sign in" and "Create a passkey", down to the
    # smallest phone's viewport (320 × 568), signed-out line included (#56).
    for width, height in ((320, 568), (390, 844), (1280, 800)):
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})
        below = driver.execute_script("return document.getElementById('signup').getBoundingClientRect().bottom - innerHeight")
        if below > 0:
            findings.append(f"sign-in ({width} x {height}): Create a passkey is {below:.0f}px below the first screen")
        driver.save_screenshot(os.path.join(folder, f"sign-in-first-screen-{width}.png"))
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    sign_up(driver, server, "ada")
    driver.execute_script("localStorage.removeItem('keyfob-open-sections')")
    driver.get(server.url + "/account.html")
    look_at(driver, "account", lambda d: d.find_element(By.ID, "npub").text.startswith("npub1")
            and d.find_element(By.ID, "security-note").text, folder, findings)
    # Every section open (what axe checks includes their contents), from the passkeys down.
    driver.execute_script("document.querySelectorAll('details.section').forEach((d) => { d.open = true })")
    driver.execute_script("document.getElementById('security').scrollIntoView()")
    findings += [f"account, sections open: {f}" for f in serious_findings(driver)]
    driver.save_screenshot(os.path.join(folder, "account-sections-light-1280.png"))

    event = {"kind": 1, "content": "gm from my phone #gm", "tags": [["t", "gm"]]}
    payload = base64.urlsafe_b64encode(json.dumps(event).encode()).decode().rstrip("=")
    cb = urllib.parse.quote("http://127.0.0.1:9/cb-not-served", safe="")
    driver.get(f"{server.url}/app/sign?payload={payload}&cb={cb}")
    look_at(driver, "approve", lambda d: not d.find_element(By.ID, "choices-card").get_attribute("hidden"), folder, findings)

    # A Polkadot signature waiting for approval (the bridge, with this browser's session).
    pending = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const post = (path, body) => fetch(path, {method: 'POST', headers: {'Content-Type': 'application/json'},
                                                  body: JSON.stringify(body)}).then((r) => r.json());
        const message = (msgType, request) => ({id: '1', msgType, origin: 'dapp-request', request, url: 'https://dapp.example/'});
        (async () => {
          const account = await post('/api/polkadot/accounts', {name: 'Main', network: 0});
          await post('/api/polkadot/message', message('pub(authorize.tab)', null));
          const asked = await post('/api/polkadot/message', message('pub(bytes.sign)',
            {address: account.address, data: '0x' + Array.from(new TextEncoder().encode('Sign in to dapp.example'),
              (b) => b.toString(16).padStart(2, '0')).join(''), type: 'bytes'}));
          return asked.pending.approvalUrl;
        })().then(done, (e) => done('failed: ' + e));""")
    assert pending.startswith("http"), pending
    driver.get(pending)
    look_at(driver, "polkadot-approve", shown("request-card"), folder, findings)

    # The same request while the signer is locked: the page says before the click that the passkey is asked.
    locked = driver.execute_async_script(
        "fetch('/api/signer/lock', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'})"
        ".then((r) => arguments[0](r.status))")
    assert locked == 200
    driver.get(f"{server.url}/app/sign?payload={payload}&cb={cb}")
    look_at(driver, "approve-locked", lambda d: d.find_element(By.ID, "approve").text == "Approve with passkey", folder, findings)

    added = subprocess.run([BINARY, "admins", "add", "ada", "--data-dir", server.data], capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    driver.get(server.url + "/dashboard")
    look_at(driver, "dashboard", lambda d: "ada" in d.find_element(By.ID, "users").text, folder, findings)

    client = "nostrconnect://" + "b" * 64 + "?relay=wss%3A%2F%2Frelay.example&secret=0s8j2&name=Coracle&url=https%3A%2F%2Fcoracle.social&perms=sign_event%3A1%2Cnip44_encrypt"
    driver.get(server.url + "/connect/" + urllib.parse.quote(client, safe=""))
    look_at(driver, "connect", shown("client-card"), folder, findings)
    driver.get(server.url + "/polkadot-connect.html")
    look_at(driver, "polkadot-connect", lambda d: d.find_element(By.ID, "who").text, folder, findings)
    driver.get(server.url + "/extension.html")
    look_at(driver, "extension", shown("connect-card"), folder, findings)
    driver.get(server.url + "/extension-consent.html?" + urllib.parse.urlencode({"origin": "https://dapp.example", "name": "A dapp"}))
    look_at(driver, "extension-consent", shown("consent-card"), folder, findings)
    driver.get(server.url + "/demo.html")
    look_at(driver, "demo", lambda d: d.find_element(By.TAG_NAME, "h1").text, folder, findings)
    # Signed out: the extension's sign-in window for a site's call, and the sign-out-everywhere result.
    driver.execute_async_script("fetch('/logout', {method: 'POST'}).then(() => arguments[0]())")
    driver.get(server.url + "/extension.html?" + urllib.parse.urlencode({"for": "https://dapp.example"}))
    look_at(driver, "extension-signin", shown("signin-card"), folder, findings)
    driver.execute_script("sessionStorage.setItem('keyfob-signed-out', JSON.stringify({sessions: 2, apps: 1, grants: 3, requests: 1,"
                          " passkeys: 2, passkeysAddedToday: 1, ended: {extensionSession: true, apps: ['Coracle'], sites: ['https://dapp.example']}}))")
    driver.get(server.url + "/?signedout")
    look_at(driver, "signed-out-everywhere", lambda d: "signed out everywhere" in d.find_element(By.ID, "status").text, folder, findings)
    driver.get(server.url + "/no-such-page")
    look_at(driver, "not-found", lambda d: d.find_element(By.TAG_NAME, "h1").text == "Page not found", folder, findings)
    assert findings == [], "\n".join(findings)
