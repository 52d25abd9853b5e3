"""Real passkey ceremonies in headless Chromium with Chrome's virtual authenticator."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.virtual_authenticator import VirtualAuthenticatorOptions
from selenium.webdriver.support.ui import WebDriverWait


@pytest.fixture
def driver():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=430,932"):
        options.add_argument(flag)
    # An explicit driver path keeps Selenium Manager (and its network calls) out of it.
    d = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    yield d
    d.quit()


def add_authenticator(driver, transport="internal"):
    driver.add_virtual_authenticator(VirtualAuthenticatorOptions(
        protocol="ctap2", transport=transport, has_resident_key=True, has_user_verification=True,
        is_user_consenting=True, is_user_verified=True))
    open_account_sections(driver)


ACCOUNT_SECTIONS = ["security", "backup", "polkadot", "activity"]


def open_account_sections(driver):
    """The browser tests press buttons in every section of the account page: this browser starts
    as one whose person opened them all (the page remembers open sections in localStorage, per
    origin). test_accounts.test_account_page_leads_with_the_key checks the closed default."""
    driver.execute_script("try { localStorage.setItem('keyfob-open-sections', arguments[0]) } catch (e) {}",
                          json.dumps(ACCOUNT_SECTIONS))


def wait_for(driver, condition, timeout=15):
    # Pages re-render lists: an element found a moment ago may be replaced (stale) — look again.
    # During a navigation an element can belong to the page being left: look again too.
    def check(d):
        try:
            return condition(d)
        except WebDriverException as error:
            if "does not belong to the document" in str(error):
                return False
            raise
    return WebDriverWait(driver, timeout, poll_frequency=0.05,
                         ignored_exceptions=(StaleElementReferenceException,)).until(check)


def passkey_count(driver):
    items = driver.find_elements(By.CSS_SELECTOR, "#passkeys li.passkey")
    return len(items)


def test_sign_up_sign_out_and_sign_in_without_a_username(server, driver):
    driver.get(server.url + "/?signedout")          # no autofill on this first visit
    add_authenticator(driver)

    # Sign up with a username.
    driver.find_element(By.ID, "username").send_keys("alice")
    driver.find_element(By.ID, "signup").click()
    wait_for(driver, lambda d: "/account.html" in d.current_url and passkey_count(d) == 1)
    assert driver.find_element(By.ID, "username").text == "alice"
    meta = driver.find_element(By.CSS_SELECTOR, "#passkeys li.passkey .meta").text
    assert "created" in meta and "last used never" not in meta  # making it was its first use (#27)

    # Sign out.
    driver.find_element(By.ID, "signout").click()
    wait_for(driver, lambda d: "signedout" in d.current_url)
    session = driver.execute_async_script(
        "fetch('/session').then(r => arguments[0](r.status))")
    assert session == 401

    # Sign in without typing a username (discoverable credential).
    driver.find_element(By.ID, "signin").click()
    wait_for(driver, lambda d: "/account.html" in d.current_url and passkey_count(d) == 1)
    assert driver.find_element(By.ID, "username").text == "alice"
    meta = driver.find_element(By.CSS_SELECTOR, "#passkeys li.passkey .meta").text
    assert "last used never" not in meta          # the sign-in was recorded
    driver.save_screenshot(server.data + "/account.png")

    # The authenticator's counter and the server's agree.
    credential = driver.get_credentials()[0]
    assert credential.sign_count >= 1
    assert "registration.verified" in server.logs() and "authentication.verified" in server.logs()


def test_conditional_ui_signs_in_from_autofill(server, driver):
    driver.get(server.url + "/?signedout")
    add_authenticator(driver)
    driver.find_element(By.ID, "signup").click()      # anonymous account
    wait_for(driver, lambda d: "/account.html" in d.current_url and passkey_count(d) == 1)
    # Called what the passkey prompt calls it (#56), its id beside it.
    anonymous = driver.find_element(By.ID, "anonymous").text
    assert anonymous.startswith("(anonymous: anon-"), anonymous
    prefix = anonymous[len("(anonymous: anon-"):][:4]
    assert driver.find_element(By.ID, "username").text == f"Keyfob account {prefix}"
    shown = [c.get("userDisplayName") for c in driver.execute_cdp_cmd(
        "WebAuthn.getCredentials", {"authenticatorId": driver.virtual_authenticator_id})["credentials"]]
    assert shown == [f"Keyfob account {prefix}"] or shown == [None], shown
    driver.find_element(By.ID, "signout").click()
    wait_for(driver, lambda d: "signedout" in d.current_url)
    # A plain visit starts a conditional (autofill) request; Chrome's virtual
    # authenticator answers it at once, as a user picking the passkey would.
    driver.get(server.url + "/")
    wait_for(driver, lambda d: "/account.html" in d.current_url and passkey_count(d) == 1)


def test_adding_a_second_passkey_from_the_account_page(server, driver):
    driver.get(server.url + "/?signedout")
    add_authenticator(driver)
    driver.find_element(By.ID, "username").send_keys("bob")
    driver.find_element(By.ID, "signup").click()
    wait_for(driver, lambda d: "/account.html" in d.current_url and passkey_count(d) == 1)
    # A security key adds a passkey to the same account; the passkey on this device confirms
    # adding it first (a session alone cannot add a passkey).
    add_authenticator(driver, transport="usb")
    driver.find_element(By.ID, "add-name").send_keys("yubikey on my keys")   # named as it is made (#27)
    driver.find_element(By.ID, "add").click()
    wait_for(driver, lambda d: passkey_count(d) == 2)
    status = driver.find_element(By.ID, "status")
    assert status.get_attribute("data-status") == "ok"
    names = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#passkeys .passkey-name")]
    assert "yubikey on my keys" in names, names


def test_an_anonymous_account_adds_a_second_passkey(server, driver):
    """#27: the users who most need a backup passkey: the page sends no reserved anon- name back."""
    driver.get(server.url + "/?signedout")
    add_authenticator(driver)
    driver.find_element(By.ID, "signup").click()      # no username: anonymous
    wait_for(driver, lambda d: "/account.html" in d.current_url and passkey_count(d) == 1)
    assert driver.find_element(By.ID, "username").text.startswith("Keyfob account ")
    add_authenticator(driver, transport="usb")
    driver.find_element(By.ID, "add").click()
    wait_for(driver, lambda d: passkey_count(d) == 2)
    assert driver.find_element(By.ID, "status").get_attribute("data-status") == "ok"
    assert "Security key" in driver.find_elements(By.CSS_SELECTOR, "#passkeys li.passkey")[1].text


def test_sign_up_see_the_npub_and_sign_a_test_note(server, driver):
    from nostr_check import bech32_decode, verify_event
    driver.get(server.url + "/?signedout")
    add_authenticator(driver)
    driver.find_element(By.ID, "username").send_keys("carol")
    driver.find_element(By.ID, "signup").click()
    wait_for(driver, lambda d: "/account.html" in d.current_url and d.find_element(By.ID, "npub").text.startswith("npub1"))
    hrp, pubkey = bech32_decode(driver.find_element(By.ID, "npub").text)
    assert hrp == "npub" and len(pubkey) == 32
    wait_for(driver, lambda d: d.find_element(By.ID, "signer-state").get_attribute("data-locked") == "false")

    note = driver.find_element(By.ID, "note")
    note.clear()
    note.send_keys("a test note from the browser \u2713 </script>")
    driver.find_element(By.ID, "sign-note").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "signed").text.strip().startswith("{"))
    event = json.loads(driver.find_element(By.ID, "signed").text)
    assert event["pubkey"] == pubkey.hex() and event["kind"] == 1
    assert event["content"] == "a test note from the browser \u2713 </script>"
    assert verify_event(event), event
    # The history says it in words (#27): who did what, not "sign event (kind 1) · api · approved".
    wait_for(driver, lambda d: "You signed a note" in d.find_element(By.ID, "history").text)
    driver.save_screenshot(server.data + "/account-signed.png")

    # No secret of this run in the server's log: the session token and the note's text.
    token = driver.get_cookie("keyfob_session")["value"]
    logs = server.logs()
    assert "signer.approved" in logs
    assert token not in logs and "a test note from the browser" not in logs
