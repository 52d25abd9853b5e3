"""The real binary: start-up checks and raw HTTP edge cases a test client cannot send."""
import json
import os
import socket
import subprocess

from conftest import BINARY, ROOT, Server


def run_serve(*args):
    return subprocess.run([BINARY, "serve", "--port", "1", *args], capture_output=True, text=True, timeout=60)


def test_an_origin_outside_the_rp_id_stops_start_up():
    result = run_serve("--rp-id", "example.com", "--origin", "https://evil.org")
    assert result.returncode != 0
    assert "does not belong to rpId" in result.stderr


def test_an_unwritable_data_dir_stops_start_up():
    result = run_serve("--data-dir", "/proc/keyfob-cannot-write-here")
    assert result.returncode != 0
    assert "data directory" in result.stderr


def test_environment_variables_configure_the_server():
    result = subprocess.run([BINARY, "serve", "--port", "1"], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "KEYFOB_RP_ID": "example.com", "KEYFOB_ORIGINS": "https://a.example.com,https://evil.org"})
    assert result.returncode != 0 and "https://evil.org" in result.stderr


def test_help_lists_every_setting():
    result = subprocess.run([BINARY, "serve", "--help"], capture_output=True, text=True, timeout=60)
    for flag in ("--host", "--port", "--rp-id", "--rp-name", "--origin", "--data-dir", "--database",
                 "--challenge-timeout", "--session-ttl", "--signer-unlock-ttl", "--admin", "--trusted-proxy",
                 "KEYFOB_RP_ID", "KEYFOB_ORIGINS"):
        assert flag in result.stdout, flag


def raw_request(server, head):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(head.encode())
        data = b""
        while b"\r\n\r\n" not in data or len(data) < 20:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head_part, _, body = data.partition(b"\r\n\r\n")
        return head_part.decode(), body


def test_a_huge_declared_body_is_refused_before_it_is_sent(server):
    head, body = raw_request(server, "POST /verify-registration HTTP/1.1\r\nHost: localhost\r\n"
                                     "Content-Type: application/json\r\nContent-Length: 100000000\r\n\r\n")
    assert " 413 " in head.split("\r\n")[0]


def test_well_known_paths_and_json_errors(server):
    head, body = raw_request(server, "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    assert " 200 " in head.split("\r\n")[0]


def test_a_busy_port_is_named_whichever_of_the_two_it_is(tmp_path):
    for busy, flag in (("nip46", "--nip46-port"), ("http", "--port")):
        holder = socket.socket()
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            free = probe.getsockname()[1]
        http, relay = (free, taken) if busy == "nip46" else (taken, free)
        try:
            result = subprocess.run([BINARY, "serve", "--port", str(http), "--nip46-port", str(relay), "--data-dir",
                                     str(tmp_path / busy), "--public-dir", os.path.join(ROOT, "Public")],
                                    capture_output=True, text=True, timeout=60)
        finally:
            holder.close()
        assert result.returncode != 0
        assert f"{taken}" in result.stderr and flag in result.stderr, result.stderr
        if busy == "nip46":
            assert "NIP-46 relay's port" in result.stderr
