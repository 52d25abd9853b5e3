"""Polkadot through a passkey (#26), in real Chromium against the real binary: a web dapp on
another origin connects through /polkadot.js and signs raw bytes and an extrinsic in Keyfob's
window; the Nova bridge's own messages from a signed-in app; every signature checked with
py-sr25519-bindings (schnorrkel) over a payload SCALE-encoded here with scalecodec, not by Keyfob."""
import base64
import json
import os
import sys
import tempfile

import sr25519
from scalecodec.base import RuntimeConfiguration, RuntimeConfigurationObject, ScaleBytes
from scalecodec.type_registry import load_type_registry_preset
from scalecodec.utils.ss58 import ss58_decode
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.common.virtual_authenticator import Credential

sys.path.insert(0, os.path.dirname(__file__))
from test_approvals import serve, sign_up  # noqa: E402
from test_browser import add_authenticator, driver, wait_for  # noqa: E402,F401
from test_pages import serious_findings  # noqa: E402

POLKADOT_GENESIS = "91b171bb158e2d3848fa23a9f1c25182fb8e20313b2c1eb49219da7a70ce90c3"
BLOCK_HASH = "de8f69eeb5e065e18c6950ff708d7e551f68dc9bf59a07c52367c0280f805ec7"
METHOD = "0503008eaf04151687736326c9fea17e25fc5287613693c912909cb226aa4794f26a480700e40b5402"


def shots(server):
    """Where screenshots go: KEYFOB_SCREENSHOTS when set (to look at them), else the run's data folder."""
    return os.environ.get("KEYFOB_SCREENSHOTS", server.data)


def payload(address):
    return {"address": address, "blockHash": "0x" + BLOCK_HASH, "blockNumber": "0x00231d30", "era": "0x0703",
            "genesisHash": "0x" + POLKADOT_GENESIS, "method": "0x" + METHOD, "nonce": "0x00000005",
            "signedExtensions": ["CheckNonZeroSender", "CheckSpecVersion", "CheckTxVersion", "CheckGenesis", "CheckMortality",
                                 "CheckNonce", "CheckWeight", "ChargeTransactionPayment", "PrevalidateAttests", "CheckMetadataHash"],
            "specVersion": "0x000f4dfc", "tip": "0x00000000000000000000000000000000", "transactionVersion": "0x0000001a",
            "version": 4, "mode": 0}


def signing_payload(metadata_hash=None, spec_version=0x000f4dfc):
    """The bytes polkadot-js signs for payload(), encoded independently with scalecodec: with
    CheckMetadataHash off (mode 0, None), or on with `metadata_hash` (mode 1, Some)."""
    rc = RuntimeConfiguration()
    rc.update_type_registry(load_type_registry_preset("legacy"))
    def enc(type_string, value):
        return bytes.fromhex(rc.create_scale_object(type_string).encode(value).to_hex()[2:])
    mode, hash_option = (bytes([1]), bytes([1]) + metadata_hash) if metadata_hash else (bytes([0]), bytes([0]))
    return (bytes.fromhex(METHOD) + bytes.fromhex("0703") + enc("Compact<u64>", 5) + enc("Compact<u128>", 0) + mode
            + enc("u32", spec_version) + enc("u32", 0x1a) + bytes.fromhex(POLKADOT_GENESIS) + bytes.fromhex(BLOCK_HASH) + hash_option)


def vector(name):
    with open(os.path.join(os.path.dirname(__file__), "..", "Vectors", "polkadot", name), "rb") as f:
        return f.read()


def decoded_transaction(signed_transaction):
    """Keyfob's `signedTransaction` read by substrate-interface's codec (scalecodec), field by field
    as extrinsic v4 lays it out for Polkadot's extensions (era, nonce, tip, CheckMetadataHash's
    mode), the call with Polkadot's metadata; every byte accounted for."""
    rc = RuntimeConfigurationObject()
    rc.update_type_registry(load_type_registry_preset("core"))
    metadata = rc.create_scale_object("MetadataVersioned", data=ScaleBytes(vector("polkadot_v14_metadata.scale")))
    metadata.decode()
    rc.add_portable_registry(metadata)
    data = ScaleBytes(bytes.fromhex(signed_transaction[2:]))
    def read(type_string, **extra):
        value = rc.create_scale_object(type_string, data=data, **extra)
        value.decode(check_remaining=False)
        return value.value
    length = read("Compact<u32>")
    assert length == data.length - data.offset
    fields = {"version": read("u8"), "address": read("MultiAddress"), "signature": read("MultiSignature"),
              "era": read("Era"), "nonce": read("Compact<u32>"), "tip": read("Compact<u128>"), "mode": read("u8"),
              "call": read("Call", metadata=metadata)}
    assert data.offset == data.length
    return fields


def metadata_def(spec_version=1003004):
    """A MetadataDef as polkadot-js apps offers it, with the runtime's V15 metadata as rawMetadata:
    Keyfob's test runtime (Tests/KeyfobServerTests/TestRuntime.swift) on Polkadot's genesis."""
    return {"chain": "Polkadot", "genesisHash": "0x" + POLKADOT_GENESIS, "specVersion": spec_version, "ss58Format": 0,
            "tokenDecimals": 10, "tokenSymbol": "DOT", "icon": "", "types": {},
            "rawMetadata": "0x" + vector("keyfob_test_runtime_v15.scale").hex()}


def create_account(driver):
    driver.find_element(By.ID, "polkadot-network").send_keys("Generic")
    driver.find_element(By.ID, "polkadot-create").click()
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#polkadot-list .polkadot-account"))
    return driver.find_element(By.CSS_SELECTOR, "#polkadot-list .polkadot-account").get_attribute("data-address")


def popup(driver, main, passkeys=None, uses=0):
    """Switches to Keyfob's window. Chrome's virtual authenticator belongs to one tab: the popup gets
    its own holding copies of `passkeys`, their counters moved on past earlier popups' uses."""
    wait_for(driver, lambda d: len(d.window_handles) == 2)
    driver.switch_to.window([h for h in driver.window_handles if h != main][0])
    if passkeys:
        carry_passkeys(driver, passkeys, ahead=10 * (uses + 1))


def carry_passkeys(driver, passkeys, ahead):
    """Gives this tab a virtual authenticator holding copies of `passkeys`, their counters `ahead`
    of the originals (each tab's authenticator counts on its own; the server's counter must only rise)."""
    add_authenticator(driver)
    for credential in passkeys:
        data = credential.to_dict()
        data["signCount"] = data.get("signCount", 0) + ahead
        driver.add_credential(Credential.from_dict(data))


def open_dapp(driver, site):
    """Serves `site`, opens its page, and presses its Connect button: Keyfob's window asks. Returns
    the server, the page's window and a reader of its #out."""
    httpd = serve(site)
    driver.get(f"http://127.0.0.1:{httpd.server_port}/index.html")
    main = driver.current_window_handle
    driver.find_element(By.ID, "connect").click()
    popup(driver, main)
    wait_for(driver, lambda d: d.find_element(By.ID, "authorize-card").is_displayed())
    return httpd, main, lambda d: d.find_element(By.ID, "out").text


def test_a_web_dapp_connects_and_signs_through_polkadot_js(server, driver):
    sign_up(driver, server, "paula")
    address = create_account(driver)
    public_key = bytes.fromhex(ss58_decode(address))
    driver.save_screenshot(shots(server) + "/account-polkadot.png")
    # Export asks for the password twice in the row, then the passkey; removing (a second account)
    # asks in the row, then the passkey.
    row = lambda d: d.find_element(By.CSS_SELECTOR, "#polkadot-list .polkadot-account")  # noqa: E731
    button = lambda d, text: [b for b in row(d).find_elements(By.TAG_NAME, "button") if b.text == text][0]  # noqa: E731
    button(driver, "Export JSON").click()
    inputs = row(driver).find_elements(By.CSS_SELECTOR, "input[type=password]")
    inputs[0].send_keys("a long password")
    inputs[1].send_keys("a long password!")
    button(driver, "Save the file").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "status").get_attribute("data-status") == "error")
    assert "differ" in driver.find_element(By.ID, "status").text
    inputs[1].send_keys(Keys.BACKSPACE)
    driver.save_screenshot(shots(server) + "/account-polkadot-export.png")
    button(driver, "Save the file").click()
    wait_for(driver, lambda d: "Saved" in d.find_element(By.ID, "status").text)
    driver.find_element(By.ID, "polkadot-create").click()
    wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#polkadot-list .polkadot-account")) == 2)
    second = lambda d: d.find_elements(By.CSS_SELECTOR, "#polkadot-list .polkadot-account")[1]  # noqa: E731
    [b for b in second(driver).find_elements(By.TAG_NAME, "button") if b.text == "Remove"][0].click()
    [b for b in second(driver).find_elements(By.TAG_NAME, "button") if b.text == "Remove it"][0].click()
    wait_for(driver, lambda d: "was removed" in d.find_element(By.ID, "status").text)
    assert [r.get_attribute("data-address") for r in driver.find_elements(By.CSS_SELECTOR, "#polkadot-list .polkadot-account")] == [address]
    # A second account the dapp will not be shown (the person unticks it when connecting).
    driver.find_element(By.ID, "polkadot-create").click()
    wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#polkadot-list .polkadot-account")) == 2)
    kept_back = second(driver).get_attribute("data-address")
    passkeys = driver.get_credentials()

    site = tempfile.mkdtemp(prefix="keyfob-dapp-")
    with open(os.path.join(site, "index.html"), "w") as f:
        f.write(f"""<!doctype html><title>a polkadot dapp</title>
<script src="{server.url}/polkadot.js"></script>
<script>
let injected = null;
const show = (v) => {{ document.getElementById('out').textContent = typeof v === 'string' ? v : JSON.stringify(v); }};
const fail = (e) => show('error ' + (e.code || '') + ' ' + e.message);
</script>
<script>
const address = {json.dumps(address)};
const hex = (text) => '0x' + Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, '0')).join('');
function connect() {{ window.injectedWeb3.keyfob.enable('Test dapp').then(async (i) => {{ injected = i; show(await i.accounts.get()); }}, fail); }}
function forge() {{
  // A page opening Keyfob's window itself and posting the connect message as a String object:
  // it once slipped past the connect card (typeof 'object', sent on as a plain string).
  const w = window.open({json.dumps(server.url)} + '/polkadot-connect.html?rid=f1', 'forge', 'popup,width=440,height=760');
  window.addEventListener('message', (e) => {{
    if (!e.data || e.data.rid !== 'f1') return;
    if (e.data.type === 'keyfob-polkadot-ready') w.postMessage({{ type: 'keyfob-polkadot-request', rid: 'f1', msgType: new String('pub(authorize.tab)'), request: {{ origin: 'forged' }} }}, {json.dumps(server.url)});
    if (e.data.type === 'keyfob-polkadot-reply') {{ show('reply ' + JSON.stringify(e.data.outcome)); w.close(); }}
  }});
}}
function signAsHidden() {{ injected.signer.signRaw({{ address: {json.dumps("KEPT")}, data: hex('hi'), type: 'bytes' }}).then(show, fail); }}
function raw() {{ injected.signer.signRaw({{ address, data: hex('hello polkadot'), type: 'bytes' }}).then(show, fail); }}
function tx() {{ injected.signer.signPayload({json.dumps(payload(address))}).then(show, fail); }}
function unchecked() {{ injected.signer.signPayload({json.dumps(dict(payload(address), specVersion="0x000f4dfd"))}).then(show, fail); }}
function provide() {{ injected.metadata.provide({json.dumps(metadata_def())}).then(show, fail); }}
</script>
<button id=connect onclick="connect()">connect</button>
<button id=raw onclick="raw()">raw</button>
<button id=tx onclick="tx()">tx</button>
<button id=unchecked onclick="unchecked()">unchecked</button>
<button id=provide onclick="provide()">provide</button>
<button id=hidden onclick="signAsHidden()">hidden</button>
<button id=forge onclick="forge()">forge</button>
<pre id=out></pre>""")
    with open(os.path.join(site, "index.html")) as f:
        page = f.read().replace('"KEPT"', json.dumps(kept_back))
    with open(os.path.join(site, "index.html"), "w") as f:
        f.write(page)
    httpd, main, out = open_dapp(driver, site)
    try:
        assert f"127.0.0.1:{httpd.server_port}" in driver.find_element(By.ID, "title").text
        # The person chooses which accounts the site sees: both ticked at first; unticking both
        # leaves nothing to connect; the second stays unticked.
        boxes = driver.find_elements(By.CSS_SELECTOR, "#account-choice input[type=checkbox]")
        assert [b.get_attribute("value") for b in boxes] == [address, kept_back] and all(b.is_selected() for b in boxes)
        for b in boxes:
            b.click()
        assert not driver.find_element(By.ID, "allow").is_enabled() and driver.find_element(By.ID, "none-ticked").is_displayed()
        boxes[0].click()
        assert driver.find_element(By.ID, "allow").is_enabled()
        driver.save_screenshot(shots(server) + "/polkadot-connect.png")
        driver.find_element(By.ID, "allow").click()
        wait_for(driver, lambda d: len(d.window_handles) == 1)
        driver.switch_to.window(main)
        wait_for(driver, lambda d: out(d).startswith("["))
        accounts = json.loads(out(driver))
        assert [a["address"] for a in accounts] == [address] and accounts[0]["type"] == "sr25519"
        # The account it was not shown cannot be asked to sign either.
        driver.find_element(By.ID, "hidden").click()
        popup(driver, main)
        wait_for(driver, lambda d: d.find_element(By.ID, "refused-card").is_displayed())
        driver.find_element(By.ID, "refused-close").click()
        wait_for(driver, lambda d: len(d.window_handles) == 1)
        driver.switch_to.window(main)
        wait_for(driver, lambda d: out(d).startswith("error"))
        assert "not one of the Keyfob Polkadot accounts you shared" in out(driver), out(driver)

        def sign_in_keyfob(button, uses, check, screenshot):
            """Clicks `button`, approves in Keyfob's window after `check`, and returns what the page got."""
            driver.find_element(By.ID, button).click()
            popup(driver, main, passkeys, uses=uses)
            wait_for(driver, lambda d: "polkadot-approve.html" in d.current_url and d.find_element(By.ID, "request-card").is_displayed())
            assert driver.find_element(By.ID, "client-note").text == "verified by your browser"
            check()
            driver.save_screenshot(shots(server) + screenshot)
            driver.find_element(By.ID, "approve").click()
            wait_for(driver, lambda d: len(d.window_handles) == 1)
            driver.switch_to.window(main)
            wait_for(driver, lambda d: out(d).startswith("{"))
            return json.loads(out(driver))

        result = sign_in_keyfob(
            "raw", 0, lambda: driver.find_element(By.ID, "fields").text.index("hello polkadot"), "/polkadot-approve-bytes.png")
        signature = bytes.fromhex(result["signature"][2:])
        assert len(signature) == 64
        assert sr25519.verify(signature, b"<Bytes>hello polkadot</Bytes>", public_key)

        # The dapp offers the runtime's V15 metadata: Keyfob checks the transaction against it
        # (RFC-0078), so the page states the call as fact, its recipient start…end (a tap shows it
        # whole, and it is whole under "To"), at 320 and 390 px without sideways scrolling.
        driver.find_element(By.ID, "provide").click()
        wait_for(driver, lambda d: out(d) == "true")
        bob = "14E5nqKAp3oAJcmzgZhUD2RcptBeUBScxKHgJKU4HPNcKVf3"
        shown_hash = {}

        def extrinsic_shown():
            what = driver.find_element(By.ID, "what").text
            assert what.startswith("Send 1 DOT to 14E5nq…NcKVf3, keeping your account open") and "On Polkadot" in what, what
            assert driver.find_element(By.ID, "recipient").text == bob
            assert "Balances.transfer_keep_alive(dest: Id(" in driver.find_element(By.ID, "fields").text
            assert driver.find_element(By.ID, "call-note").text.startswith("Checked:")
            assert not driver.find_element(By.ID, "unchecked").is_displayed()
            for width in (320, 390):
                driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                       {"width": width, "height": 844, "deviceScaleFactor": 1, "mobile": True})
                assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth"), width
                driver.save_screenshot(shots(server) + f"/polkadot-approve-extrinsic-{width}.png")
                # The Sign button is in view at the foot of a phone's screen (a sticky bar).
                assert driver.execute_script(
                    "const r = document.getElementById('approve').getBoundingClientRect(); return r.bottom <= innerHeight && r.top >= 0"), width
            # In the dark theme the recipient reads in the accent colour, not dark on dark; axe finds nothing serious.
            driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
            color = driver.execute_script("return getComputedStyle(document.querySelector('#what button.address')).color")
            assert color != "rgb(17, 17, 19)", color
            assert serious_findings(driver) == []
            driver.save_screenshot(shots(server) + "/polkadot-approve-extrinsic-dark-390.png")
            driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
            driver.find_element(By.CSS_SELECTOR, "#what button.address").click()
            assert bob in driver.find_element(By.ID, "what").text
            assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
            driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
            details = driver.find_element(By.ID, "details").get_attribute("textContent")
            shown_hash["hash"] = bytes.fromhex(details.split("Metadata hash signed")[1][2:66])
        result = sign_in_keyfob("tx", 1, extrinsic_shown, "/polkadot-approve-extrinsic.png")
        signature = bytes.fromhex(result["signature"][2:])
        assert signature[0] == 1 and len(signature) == 65  # MultiSignature::Sr25519
        assert sr25519.verify(signature[1:], signing_payload(shown_hash["hash"]), public_key)
        extrinsic = decoded_transaction(result["signedTransaction"])
        assert extrinsic["mode"] == 1 and extrinsic["call"]["call_function"] == "transfer_keep_alive"
        assert sr25519.verify(bytes.fromhex(extrinsic["signature"]["Sr25519"][2:]), signing_payload(shown_hash["hash"]), public_key)
        logs = server.logs()
        assert "polkadot.sign_payload" in logs and "transport=polkadot-web" in logs

        # A transaction of another spec version than the metadata's cannot be checked: refused by
        # default. Keyfob's window says so in plain words (nothing signed, why, the setting, Close);
        # the page gets the developer's reason.
        driver.find_element(By.ID, "unchecked").click()
        popup(driver, main)
        wait_for(driver, lambda d: d.find_element(By.ID, "refused-card").is_displayed())
        assert driver.find_element(By.ID, "title").text == "Nothing was signed"
        assert "could not check this transaction" in driver.find_element(By.ID, "refused-why").text
        assert driver.find_element(By.ID, "refused-setting").get_attribute("href").endswith("/account.html#polkadot")
        assert "rawMetadata" not in driver.find_element(By.TAG_NAME, "main").text
        driver.save_screenshot(shots(server) + "/polkadot-refused-unchecked.png")
        driver.find_element(By.ID, "refused-close").click()
        wait_for(driver, lambda d: len(d.window_handles) == 1)
        driver.switch_to.window(main)
        wait_for(driver, lambda d: out(d).startswith("error"))
        assert out(driver).startswith("error unverified_transaction")

        # Its owner allows unchecked transactions for this account, with the passkey, on the account page ...
        driver.switch_to.new_window("tab")
        driver.get(f"{server.url}/account.html")
        carry_passkeys(driver, passkeys, ahead=40)
        driver.get(f"{server.url}/account.html")
        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#polkadot-list label.unchecked-setting input"))
        # What blind signing means is said before the box is ticked; on, it is a warning, not a success.
        assert "Keyfob cannot check" in driver.find_element(By.CSS_SELECTOR, "#polkadot-list p.unchecked-explain").text
        driver.find_element(By.CSS_SELECTOR, "#polkadot-list label.unchecked-setting input").click()
        wait_for(driver, lambda d: "Blind signing is on" in d.find_element(By.ID, "status").text)
        assert driver.find_element(By.ID, "status").get_attribute("data-status") == "warn"
        assert driver.find_element(By.CSS_SELECTOR, "#polkadot-list label.unchecked-setting").get_attribute("data-on") == "true"
        assert driver.find_element(By.CSS_SELECTOR, "#polkadot-list label.unchecked-setting input").is_selected()
        driver.execute_script("document.querySelector('#polkadot-list label.unchecked-setting').scrollIntoView({block: 'center'})")
        driver.save_screenshot(shots(server) + "/account-polkadot-blind-signing-on.png")
        driver.close()
        driver.switch_to.window(main)

        # ... and then the page warns above the Sign button: no sentence, the call as hex, the
        # site's words as its own.
        def unchecked_shown():
            warning = driver.find_element(By.ID, "unchecked")
            assert warning.is_displayed() and "Keyfob cannot check what this transaction does" in warning.text
            assert "amount, recipient and chain are unchecked" in warning.text
            # Read before the Sign button: earlier in the page, while the button stays in its sticky bar.
            assert driver.execute_script(
                "return document.getElementById('unchecked').compareDocumentPosition(document.getElementById('approve'))"
                " & Node.DOCUMENT_POSITION_FOLLOWING")
            assert driver.find_element(By.ID, "what").text.startswith("A transaction Keyfob could not check")
            assert "0x" + METHOD in driver.find_element(By.ID, "fields").text
            assert not driver.find_elements(By.ID, "recipient")
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
            assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
            driver.save_screenshot(shots(server) + "/polkadot-approve-unchecked-390.png")
            driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        result = sign_in_keyfob("unchecked", 5, unchecked_shown, "/polkadot-approve-unchecked.png")
        signature = bytes.fromhex(result["signature"][2:])
        assert "signedTransaction" not in result
        assert sr25519.verify(signature[1:], signing_payload(spec_version=0x000f4dfd), public_key)

        # A page on another origin cannot use the first one's authorization: Keyfob asks anew, naming
        # the new origin; declined, that page gets no accounts and cannot sign.
        other = serve(site)
        try:
            driver.get(f"http://127.0.0.1:{other.server_port}/index.html")
            main = driver.current_window_handle
            # Posting the connect message itself, as a String object, gets a refusal, not a connection.
            driver.find_element(By.ID, "forge").click()
            wait_for(driver, lambda d: out(d).startswith("reply"))
            assert "unsupported_type" in out(driver), out(driver)
            wait_for(driver, lambda d: len(d.window_handles) == 1)
            driver.switch_to.window(main)
            driver.find_element(By.ID, "connect").click()
            popup(driver, main)
            wait_for(driver, lambda d: d.find_element(By.ID, "authorize-card").is_displayed())
            assert f"127.0.0.1:{other.server_port}" in driver.find_element(By.ID, "title").text
            driver.find_element(By.ID, "deny").click()
            wait_for(driver, lambda d: len(d.window_handles) == 1)
            driver.switch_to.window(main)
            wait_for(driver, lambda d: out(d).startswith("error"))
            assert address not in out(driver)
        finally:
            other.shutdown()
    finally:
        httpd.shutdown()



def test_the_nova_bridge_messages_from_a_native_app(server):
    """A native app (bearer token, software passkey) sends the seed's exact messages."""
    from softkey import Client, SoftKey
    c = Client(server.url, server.url)
    key = SoftKey(server.url)
    status, reply = c.register(key, "nova")
    assert status == 200, reply
    token = reply["token"]
    status, created = c.call("POST", "/api/polkadot/accounts", {"name": "Main", "network": 0}, token=token)
    assert status == 201, created
    address = created["address"]
    public_key = bytes.fromhex(ss58_decode(address))
    seed = lambda msg_type, request: {  # noqa: E731
        "id": "1639543839750.1", "msgType": msg_type, "origin": "dapp-request", "request": request, "url": "https://singular.rmrk.app/"}
    call = lambda body: c.call("POST", "/api/polkadot/message", body, token=token)  # noqa: E731

    assert call(seed("pub(accounts.list)", None))[1]["error"] == "permission_denied"
    assert call(seed("pub(authorize.tab)", None)) == (200, {"type": "pub(authorize.tab)", "result": True})
    assert call(seed("pub(accounts.list)", None))[1]["result"] == [{"address": address, "name": "Main", "type": "sr25519"}]
    assert call(seed("pub(metadata.list)", None))[1]["result"] == []
    provided = {"chain": "Polkadot", "genesisHash": "0x" + POLKADOT_GENESIS, "specVersion": 1003000, "ss58Format": 0,
                "tokenDecimals": 10, "tokenSymbol": "DOT", "icon": "", "types": {}}
    assert call(seed("pub(metadata.provide)", provided))[1]["result"] is True
    assert call(seed("pub(metadata.list)", None))[1]["result"] == [{"genesisHash": "0x" + POLKADOT_GENESIS, "specVersion": 1003000}]

    # accounts.subscribe: true, then the list streams (server-sent events), again when an account is added.
    assert call(seed("pub(accounts.subscribe)", None))[1]["result"] is True
    stream = c.connect()
    stream.request("GET", "/api/polkadot/subscribe?id=1639543839750.1&url=https%3A%2F%2Fsingular.rmrk.app%2F",
                   headers={"Authorization": f"Bearer {token}"})
    events = stream.getresponse()
    assert events.status == 200 and events.getheader("Content-Type") == "text/event-stream"
    def next_update():
        while True:
            line = events.fp.readline().decode()
            if line.startswith("data: "):
                return json.loads(line[6:])
    assert [a["address"] for a in next_update()["result"]] == [address]
    assert c.call("POST", "/api/polkadot/accounts", {"type": "ed25519"}, token=token)[0] == 201
    update = next_update()
    assert update["id"] == "1639543839750.1" and len(update["result"]) == 2
    stream.close()

    # Refused, nothing signed: an unknown signed extension, malformed hex, an address that is not hers,
    # a Polkadot payload without its chain's whole extension list, a field of the wrong type.
    status, unknown = call(seed("pub(extrinsic.sign)", {**payload(address), "signedExtensions": ["CheckNonce", "CheckNewThing"]}))
    assert status == 400 and unknown["error"] == "unsupported_type" and "CheckNewThing" in unknown["message"]
    assert unknown["type"] == "pub(extrinsic.sign)"
    assert call(seed("pub(extrinsic.sign)", {**payload(address), "method": "0xzz"}))[1]["error"] == "invalid_content"
    assert call(seed("pub(extrinsic.sign)", payload("5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY")))[1]["error"] == "invalid_pubkey"
    for missing in ("CheckNonce", "ChargeTransactionPayment"):
        shifted = [e for e in payload(address)["signedExtensions"] if e != missing]
        status, refused = call(seed("pub(extrinsic.sign)", {**payload(address), "signedExtensions": shifted}))
        assert status == 400 and "not Polkadot's list" in refused["message"], refused
    for field, value in (("mode", "1"), ("nonce", 5), ("version", "4"), ("signedExtensions", "CheckNonce")):
        status, refused = call(seed("pub(extrinsic.sign)", {**payload(address), field: value}))
        assert status == 400 and refused["error"] == "invalid_request" and field in refused["message"], (field, refused)

    # No metadata Keyfob can check the payload against: refused, not signed blind.
    status, blind = call(seed("pub(extrinsic.sign)", payload(address)))
    assert status == 403 and blind["error"] == "unverified_transaction" and "rawMetadata" in blind["message"], blind

    # With the runtime's V15 metadata, Keyfob checks it (RFC-0078), sets mode 1 and its hash, and
    # hands back the signed transaction.
    assert call(seed("pub(metadata.provide)", metadata_def()))[1]["result"] is True
    status, asked = call(seed("pub(extrinsic.sign)", payload(address)))
    assert status == 202, asked
    pending = asked["pending"]
    assert pending["approvalUrl"].endswith(f"/polkadot-approve.html?id={pending['id']}")
    status, details = c.call("GET", f"/api/polkadot/requests/{pending['id']}/details", token=token)
    shown = details["extrinsic"]
    assert shown["tip"] == "0 DOT" and details["verifiedOrigin"] is False and shown["verified"] is True
    assert shown["summary"].startswith("Send 1 DOT to 14E5nqKAp3oAJcmzgZhUD2RcptBeUBScxKHgJKU4HPNcKVf3")
    metadata_hash = bytes.fromhex(shown["metadataHash"][2:])
    status, options = c.call("POST", f"/api/polkadot/requests/{pending['id']}/challenge", {}, token=token)
    assert status == 200, options
    assertion = key.assertion(dict(options, challengeKey=""))["cred"]
    status, outcome = c.call("POST", f"/api/polkadot/requests/{pending['id']}/approve", {"assertion": assertion}, token=token)
    assert status == 200, outcome
    status, state = c.call("GET", pending["resultUrl"].split(server.url, 1)[1], token=token)
    assert state["state"] == "approved" and state["outcome"] == outcome
    signature = bytes.fromhex(outcome["result"]["signature"][2:])
    assert signature[0] == 1 and sr25519.verify(signature[1:], signing_payload(metadata_hash), public_key)
    assert not sr25519.verify(signature[1:], signing_payload(), public_key)
    # substrate-interface's codec reads the transaction: Alice's transfer, mode 1, her signature,
    # which verifies over the payload with Keyfob's hash.
    extrinsic = decoded_transaction(outcome["result"]["signedTransaction"])
    assert extrinsic["version"] == 0x84 and extrinsic["address"] in ({"Id": "0x" + public_key.hex()}, "0x" + public_key.hex())
    assert extrinsic["nonce"] == 5 and extrinsic["tip"] == 0 and extrinsic["mode"] == 1
    assert extrinsic["call"]["call_module"] == "Balances" and extrinsic["call"]["call_function"] == "transfer_keep_alive"
    assert extrinsic["call"]["call_args"][1]["value"] == 10**10
    decoded_signature = bytes.fromhex(extrinsic["signature"]["Sr25519"][2:])
    assert sr25519.verify(decoded_signature, signing_payload(metadata_hash), public_key)

    # The JSON export opens in substrate-interface (polkadot-js's file format, independent code).
    from substrateinterface import Keypair
    confirmation = c.confirmation(key, "polkadot.export", token, target=created["id"])
    status, backup = c.call("POST", f"/api/polkadot/accounts/{created['id']}/export",
                            {"password": "correct horse battery", "confirmation": confirmation}, token=token)
    assert status == 200, backup
    restored = Keypair.create_from_encrypted_json(json.dumps(backup), "correct horse battery")
    assert restored.public_key == public_key and restored.verify(b"hi", restored.sign(b"hi"))

    # The same phrase and path give the same address in substrate-interface (hard and soft junctions,
    # for sr25519; ed25519 from the phrase itself, as substrate-interface derives no ed25519 path; three
    # prefixes). Its ecdsa phrases follow Ethereum's BIP-44, not Substrate's: ecdsa and ed25519 hard
    # derivation are pinned by Substrate's own //Alice keys in PolkadotTests instead.
    from substrateinterface import KeypairType
    phrase = "bottom drive obey lake curtain smoke basket hold race lonely fit walk"
    for key_type, path, network in (("sr25519", "//polkadot//0", 0), ("sr25519", "//hard/soft", 2),
                                    ("ed25519", "", 0), ("sr25519", "//Alice", 42)):
        confirmation = c.confirmation(key, "polkadot.import", token)
        status, imported = c.call("POST", "/api/polkadot/accounts", {"mnemonic": phrase, "path": path, "type": key_type,
                                                                     "network": network, "confirmation": confirmation}, token=token)
        assert status == 201, imported
        crypto = {"sr25519": KeypairType.SR25519, "ed25519": KeypairType.ED25519}[key_type]
        expected = Keypair.create_from_uri(phrase + path, ss58_format=network, crypto_type=crypto).ss58_address
        assert imported["address"] == expected, (key_type, path)


def test_account_streams_end_when_the_permission_is_revoked_or_the_session_signs_out(server):
    """An open `pub(accounts.subscribe)` stream kept sending new addresses after the dapp's
    permission was revoked or the session signed out (#42): now it ends at once in both cases."""
    import http.client
    from softkey import Client, SoftKey
    c = Client(server.url, server.url)
    status, reply = c.register(SoftKey(server.url), "stream")
    assert status == 200, reply
    token = reply["token"]
    status, main = c.call("POST", "/api/polkadot/accounts", {"name": "Main"}, token=token)
    assert status == 201
    assert c.call("POST", "/api/polkadot/accounts", {"name": "Savings"}, token=token)[0] == 201
    # Connected with one account chosen (#54): the stream, like accounts.list, names only that one.
    seed = {"id": "7", "msgType": "pub(authorize.tab)", "origin": "dapp-request",
            "request": {"origin": "a dapp", "accounts": [main["address"]]}, "url": "https://dapp.example/"}

    def open_stream():
        assert c.call("POST", "/api/polkadot/message", seed, token=token)[0] == 200
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request("GET", "/api/polkadot/subscribe?id=7&url=https%3A%2F%2Fdapp.example%2F",
                           headers={"Authorization": f"Bearer {token}"})
        events = connection.getresponse()
        first = events.readline()
        assert events.status == 200 and first.startswith(b"data: ")
        assert [a["name"] for a in json.loads(first[6:])["result"]] == ["Main"], first
        return connection, events

    connection, events = open_stream()
    grant = [g for g in c.call("GET", "/api/signer/grants", token=token)[1]["grants"]
             if g["client"] == "https://dapp.example" and g["method"] == "polkadot.authorize"][0]
    assert c.call("DELETE", f"/api/signer/grants/{grant['id']}", token=token)[0] == 200
    events.read()  # returns at the stream's end (a socket timeout fails the test)
    connection.close()

    connection, events = open_stream()
    assert c.call("POST", "/logout", token=token)[0] == 200
    events.read()
    connection.close()


def test_the_readme_example_runs_as_printed(server, driver):
    """README's Polkadot example, copied from README.md with only the server's address changed:
    connect from a click, sign raw bytes from another, and the signature verifies (schnorrkel)."""
    sign_up(driver, server, "rita")
    address = create_account(driver)
    public_key = bytes.fromhex(ss58_decode(address))
    passkeys = driver.get_credentials()
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")) as f:
        readme = f.read()
    start = readme.index('```html\n<button id="connect">') + len("```html\n")
    example = readme[start:readme.index("```", start)].replace("http://localhost:8080", server.url)
    site = tempfile.mkdtemp(prefix="keyfob-readme-")
    with open(os.path.join(site, "index.html"), "w") as f:
        f.write("<!doctype html><title>README example</title>\n" + example)
    httpd, main, out = open_dapp(driver, site)
    try:
        driver.find_element(By.ID, "allow").click()
        wait_for(driver, lambda d: len(d.window_handles) == 1)
        driver.switch_to.window(main)
        wait_for(driver, lambda d: out(d) == f"connected: {address}")
        driver.find_element(By.ID, "sign").click()
        popup(driver, main, passkeys)
        wait_for(driver, lambda d: "polkadot-approve.html" in d.current_url and d.find_element(By.ID, "request-card").is_displayed())
        assert "hello" in driver.find_element(By.ID, "fields").text
        driver.find_element(By.ID, "approve").click()
        wait_for(driver, lambda d: len(d.window_handles) == 1)
        driver.switch_to.window(main)
        wait_for(driver, lambda d: out(d).startswith("signature: 0x"))
        signature = bytes.fromhex(out(driver).split("0x", 1)[1])
        assert sr25519.verify(signature, b"<Bytes>hello</Bytes>", public_key)
    finally:
        httpd.shutdown()
