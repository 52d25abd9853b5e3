"""The operator's dashboard, live: an admin watches while another browser signs up and signs."""
import os
import sys

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.dirname(__file__))
from conftest import Server  # noqa: E402
from softkey import Client, SoftKey  # noqa: E402
from test_accounts import sign_up  # noqa: E402
from test_browser import add_authenticator, driver, wait_for  # noqa: E402,F401


def new_driver():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=430,932"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)


def test_an_admin_sees_signups_and_signatures_live(driver):
    first = Server().start()
    try:
        sign_up(driver, first, "root")          # the account exists before anyone names it admin
    finally:
        first.stop()
    server = Server(args=("--admin", "root"))
    server.data = first.data
    server.args = [a if a != server.args[server.args.index("--data-dir") + 1] else first.data for a in server.args]
    server.start()
    other = new_driver()
    try:
        driver.get(server.url + "/?signedout")
        driver.find_element(By.ID, "signin").click()
        wait_for(driver, lambda d: "/account.html" in d.current_url)
        driver.get(server.url + "/dashboard")
        wait_for(driver, lambda d: "root" in d.find_element(By.ID, "users").text)
        assert "database ok" in driver.find_element(By.ID, "health").text

        sign_up(other, server, "bea")            # a second browser
        other.find_element(By.ID, "sign-note").click()
        wait_for(other, lambda d: d.find_element(By.ID, "signed").text.strip().startswith("{"))

        wait_for(driver, lambda d: "registration.verified · bea" in d.find_element(By.ID, "stream").text, timeout=20)
        wait_for(driver, lambda d: "signer.approved · bea · api · sign_event · kind 1" in d.find_element(By.ID, "stream").text)
        wait_for(driver, lambda d: "bea" in d.find_element(By.ID, "users").text)
        for width, height in ((1280, 900), (390, 844)):
            driver.set_window_size(width, height)
            driver.save_screenshot(f"{server.data}/dashboard-{width}.png")

        # Somebody who is not an operator is told what the page is and that they are not one
        # (#27: it used to send them to their account without a word), never the dashboard.
        other.get(server.url + "/dashboard")
        wait_for(other, lambda d: d.find_elements(By.ID, "operator-gate"))
        assert "not an operator" in other.find_element(By.ID, "operator-gate").text
        assert other.find_element(By.CSS_SELECTOR, "header.top .brand").text == "Keyfob"  # Keyfob's page (#56)
        assert not other.find_elements(By.ID, "stream")
        status = other.execute_async_script("fetch('/api/admin/users').then(r => arguments[0](r.status))")
        assert status == 403

        # More users than a page (50): "More" lists the next ones.
        people = Client(f"http://127.0.0.1:{server.port}", server.url)
        for n in range(50):
            assert people.register(SoftKey(server.url), f"person{n:02d}")[0] == 200
        driver.get(server.url + "/dashboard")
        wait_for(driver, lambda d: d.find_element(By.ID, "more-users").is_displayed())
        shown = len(driver.find_elements(By.CSS_SELECTOR, "#users li.user"))
        driver.find_element(By.ID, "more-users").click()
        wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#users li.user")) > shown)
        assert not driver.find_element(By.ID, "more-users").is_displayed()
        # The kill switch: asked in the page, then every unlocked signer is locked (bea's is).
        driver.find_element(By.ID, "lock-all").click()
        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".ask-inline button.danger"))
        driver.find_element(By.CSS_SELECTOR, ".ask-inline button.danger").click()
        wait_for(driver, lambda d: d.find_element(By.ID, "status").text.startswith("Locked "))
        other.get(server.url + "/account.html")
        wait_for(other, lambda d: d.find_element(By.ID, "signer-state").get_attribute("data-locked") == "true")
        # Signing on a locked signer asks for the passkey first: the live stream shows that step-up
        # as such, not as a red failure (#56).
        other.find_element(By.ID, "sign-note").click()
        wait_for(other, lambda d: d.find_element(By.ID, "signed").text.strip().startswith("{"), timeout=20)
        wait_for(driver, lambda d: any(li.get_attribute("data-outcome") == "step-up"
                                       for li in d.find_elements(By.CSS_SELECTOR, "#stream li")), timeout=20)
    finally:
        other.quit()
        server.stop()


def test_an_admin_named_before_sign_up_confirms_once_with_the_admin_token(driver):
    """#27: `--admin NAME` given before NAME exists (the natural order on a fresh install) makes an
    operator once that account, signed in, types the admin token on the dashboard's own page."""
    import subprocess
    from conftest import BINARY
    server = Server(args=("--admin", "early")).start()
    try:
        sign_up(driver, server, "early")
        driver.get(server.url + "/dashboard")
        wait_for(driver, lambda d: d.find_elements(By.ID, "token"))
        assert not driver.find_elements(By.ID, "stream")
        made = subprocess.run([BINARY, "admin-token", "--rotate", "--data-dir", server.data],
                              capture_output=True, text=True, timeout=60)
        token = made.stdout.strip().splitlines()[-1]
        assert made.returncode == 0 and token.startswith("kfa_"), made.stderr
        driver.find_element(By.ID, "token").send_keys("kfa_not-the-token")
        driver.find_element(By.ID, "confirm").click()
        wait_for(driver, lambda d: "That is not this server" in d.find_element(By.ID, "token-error").text)
        driver.find_element(By.ID, "token").send_keys(token)
        driver.find_element(By.ID, "confirm").click()
        wait_for(driver, lambda d: d.find_elements(By.ID, "users") and "early" in d.find_element(By.ID, "users").text)
        driver.save_screenshot(f"{server.data}/dashboard-after-confirm.png")
    finally:
        server.stop()
