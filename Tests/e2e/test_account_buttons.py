"""#56: the account page's buttons no other browser test presses, each pressed and its result
checked: the welcome card, adding passkeys (the nudge, another device's phone or security key),
the bunker URL's copy and rotation, the encrypted backup's copy and download, older history, and
importing Polkadot accounts from a phrase and from a polkadot-js JSON file (addresses checked with
substrate-interface)."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

from selenium.webdriver.common.by import By  # noqa: E402
from substrateinterface import Keypair  # noqa: E402

from conftest import ROOT  # noqa: E402
from test_browser import driver, passkey_count, wait_for  # noqa: E402,F401  (the fixture)
from test_sealing import add_authenticator, make_the_backup_step, presence, save  # noqa: E402

# The Substrate development phrase (its root account, no derivation path).
PHRASE = "bottom drive obey lake curtain smoke basket hold race lonely fit walk"


def status(driver):
    """The status line as (kind, text), read even where it sits in a part of the page the action
    just hid (it answers beside the button pressed)."""
    element = driver.find_element(By.ID, "status")
    return element.get_attribute("data-status"), element.get_attribute("textContent").strip()


def settled(driver):
    """The status line once an action answered (ok or error), as (kind, text)."""
    try:
        wait_for(driver, lambda d: status(d)[0] in ("ok", "error") and status(d)[1], timeout=20)
    except Exception:
        raise AssertionError(f"no answer: {status(driver)}")
    return status(driver)


def press(driver, button_id):
    button = driver.find_element(By.ID, button_id)
    driver.execute_script("const d = arguments[0].closest('details'); if (d) d.open = true;"
                          " arguments[0].scrollIntoView({block: 'center'})", button)
    driver.execute_script("const s = document.getElementById('status'); s.textContent = ''; delete s.dataset.status")
    button.click()


def test_every_other_account_button(server, driver):
    driver.get(server.url + "/?signedout")
    add_authenticator(driver, prf=False)
    driver.find_element(By.ID, "username").send_keys("buttons")
    driver.find_element(By.ID, "signup").click()
    wait_for(driver, lambda d: "/account.html" in d.current_url and passkey_count(d) == 1)

    # The welcome card names the next step; "Got it" puts it away.
    wait_for(driver, lambda d: d.find_element(By.ID, "welcome-card").is_displayed())
    driver.find_element(By.ID, "welcome-done").click()
    assert not driver.find_element(By.ID, "welcome-card").is_displayed()

    # One passkey: the nudge offers another device's (a security key answers here).
    usb = add_authenticator(driver, prf=False, transport="usb")
    assert driver.find_element(By.ID, "nudge").is_displayed()
    press(driver, "nudge-add")
    assert settled(driver) == ("ok", "Passkey added."), status(driver)
    wait_for(driver, lambda d: passkey_count(d) == 2)
    assert not driver.find_element(By.ID, "nudge").is_displayed()

    # "Add a passkey" on a device that has one already: the page offers the other kinds.
    def elsewhere(button_id, transport):
        press(driver, "add")
        assert settled(driver)[0] == "error" and "already has a passkey" in status(driver)[1], status(driver)
        assert driver.find_element(By.ID, button_id).is_displayed()
        added = add_authenticator(driver, prf=False, transport=transport)
        count = passkey_count(driver)
        press(driver, button_id)
        assert settled(driver) == ("ok", "Passkey added."), status(driver)
        wait_for(driver, lambda d: passkey_count(d) == count + 1)
        return added

    # Each new device's passkey is made by that device alone: the others would refuse it as one
    # they have already (the first, a platform passkey, confirms each addition).
    presence(driver, usb, False)
    phone = elsewhere("add-phone", "ble")
    presence(driver, phone, False)  # it would refuse the next one as one it has already
    elsewhere("add-key", "nfc")
    save(driver, "account-four-passkeys.png")

    # The bunker URL: copied (or selected, where the clipboard is refused), then a new one.
    press(driver, "bunker-show")
    wait_for(driver, lambda d: d.find_element(By.ID, "bunker-url").get_attribute("value").startswith("bunker://"))
    old = driver.find_element(By.ID, "bunker-url").get_attribute("value")
    press(driver, "bunker-copy")
    wait_for(driver, lambda d: status(d)[1] in ("Bunker URL copied.", "Press Ctrl+C (or long-press) to copy the selected URL."))
    press(driver, "bunker-rotate")
    assert settled(driver) == ("ok", "A new bunker URL; the old one no longer works."), status(driver)
    new = driver.find_element(By.ID, "bunker-url").get_attribute("value")
    assert new.startswith("bunker://") and new != old

    # The encrypted backup: copied, then downloaded as a file.
    make_the_backup_step(driver)
    press(driver, "ncryptsec-copy")
    wait_for(driver, lambda d: status(d)[1] in ("Backup copied.", "Press Ctrl+C (or long-press) to copy the selected backup."))
    press(driver, "ncryptsec-download")
    assert settled(driver) == ("ok", "Saved as keyfob-buttons-ncryptsec.txt."), status(driver)

    # Older history: more than a page of entries, then "Show older".
    for n in range(21):
        driver.execute_async_script(
            "api('/api/signer/sign_event', {method: 'POST', body: {event: {kind: 1, content: 'note ' + arguments[0], tags: []}}})"
            ".then(() => arguments[1](), (e) => arguments[1](String(e)))", n)
    driver.refresh()
    wait_for(driver, lambda d: d.find_element(By.ID, "more").is_displayed())
    shown = len(driver.find_elements(By.CSS_SELECTOR, "#history li"))
    press(driver, "more")
    wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#history li")) > shown)

    # Polkadot accounts from a recovery phrase and from a polkadot-js JSON backup.
    network = int(driver.find_element(By.ID, "polkadot-network").get_attribute("value"))
    driver.execute_script("document.getElementById('polkadot-import-box').open = true;"
                          " document.getElementById('polkadot-phrase').scrollIntoView({block: 'center'})")
    driver.find_element(By.ID, "polkadot-phrase").send_keys(PHRASE)
    press(driver, "polkadot-import-phrase")
    assert settled(driver)[0] == "ok", status(driver)
    expected = Keypair.create_from_mnemonic(PHRASE, ss58_format=network).ss58_address
    wait_for(driver, lambda d: any(r.get_attribute("data-address") == expected
                                   for r in d.find_elements(By.CSS_SELECTOR, "#polkadot-list .polkadot-account")))
    with open(os.path.join(ROOT, "Tests", "Vectors", "polkadot", "polkadot_js_backup_sr25519.json")) as f:
        vector = json.load(f)
    path = os.path.join(tempfile.mkdtemp(prefix="keyfob-backup-"), "account.json")
    with open(path, "w") as f:
        json.dump(vector["file"], f)
    driver.find_element(By.ID, "polkadot-file").send_keys(path)
    driver.find_element(By.ID, "polkadot-file-password").send_keys(vector["password"])
    press(driver, "polkadot-import-file")
    assert settled(driver)[0] == "ok", status(driver)
    from_file = Keypair(public_key=bytes.fromhex(vector["publicKey"]), ss58_format=network).ss58_address
    wait_for(driver, lambda d: any(r.get_attribute("data-address") == from_file
                                   for r in d.find_elements(By.CSS_SELECTOR, "#polkadot-list .polkadot-account")))
    save(driver, "account-polkadot-imported.png")
