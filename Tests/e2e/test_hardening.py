"""Connection-level hardening, against the real binary: parse errors get JSON, slow clients are
cut off, a normal request stays fast while 300 slowloris connections are held, SIGTERM drains
within its deadline, cookies are Secure off localhost, logs go to stdout."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from conftest import Server  # noqa: E402


def raw_request(port, data: bytes, timeout=5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def split_response(raw: bytes):
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), []).append(value.strip())
    return status, headers, body


def closed_within(sock, seconds) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True


def test_parse_errors_get_json_error_bodies(server):
    big = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n"
    status, headers, body = split_response(raw_request(server.port, big))
    assert status == 431
    assert headers["content-type"][0].startswith("application/json")
    assert json.loads(body)["error"] == "payload_too_large"

    many = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + b"".join(b"X-F%d: 1\r\n" % i for i in range(150)) + b"\r\n"
    status, headers, body = split_response(raw_request(server.port, many))
    assert status == 431 and json.loads(body)["error"] == "payload_too_large"

    status, headers, body = split_response(raw_request(server.port, b"NOT HTTP AT ALL\r\n\r\n"))
    assert status == 400 and json.loads(body)["error"] == "invalid_request"
    assert "default-src 'self'" in headers["content-security-policy"][0]


def test_slow_clients_are_cut_off_and_others_stay_fast():
    server = Server(args=("--header-timeout", "3", "--body-timeout", "3")).start()
    try:
        slow = []
        for i in range(300):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")  # headers never finish
            slow.append(s)
        body = socket.create_connection(("127.0.0.1", server.port))
        body.sendall(b"POST /verify-authentication HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"cred\":")  # body never finishes
        slow.append(body)
        time.sleep(0.5)  # let the server accept them all: they are now held

        latencies = []
        for _ in range(10):
            start = time.perf_counter()
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=5) as r:
                assert r.status == 200
            latencies.append(time.perf_counter() - start)
        assert max(latencies) < 0.1, latencies

        # The deadline closes the slow connections (header and body alike).
        time.sleep(3)
        assert closed_within(slow[0], 3)
        assert closed_within(body, 3)
        closed = sum(closed_within(s, 0.5) for s in slow[1:20])
        assert closed == 19
        for s in slow:
            s.close()
    finally:
        server.stop()


def test_sigterm_drains_within_its_deadline_while_a_client_holds_half_a_body():
    server = Server(args=("--body-timeout", "120")).start()
    held = socket.create_connection(("127.0.0.1", server.port))
    held.sendall(b"POST /verify-authentication HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100000\r\n\r\n{\"cred\":")
    time.sleep(0.3)
    start = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(timeout=20)
    elapsed = time.monotonic() - start
    held.close()
    server.log.close()
    assert elapsed < 12, f"took {elapsed:.1f} s to exit"
    assert server.process.returncode in (0, -signal.SIGTERM), server.logs()


def test_cookies_are_secure_unless_on_localhost(server):
    def logout(host):
        request = urllib.request.Request(f"http://127.0.0.1:{server.port}/logout", method="POST",
                                         headers={"Host": host})
        with urllib.request.urlopen(request, timeout=5) as r:
            return r.headers.get("Set-Cookie")
    public = logout("keyfob.example")
    assert public.startswith("__Host-keyfob_session=") and "Secure" in public and "Path=/" in public
    local = logout(f"localhost:{server.port}")
    assert local.startswith("keyfob_session=") and "Secure" not in local


def test_logs_go_to_stdout_not_stderr(tmp_path):
    port_server = Server()
    args = port_server.args
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port_server.port}/healthz", timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
    finally:
        process.terminate()
        out, err = process.communicate(timeout=20)
    assert b"keyfob serving" in out and b"route=/healthz" in out
    assert err.strip() == b"", err[:500]
