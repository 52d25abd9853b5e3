"""Operator commands against the database of a running server."""
import json
import os
import subprocess
import urllib.request

import sys

sys.path.insert(0, os.path.dirname(__file__))
from conftest import BINARY  # noqa: E402
from test_browser import driver  # noqa: E402,F401


def run(*args, server):
    return subprocess.run([BINARY, *args, "--data-dir", server.data], capture_output=True, text=True, timeout=60)


def post(server, path, body, token=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"http://127.0.0.1:{server.port}{path}", data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as r:
        return json.load(r)


def test_users_and_sessions_commands_beside_a_running_server(server):
    # An account to work on: registration options are enough to see nothing is listed yet.
    listed = run("users", "list", server=server)
    assert listed.returncode == 0 and listed.stdout.startswith("username\tanonymous")
    missing = run("users", "show", "nobody", server=server)
    assert missing.returncode != 0 and "no account named nobody" in missing.stderr
    refused = run("sessions", "revoke", "--user", "nobody", server=server)
    assert refused.returncode != 0
    help_text = subprocess.run([BINARY, "--help"], capture_output=True, text=True).stdout
    for command in ("serve", "users", "sessions", "rotate-master-key"):
        assert command in help_text


def test_revoke_and_remove_take_effect_on_the_running_server(server, driver):
    from test_accounts import sign_up
    sign_up(driver, server, "victor")
    shown = run("users", "show", "victor", server=server)
    assert shown.returncode == 0 and "nostr pubkey:" in shown.stdout and "passkey " in shown.stdout
    assert "victor\tno\t" in run("users", "list", "--query", "vic", server=server).stdout
    status = lambda: driver.execute_async_script("fetch('/session').then(r => arguments[0](r.status))")  # noqa: E731
    assert status() == 200
    assert run("sessions", "revoke", "--user", "victor", server=server).returncode == 0
    assert status() == 401
    assert run("users", "remove", "victor", server=server).returncode != 0      # needs --yes
    assert run("users", "remove", "victor", "--yes", server=server).returncode == 0
    assert "victor" not in run("users", "list", server=server).stdout


def test_admins_add_and_remove_open_and_close_the_dashboard_of_the_running_server(server, driver):
    from test_accounts import sign_up
    sign_up(driver, server, "olivia")
    api = lambda: driver.execute_async_script("fetch('/api/admin/stats').then(r => arguments[0](r.status))")  # noqa: E731
    assert api() == 403
    missing = run("admins", "add", "nobody", server=server)
    assert missing.returncode != 0 and "no account named nobody" in missing.stderr
    added = run("admins", "add", "olivia", server=server)
    assert added.returncode == 0 and "olivia is an operator" in added.stdout
    assert api() == 200
    assert "olivia\tyes\t" in run("admins", "list", server=server).stdout
    assert run("admins", "remove", "olivia", server=server).returncode == 0
    assert api() == 403
    assert "olivia\tno (removed)\t" in run("admins", "list", server=server).stdout
    # /dashboard says what it is to someone who is not an operator, and keeps them on the page.
    driver.get(f"{server.url}/dashboard")
    assert "not an operator" in driver.find_element("id", "operator-gate").text
