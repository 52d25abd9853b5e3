"""Keys sealed by passkeys (PRF) in headless Chromium: Chrome's virtual authenticators through the
DevTools protocol, one with PRF (hmac-secret) and one without."""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))

from selenium.webdriver.common.by import By

from test_browser import driver, wait_for, passkey_count  # noqa: F401  (the fixture)
from nostr_check import bech32_decode, verify_event

SCREENSHOTS = os.path.join(os.path.dirname(__file__), "..", "..", ".build", "screenshots")


def add_authenticator(driver, prf, transport="internal"):
    driver.execute_cdp_cmd("WebAuthn.enable", {"enableUI": False})
    return driver.execute_cdp_cmd("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "ctap2Version": "ctap2_1", "transport": transport, "hasResidentKey": True,
        "hasUserVerification": True, "isUserVerified": True, "automaticPresenceSimulation": True, "hasPrf": prf,
    }})["authenticatorId"]


def remove_authenticator(driver, authenticator_id):
    driver.execute_cdp_cmd("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": authenticator_id})


def status(driver):
    element = driver.find_element(By.ID, "status")
    return element.get_attribute("data-status"), element.text


def sign_note(driver, text):
    note = driver.find_element(By.ID, "note")
    note.clear()
    note.send_keys(text)
    driver.execute_script("document.getElementById('signed').textContent = ''")
    driver.find_element(By.ID, "sign-note").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "signed").text.strip().startswith("{") or status(d)[0] == "error")
    return json.loads(driver.find_element(By.ID, "signed").text)


def save(driver, name):
    os.makedirs(SCREENSHOTS, exist_ok=True)
    driver.save_screenshot(os.path.join(SCREENSHOTS, name))


def test_seal_with_a_prf_passkey_sign_in_and_sign_then_a_passkey_without_prf_is_told_why_not(server, driver):
    driver.get(server.url + "/?signedout")
    with_prf = add_authenticator(driver, prf=True)

    driver.find_element(By.ID, "username").send_keys("dora")
    driver.find_element(By.ID, "signup").click()
    wait_for(driver, lambda d: "/account.html" in d.current_url and passkey_count(d) == 1)
    wait_for(driver, lambda d: d.find_element(By.ID, "protection-summary").text == "Server-protected")
    hrp, pubkey = bech32_decode(driver.find_element(By.ID, "npub").text)

    # Sealing waits for the backup checkbox, then asks the passkey (PRF) once.
    assert not driver.find_element(By.ID, "seal").is_enabled()
    driver.execute_script("document.getElementById('protection-card').scrollIntoView()")
    save(driver, "seal-offer.png")
    driver.find_element(By.ID, "seal-backup-done").click()
    driver.find_element(By.ID, "seal").click()
    wait_for(driver, lambda d: d.find_element(By.ID, "protection-summary").text == "Sealed by 1 passkey")
    assert "Opens your sealed key" in driver.find_element(By.ID, "passkeys").text
    save(driver, "sealed-account.png")
    event = sign_note(driver, "sealed by my passkey")
    assert event["pubkey"] == pubkey.hex() and verify_event(event), event

    # Sign out and in again: the sign-in's PRF output opens the seal.
    driver.find_element(By.ID, "signout").click()
    wait_for(driver, lambda d: "signedout" in d.current_url)
    driver.find_element(By.ID, "signin").click()
    wait_for(driver, lambda d: "/account.html" in d.current_url and passkey_count(d) == 1)
    wait_for(driver, lambda d: d.find_element(By.ID, "signer-state").get_attribute("data-locked") == "false")
    event = sign_note(driver, "signed after signing in again")
    assert event["pubkey"] == pubkey.hex() and verify_event(event), event

    # Another device without PRF joins the account (the passkey on this one confirms adding it);
    # the page says it cannot open the seal.
    add_authenticator(driver, prf=False, transport="usb")
    driver.find_element(By.ID, "add").click()
    wait_for(driver, lambda d: passkey_count(d) == 2)
    wait_for(driver, lambda d: "cannot open your sealed key yet" in status(d)[1])
    remove_authenticator(driver, with_prf)
    assert "Cannot open your sealed key" in driver.find_element(By.ID, "passkeys").text

    # Signing in with it works, and the page explains the signer stays sealed.
    driver.find_element(By.ID, "signout").click()
    wait_for(driver, lambda d: "signedout" in d.current_url)
    driver.find_element(By.ID, "signin").click()
    wait_for(driver, lambda d: "/account.html" in d.current_url and passkey_count(d) == 2)
    wait_for(driver, lambda d: "cannot open it" in d.find_element(By.ID, "signer-text").text)
    assert driver.find_element(By.ID, "signer-state").get_attribute("data-locked") == "true"
    save(driver, "sealed-no-prf.png")
    driver.find_element(By.ID, "sign-note").click()
    wait_for(driver, lambda d: status(d)[0] == "error")
    assert "unlock" in status(driver)[1].lower()

    # Nothing secret in the server's log: no PRF output or nsec-like material is ever written.
    logs = server.logs()
    assert "prfOutput" not in logs and "nsec1" not in logs
    shutil.copy(os.path.join(SCREENSHOTS, "sealed-account.png"), server.data)
