"""Starts the real keyfob binary on a loopback port for the end-to-end tests, and stops it."""
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("KEYFOB_BINARY", os.path.join(ROOT, ".build", "debug", "keyfob"))


# Every button a browser test presses, by its id (#56: every button a page shows is pressed by a
# browser test). `WebElement.click` records the id first; `test_zz_every_button.py`, collected last,
# compares them with the buttons of Public/*.html.
PRESSED = set()


def _recording_click(click):
    def pressed(element):
        try:
            if element.tag_name == "button" and element.get_attribute("id"):
                PRESSED.add(element.get_attribute("id"))
        except Exception:  # a stale element: the click below says so
            pass
        return click(element)
    return pressed


def _record_clicks():
    from selenium.webdriver.remote.webelement import WebElement
    if not getattr(WebElement.click, "_records", False):
        WebElement.click = _recording_click(WebElement.click)
        WebElement.click._records = True


_record_clicks()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(port, timeout=2.0):
    """Whether /healthz on 127.0.0.1:`port` answers 200 within `timeout`."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=timeout) as r:
            return r.status == 200
    except OSError:
        return False


def rss_mb(pid):
    """A process's resident memory in MB (from /proc)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def partial_heads(port, count, path=b"/nip46"):
    """`count` connections that each send part of a request head and no more (slowloris); stops
    early when the server no longer accepts (its backlog is full)."""
    held = []
    for _ in range(count):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nX-Slow: ")
            held.append(s)
        except OSError:
            break
    return held


def closed_by_server(sockets, wait=2.0):
    """How many of `sockets` the server has closed (EOF or reset within `wait` s each)."""
    closed = 0
    for s in sockets:
        s.settimeout(wait)
        try:
            closed += s.recv(1) == b""
        except ConnectionResetError:
            closed += 1
        except socket.timeout:
            pass
    return closed


class Server:
    def __init__(self, args=(), env=None, preexec_fn=None):
        self.port = free_port()
        self.nip46_port = free_port()  # the built-in relay's listener (default --port + 10 might be taken)
        while self.nip46_port == self.port:  # the kernel may hand the same free port out twice
            self.nip46_port = free_port()
        self.data = tempfile.mkdtemp(prefix="keyfob-e2e-")
        self.args = [BINARY, "serve", "--host", "127.0.0.1", "--port", str(self.port), "--nip46-port", str(self.nip46_port),
                     "--data-dir", self.data,
                     "--public-dir", os.path.join(ROOT, "Public"), *args]
        self.env = {**os.environ, **(env or {})}
        self.process = None
        self.preexec_fn = preexec_fn  # e.g. a smaller open-file limit for the server alone

    @property
    def url(self):
        # Browsers allow WebAuthn on http://localhost, never on http://127.0.0.1.
        return f"http://localhost:{self.port}"

    def start(self):
        self.log = open(os.path.join(self.data, "server.log"), "w")
        self.process = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT, env=self.env,
                                        preexec_fn=self.preexec_fn)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("keyfob exited early: " + open(self.log.name).read())
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1) as r:
                    if json.load(r)["status"] == "ok":
                        return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("keyfob did not become healthy")

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.log.close()

    def logs(self):
        # Keyfob writes its log from a thread of its own every 20 ms: let the last lines land.
        time.sleep(0.1)
        return open(self.log.name).read()


@pytest.fixture
def server():
    s = Server().start()
    yield s
    s.stop()


class NostrRelay:
    """A real third-party relay on loopback: `nostr-relay` from PyPI (pip), its database in a temp dir."""

    def __init__(self):
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        self.dir = tempfile.mkdtemp(prefix="nostr-relay-")
        import nostr_relay
        with open(os.path.join(os.path.dirname(nostr_relay.__file__), "config.yaml")) as f:
            config = f.read()
        config = config.replace("sqlite+aiosqlite:///nostr.sqlite3", f"sqlite+aiosqlite:///{self.dir}/nostr.sqlite3")
        config = config.replace("6969", str(self.port))
        self.config = os.path.join(self.dir, "config.yaml")
        with open(self.config, "w") as f:
            f.write(config)

    def start(self):
        import sys
        self.log = open(os.path.join(self.dir, "relay.log"), "w")
        # Its own process group: gunicorn forks a worker that must stop with it.
        self.process = subprocess.Popen([sys.executable, "-c", "import sys; from nostr_relay.cli import main; sys.exit(main())",
                                         "-c", self.config, "serve"], stdout=self.log, stderr=subprocess.STDOUT,
                                        cwd=self.dir, start_new_session=True)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                assert self.process.poll() is None, open(self.log.name).read()
                time.sleep(0.1)
        raise RuntimeError("nostr-relay did not start: " + open(self.log.name).read())

    def stop(self):
        import signal
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.log.close()


@pytest.fixture
def nostr_relay():
    relay = NostrRelay().start()
    yield relay
    relay.stop()


# Lines a test wants in the run's output even when it passes (pytest -q hides a passing test's
# prints): e.g. how many operations and cases schemathesis ran.
SUMMARY = []


def pytest_terminal_summary(terminalreporter):
    for line in SUMMARY:
        terminalreporter.write_line(line)
