"""The load harness's peers (Benchmarks/peers, BENCHMARKS.md) pass the positive ceremony flows
Keyfob's own tests use, over the same wire format and with the same software passkey: sign-up,
sign-in, a counter that moves and is stored, a single-use challenge. `make load` compares Keyfob
with them; these tests keep the comparison honest (a peer that skipped a step would be faster).
"""
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from conftest import ROOT, free_port, healthy
from softkey import Client, SoftKey

PEERS = os.path.join(ROOT, "Benchmarks", "peers")


def start_go(port, folder):
    binary = os.path.join(folder, "peer-go")
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": "/usr/share/gocode", "GOCACHE": os.path.join(folder, "go-cache")}
    subprocess.run(["go", "build", "-o", binary, "."], cwd=os.path.join(PEERS, "go"), env=env, check=True)
    return subprocess.Popen([binary, "-listen", f"127.0.0.1:{port}", "-origin", f"http://localhost:{port}",
                             "-db", os.path.join(folder, "peer.sqlite")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_python(port, folder):
    env = {**os.environ, "PEER_DB": os.path.join(folder, "peer.sqlite"), "PEER_ORIGIN": f"http://localhost:{port}"}
    return subprocess.Popen([sys.executable, "-m", "uvicorn", "--app-dir", os.path.join(PEERS, "python"), "peer:app",
                             "--host", "127.0.0.1", "--port", str(port), "--workers", "2", "--log-level", "warning"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture(params=["go", "python"])
def peer(request):
    if request.param == "go" and shutil.which("go") is None:
        pytest.fail("go is not installed: scripts/install-deps.sh --test installs it")
    folder = tempfile.mkdtemp(prefix=f"keyfob-peer-{request.param}-")
    port = free_port()
    process = (start_go if request.param == "go" else start_python)(port, folder)
    try:
        for _ in range(150):
            if healthy(port, timeout=0.5):
                break
            assert process.poll() is None, f"the {request.param} peer stopped at start-up"
            subprocess.run(["sleep", "0.1"])
        yield port, folder
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_peer_signs_up_signs_in_and_stores_the_counter(peer):
    port, folder = peer
    origin = f"http://localhost:{port}"
    client = Client(f"http://127.0.0.1:{port}", origin)
    key = SoftKey(origin)
    status, reply = client.register(key, "alice")
    assert status == 200 and reply["verified"] and reply["token"], reply
    for _ in range(3):
        status, reply = client.sign_in(key)
        assert status == 200 and reply["username"] == "alice" and reply["token"], reply
    # Durable: the counter and a session per sign-in are in its database.
    import sqlite3
    db = sqlite3.connect(os.path.join(folder, "peer.sqlite"))
    assert db.execute("SELECT sign_count FROM credentials").fetchone()[0] == 3
    assert db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 4


def test_a_peer_refuses_what_keyfob_refuses_on_the_positive_path(peer):
    port, _ = peer
    origin = f"http://localhost:{port}"
    client = Client(f"http://127.0.0.1:{port}", origin)
    key = SoftKey(origin)
    assert client.register(key, "bob")[0] == 200
    status, options = client.call("GET", "/generate-authentication-options")
    assert status == 200
    body = key.assertion(options)
    assert client.call("POST", "/verify-authentication", body)[0] == 200
    assert client.call("POST", "/verify-authentication", body)[0] >= 400   # a challenge answers once
    assert client.sign_in(key, counter=1)[0] >= 400                         # a counter that went back
    stranger = SoftKey("http://evil.example")
    stranger.user_handle = key.user_handle
    stranger.credential_id, stranger.key, stranger.counter = key.credential_id, key.key, 100
    assert client.sign_in(stranger)[0] >= 400                               # another origin
