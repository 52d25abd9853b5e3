"""#59: the extension in Firefox (ESR), driven by Mozilla's own marionette-driver with no
geckodriver: the Firefox build installed as a temporary add-on, a Keyfob account made and the
extension connected with a virtual passkey, then a plain page on another origin calls
window.nostr and the polkadot-js provider, each approved in a Keyfob window; every signature is
checked with independent code (nostr-sdk, sr25519)."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import sr25519
from scalecodec.utils.ss58 import ss58_decode
from marionette_driver.addons import Addons
from marionette_driver.marionette import Marionette

sys.path.insert(0, os.path.dirname(__file__))
from conftest import ROOT  # noqa: E402
from test_approvals import serve  # noqa: E402
from test_extension import PAGE, PROBE  # noqa: E402
from test_polkadot import metadata_def, payload, shots  # noqa: E402
from nostr_check import verify_event  # noqa: E402

FIREFOX = shutil.which("firefox-esr") or shutil.which("firefox")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def firefox(server):
    """Firefox with the extension built for this test's server, a session and its passkey."""
    assert FIREFOX, "Firefox is not installed: apt-get install firefox-esr (.ci/run does)"
    profile = tempfile.mkdtemp(prefix="keyfob-firefox-")
    port = free_port()
    with open(os.path.join(profile, "user.js"), "w") as f:
        f.write(f'user_pref("marionette.port", {port});\n'
                'user_pref("xpinstall.signatures.required", false);\n'
                # WebDriver's virtual authenticators answer only when the soft token is on.
                'user_pref("security.webauth.webauthn_enable_softtoken", true);\n'
                'user_pref("security.webauth.webauthn_enable_usbtoken", false);\n'
                'user_pref("security.webauthn.enable_softtoken", true);\n'
                'user_pref("security.webauthn.enable_usbtoken", false);\n')
    process = subprocess.Popen([FIREFOX, "--headless", "--marionette", "--no-remote", "--profile", profile],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    m = Marionette(host="127.0.0.1", port=port)
    try:
        deadline = time.time() + 60
        while True:
            try:
                m.start_session()
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        built = os.path.join(tempfile.mkdtemp(prefix="keyfob-extension-"), "keyfob")
        subprocess.run([os.path.join(ROOT, "scripts", "build-extension.sh"), server.url, built], check=True, capture_output=True)
        # What any content script on Keyfob's page could read, asked from the extension's own
        # content script world (the most a content script can be), as in the Chromium test.
        with open(os.path.join(built + "-firefox", "content.js"), "a") as f:
            f.write(PROBE)
        Addons(m).install(built + "-firefox", temp=True)
        yield m
    finally:
        try:
            m.delete_session()
        except Exception:
            pass
        process.kill()
        process.wait()


def until(m, check, timeout=20, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception:
            pass
        time.sleep(0.1)
    seen = ""
    try:
        seen = js(m, "const s = document.getElementById('status'); return location.href + ' | ' + (s ? s.textContent : '')"
                     " + ' | ' + [...document.querySelectorAll('.field-error')].map((e) => e.textContent).join(' ')")
    except Exception as error:
        seen = str(error)
    raise AssertionError(f"timed out waiting for {what}: {seen}")


def js(m, script, *args):
    return m.execute_script(script, script_args=list(args), sandbox=None)


def text(m, element_id):
    return js(m, "const e = document.getElementById(arguments[0]); return e ? e.textContent : null", element_id)


def click(m, element_id):
    js(m, "document.getElementById(arguments[0]).click()", element_id)


def shot(m, server, name):
    import base64
    with open(os.path.join(shots(server), name), "wb") as f:
        f.write(base64.b64decode(m.screenshot()))


def other_window(m, main):
    until(m, lambda: len(m.window_handles) == 2, what="a Keyfob window")
    m.switch_to_window([h for h in m.window_handles if h != main][0])


def test_a_plain_page_signs_through_the_extension_in_firefox(server, firefox):
    m = firefox
    authenticator = m._send_message("WebAuthn:AddVirtualAuthenticator", {
        "protocol": "ctap2", "transport": "internal", "hasResidentKey": True, "hasUserVerification": True,
        "isUserConsenting": True, "isUserVerified": True})
    assert authenticator
    # An account, its key and a Polkadot account, made on Keyfob's own pages in Firefox.
    m.navigate(server.url + "/?signedout")
    js(m, "document.getElementById('username').value = 'fox'")
    click(m, "signup")
    until(m, lambda: "/account.html" in m.get_url() and (text(m, "npub") or "").startswith("npub1"), what="the account page")
    pubkey = js(m, "return api('/session').then((s) => s.pubkey)")
    address = js(m, "return fetch('/api/polkadot/accounts', {method: 'POST', headers: {'Content-Type': 'application/json'},"
                    " body: JSON.stringify({name: 'Main', network: 0})}).then((r) => r.json()).then((a) => a.address)")
    public_key = bytes.fromhex(ss58_decode(address))

    # Connect the extension: the passkey confirms, the extension keeps a token the page never saw.
    m.navigate(server.url + "/extension.html")
    until(m, lambda: js(m, "return document.documentElement.dataset.keyfobClaim || ''"), what="the extension's claim")
    click(m, "connect")
    until(m, lambda: js(m, "return document.getElementById('status').dataset.status") == "ok", what="connected")
    assert "signs as fox" in text(m, "status")
    shot(m, server, "firefox-extension-connected.png")
    # The token never reached the page, and a content script on Keyfob's page reads no token from
    # the extension's storage: Firefox gives content scripts no storage.session at all, and the
    # local area holds no token.
    js(m, "window.postMessage({keyfobProbe: 1}, location.origin)")
    probe = json.loads(until(m, lambda: js(m, "return document.documentElement.dataset.probe"), what="the probe"))
    assert probe["session"].startswith("refused:") and '"token"' not in probe["local"], probe
    assert not js(m, "return Object.keys(document.documentElement.dataset).some((k) => /token/i.test(k))")

    site = tempfile.mkdtemp(prefix="keyfob-plain-site-")
    with open(os.path.join(site, "index.html"), "w") as f:
        f.write(PAGE.format(metadata=json.dumps(metadata_def()), payload=json.dumps(payload(address))))
    httpd = serve(site)
    try:
        origin = f"http://127.0.0.1:{httpd.server_port}"
        m.navigate(f"{origin}/index.html")
        main = m.current_window_handle
        # The page's own world sees what the extension's MAIN-world script put there.
        assert m.execute_script("return typeof window.wrappedJSObject.nostr.signEvent === 'function'"
                                " && typeof window.wrappedJSObject.injectedWeb3.keyfob.enable === 'function'")
        out = lambda: text(m, "out") or ""  # noqa: E731

        def approve(shot_name=None):
            other_window(m, main)
            until(m, lambda: js(m, "return !document.getElementById('choices-card').hidden"), what="the approval page")
            # The page names the origin Firefox reported to the extension.
            assert origin in js(m, "return document.body.textContent")
            if shot_name:
                shot(m, server, shot_name)
            click(m, "approve")
            until(m, lambda: len(m.window_handles) == 1, what="the window to close")
            m.switch_to_window(main)

        click(m, "pk")
        approve("firefox-nostr-approval.png")
        until(m, lambda: out() == pubkey, what="the public key")
        js(m, "document.getElementById('out').textContent = ''")
        click(m, "sign")
        approve()
        until(m, lambda: out().startswith("{"), what="a signed event")
        event = json.loads(out())
        assert event["pubkey"] == pubkey and event["content"] == "hello from a page without Keyfob" and verify_event(event)

        # Polkadot: the person lets the site see the account, then approves a raw signature with
        # the passkey in Keyfob's window.
        js(m, "document.getElementById('out').textContent = ''")
        click(m, "connect")
        other_window(m, main)
        until(m, lambda: text(m, "origin") == origin, what="the consent window")
        shot(m, server, "firefox-consent-window.png")
        click(m, "allow")
        m.switch_to_window(main)
        until(m, lambda: out().startswith("["), what="the accounts")
        assert [a["address"] for a in json.loads(out())] == [address]
        js(m, "document.getElementById('out').textContent = ''; raw(arguments[0])", address)
        other_window(m, main)
        until(m, lambda: "polkadot-approve.html" in m.get_url() and js(m, "return !document.getElementById('request-card').hidden"),
              what="the Polkadot approval")
        assert text(m, "client-note") == "verified by your browser"
        shot(m, server, "firefox-polkadot-approval.png")
        click(m, "approve")
        until(m, lambda: len(m.window_handles) == 1, what="the window to close")
        m.switch_to_window(main)
        until(m, lambda: out().startswith("{"), what="a Polkadot signature")
        signature = bytes.fromhex(json.loads(out())["signature"][2:])
        assert sr25519.verify(signature, b"<Bytes>hello extension</Bytes>", public_key)
    finally:
        httpd.shutdown()
