#!/usr/bin/env python3
"""Chaos probes against the real keyfob binary (issue #25): what an attacker and an unlucky
operator do to a server, each a pass/fail row.

    scripts/chaos.py            every probe, full size (minutes; `make chaos`)
    scripts/chaos.py --quick    a ~30-second version (part of `make test`)

KEYFOB_BINARY picks the binary (default .build/debug/keyfob; `make chaos` builds and uses the
release one). The PostgreSQL probe runs when the machine has PostgreSQL (Debian's package). Prints
a Markdown table; exits 1 if any row fails. docs/operations.md shows the last full run's table.
"""
import argparse
import json
import os
import random
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "Tests", "e2e"))

from conftest import Server, closed_by_server, healthy, partial_heads, rss_mb  # noqa: E402
from softkey import Client, SoftKey  # noqa: E402
from test_reliability import (  # noqa: E402
    test_one_address_cannot_hold_the_http_port, test_sigterm_with_event_streams_open_stops_within_a_second)

ORIGIN = "http://localhost:9999"
OPEN_LIMITS = ["--origin", ORIGIN, "--trusted-proxy", "127.0.0.1", "--signups-per-hour", "1000000", "--ip-rate", "1000000",
               "--ip-burst", "1000000", "--max-challenges-per-ip", "1000000"]


def sigterm(server, limit):
    """SIGTERM; (seconds to exit, return code, whether the log says stopping/stopped and no crash)."""
    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout=limit + 20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    elapsed = time.monotonic() - started
    server.log.close()
    logs = open(server.log.name).read()
    clean = "stopping" in logs and "\n" in logs and "stopped" in logs and "fatal error" not in logs.lower()
    return elapsed, server.process.returncode, clean


class Load:
    """Mixed load from `threads` clients: sign-ups, sign-ins and sign_event, recording every
    acknowledged write so a crash can be checked against it."""

    def __init__(self, server, threads=4, prefix="u"):
        self.server, self.threads, self.prefix = server, threads, prefix
        self.stop = threading.Event()
        self.registered = []   # usernames whose sign-up was acknowledged
        self.sessions = []     # tokens whose sign-in was acknowledged
        self.signed = []       # event ids whose signature was acknowledged (each is in the audit log)
        self.errors = []
        self.lock = threading.Lock()
        self.workers = []

    def worker(self, n):
        c = Client(f"http://127.0.0.1:{self.server.port}", ORIGIN, timeout=10)
        key, token, i = None, None, 0
        while not self.stop.is_set():
            i += 1
            address = f"10.{n}.{(i >> 8) & 255}.{i & 255}"
            try:
                if key is None or i % 5 == 0:
                    key, name = SoftKey(ORIGIN), f"{self.prefix}{n}x{i}"
                    status, reply = c.register(key, name, client=address)
                    if status == 200:
                        with self.lock:
                            self.registered.append(name)
                        token = reply["token"]
                elif i % 2 == 0:
                    status, reply = c.sign_in(key, client=address)
                    if status == 200:
                        with self.lock:
                            self.sessions.append(reply["token"])
                        token = reply["token"]
                else:
                    status, reply = c.call("POST", "/api/signer/sign_event",
                                           {"event": {"kind": 1, "content": f"chaos {n} {i}", "tags": []}}, token=token)
                    if status == 200:
                        with self.lock:
                            self.signed.append(reply["event"]["id"] if "event" in reply else json.loads(reply["result"])["id"])
                if status >= 500:
                    self.errors.append(status)
            except (OSError, AssertionError, KeyError, TypeError, ValueError):
                if self.stop.is_set():
                    return
                time.sleep(0.01)  # the server is gone (killed): keep trying until told to stop

    def start(self):
        self.workers = [threading.Thread(target=self.worker, args=(n,), daemon=True) for n in range(self.threads)]
        for w in self.workers:
            w.start()

    def finish(self):
        self.stop.set()
        for w in self.workers:
            w.join(timeout=15)


def probe_kill9(rounds, seconds):
    """kill -9 under mixed load, `rounds` times on one database: every acknowledged sign-up,
    session and signature is still there, and SQLite's integrity check passes."""
    server = Server(args=OPEN_LIMITS)
    server.start()
    data = server.data
    totals = [0, 0, 0]
    lost = [0, 0, 0]
    integrity = []
    try:
        for r in range(rounds):
            load = Load(server, prefix=f"r{r}u")
            load.start()
            time.sleep(seconds)
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait()
            load.finish()
            server.log.close()
            server = Server(args=OPEN_LIMITS)
            server.data = data
            server.args[server.args.index("--data-dir") + 1] = data
            server.start()
            db = sqlite3.connect(os.path.join(data, "keyfob.sqlite"))
            integrity.append(db.execute("PRAGMA integrity_check").fetchone()[0])
            names = {row[0] for row in db.execute("SELECT username FROM users")}
            events = {row[0] for row in db.execute("SELECT event_id FROM audit_log WHERE event_id IS NOT NULL")}
            db.close()
            c = Client(f"http://127.0.0.1:{server.port}", ORIGIN)
            # Every acknowledged session, not a sample (each person signs in a few times: under the 50 cap).
            still = sum(1 for t in load.sessions if c.call("GET", "/session", token=t)[0] == 200)
            totals[0] += len(load.registered)
            totals[1] += len(load.sessions)
            totals[2] += len(load.signed)
            lost[0] += sum(1 for name in load.registered if name not in names)
            lost[1] += len(load.sessions) - still
            lost[2] += sum(1 for e in load.signed if e not in events)
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)
    ok = all(i == "ok" for i in integrity) and lost == [0, 0, 0] and totals[0] > 0
    return ok, (f"{rounds}× kill -9: lost {lost[0]} of {totals[0]} sign-ups, {lost[1]} of {totals[1]} sessions, "
                f"{lost[2]} of {totals[2]} signatures; integrity {'ok' if set(integrity) == {'ok'} else integrity}")


def probe_sigterm_idle():
    server = Server().start()
    elapsed, code, clean = sigterm(server, 1)
    return elapsed < 1 and code == 0 and clean, f"exit {code} after {elapsed:.2f} s"


def probe_sigterm_loaded():
    server = Server(args=OPEN_LIMITS).start()
    load = Load(server)
    load.start()
    time.sleep(2)
    ws = socket.create_connection(("127.0.0.1", server.nip46_port))  # a bunker client mid-upgrade, too
    ws.sendall(b"GET /nip46 HTTP/1.1\r\nHost: x\r\n")
    elapsed, code, clean = sigterm(server, 1)
    load.finish()
    ws.close()
    return elapsed < 1 and code == 0 and clean and not load.errors, f"exit {code} after {elapsed:.2f} s under load"


def probe_sigterm_half_body():
    """A request whose body never comes: shutdown waits for it only as long as the body timeout."""
    server = Server(args=("--body-timeout", "3")).start()
    held = socket.create_connection(("127.0.0.1", server.port))
    held.sendall(b"POST /verify-authentication HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100000\r\n\r\n{\"cred\":")
    time.sleep(0.3)
    elapsed, code, clean = sigterm(server, 4)
    held.close()
    return elapsed < 4 and code == 0 and clean, f"exit {code} after {elapsed:.2f} s (body timeout 3 s)"


def slowloris(port_of, count):
    server = Server(args=("--header-timeout", "2")).start()
    try:
        port = port_of(server)
        held = partial_heads(port, count)
        fast = healthy(server.port, timeout=1)
        time.sleep(3.5)
        closed = closed_by_server(held)
        for s in held:
            s.close()
        return closed == count and fast, f"{closed} of {count} slow-header connections closed at the 2 s timeout"
    finally:
        server.stop()


def probe_fd_exhaustion(count, hold_seconds):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    server = Server(args=("--header-timeout", "60"),
                    preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))).start()
    held = []
    try:
        for port in (server.nip46_port, server.port):
            held += partial_heads(port, count)
            if port == server.nip46_port:
                answering = healthy(server.port)  # HTTP keeps answering while the NIP-46 port is full
        time.sleep(hold_seconds)
        alive = server.process.poll() is None
        for s in held:
            s.close()
        deadline = time.time() + 10
        while time.time() < deadline and not (healthy(server.port) and healthy(server.nip46_port)):
            time.sleep(0.2)
        back = healthy(server.port) and healthy(server.nip46_port)
        return alive and back and answering, (f"ulimit -n 256, {len(held)} connections opened and kept {hold_seconds} s (past a listener's share they wait in the kernel's backlog, not in Keyfob): "
                                              f"{'alive' if alive else 'DIED'}, HTTP answered during the NIP-46 flood: "
                                              f"{answering}, /healthz after: {back}")
    finally:
        for s in held:
            s.close()
        server.stop()


def nostr_event(keys, target, content):
    import nostr_sdk as n
    return json.loads(n.EventBuilder(n.Kind(24133), content).tags([n.Tag.public_key(target.public_key())]).finalize(keys).as_json())


def probe_nip46_flood(count):
    """Junk and valid events as fast as one connection can send; a real subscriber still gets its event."""
    import nostr_sdk as n
    import websocket
    server = Server().start()
    try:
        url = f"ws://127.0.0.1:{server.nip46_port}/nip46"
        target, sender = n.Keys.generate(), n.Keys.generate()
        listener = websocket.create_connection(url, timeout=5)
        listener.send(json.dumps(["REQ", "l", {"kinds": [24133], "#p": [target.public_key().to_hex()]}]))
        assert json.loads(listener.recv())[0] == "EOSE"
        flood = websocket.create_connection(url, timeout=10)
        started = time.monotonic()
        junk = ["not json", '["EVENT",{}]', '["REQ"]', "[" * 500]
        for i in range(count):
            flood.send(random.choice(junk))
        answered = 0
        flood.settimeout(5)
        try:
            while answered < count:
                flood.recv()
                answered += 1
        except Exception:
            pass
        flood.close()
        other = websocket.create_connection(url, timeout=5)
        other.send(json.dumps(["EVENT", nostr_event(sender, target, "real request")]))
        got = json.loads(listener.recv())
        ok = got[0] == "EVENT" and server.process.poll() is None
        return ok, f"{count} junk frames in {time.monotonic() - started:.1f} s; a real event still delivered: {got[0] == 'EVENT'}"
    finally:
        server.stop()


def probe_nip46_slow_readers(readers, events):
    import nostr_sdk as n
    import websocket
    server = Server().start()
    try:
        url = f"ws://127.0.0.1:{server.nip46_port}/nip46"
        target, sender = n.Keys.generate(), n.Keys.generate()
        slow = []
        for i in range(readers):
            ws = websocket.create_connection(url, timeout=5, sockopt=((socket.SOL_SOCKET, socket.SO_RCVBUF, 4096),))
            ws.send(json.dumps(["REQ", f"s{i}", {"kinds": [24133], "#p": [target.public_key().to_hex()]}]))
            ws.recv()
            slow.append(ws)
        before = rss_mb(server.process.pid)
        publisher = websocket.create_connection(url, timeout=10)
        for i in range(events):
            publisher.send(json.dumps(["EVENT", nostr_event(sender, target, f"{i:05d}" + "x" * 60_000)]))
            publisher.recv()
        time.sleep(0.5)
        grown = rss_mb(server.process.pid) - before
        for ws in slow:
            ws.close()
        publisher.close()
        return grown < 4 * readers, f"{readers} readers that stop reading, {events} × 60 kB: RSS +{grown:.0f} MB"
    finally:
        server.stop()


def probe_postgres_outage():
    from test_postgres import Cluster, instance
    cluster = Cluster()
    cluster.start()
    server = instance(cluster.url).start()
    seen = []
    stop = threading.Event()
    try:
        def load():
            c = Client(f"http://127.0.0.1:{server.port}", ORIGIN, timeout=15)
            while not stop.is_set():
                t = time.monotonic()
                try:
                    status = c.call("POST", "/generate-authentication-options", {})[0]
                except OSError:
                    status = None
                seen.append((status, time.monotonic() - t))

        threads = [threading.Thread(target=load, daemon=True) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(1)
        cluster.stop()
        mark = len(seen)
        time.sleep(6)
        during = seen[mark:]
        fast_503 = bool(during) and all(s in (200, 503) for s, _ in during) and max(d for _, d in during) < 7
        cluster.start()
        deadline = time.time() + 30
        while time.time() < deadline and not healthy(server.port):
            time.sleep(0.3)
        recovered = healthy(server.port)
        cluster.stop()  # down again, under load, then SIGTERM
        time.sleep(6)
        stop.set()
        elapsed, code, clean = sigterm(server, 7)
        return fast_503 and recovered and code == 0 and clean and elapsed < 7, (
            f"503s within 5 s: {fast_503}; recovered: {recovered}; SIGTERM after a second outage: exit {code} in {elapsed:.1f} s")
    finally:
        stop.set()
        if server.process.poll() is None:
            server.stop()
        shutil.rmtree(cluster.dir, ignore_errors=True)


def probe_postgres_long_outage(seconds):
    """PostgreSQL away `seconds` under a client that keeps asking: serving again within 3 s of
    its return, though the pool by then waits up to a minute between attempts."""
    from test_postgres import serving_after_an_outage
    back, logs = serving_after_an_outage(seconds)
    replaced = "a fresh connection pool took over" in logs
    return back < 3, f"away {seconds} s; serving {back:.1f} s after its return" + (" (a fresh pool took over)" if replaced else "")


def probe_postgres_crash(rounds):
    """PostgreSQL killed (`pg_ctl stop -m immediate`) `rounds` times under sign-ups, sign-ins,
    sign_event and Polkadot approvals: every acknowledged item is there afterwards."""
    from test_postgres import crash_under_mixed_load
    load, alive, counts, lost = crash_under_mixed_load(rounds)
    ok = not any(lost.values()) and not load.errors and alive and counts["sessions"] > 0
    return ok, (f"{rounds}× crash: lost {len(lost['sessions'])} of {counts['sessions']} sessions, {len(lost['signatures'])} of "
                f"{counts['signatures']} signatures, {len(lost['approvals'])} of {counts['approvals']} Polkadot approvals; "
                f"{len(load.errors)} unexpected answers")


def probe_audit_write_fails():
    """Every audit write fails (a trigger, as a full disk would): sign_event answers 503
    store_unavailable and no signature; the server keeps serving."""
    server = Server(args=OPEN_LIMITS).start()
    try:
        c = Client(f"http://127.0.0.1:{server.port}", ORIGIN)
        status, reply = c.register(SoftKey(ORIGIN), "audited")
        assert status == 200, reply
        db = sqlite3.connect(os.path.join(server.data, "keyfob.sqlite"))
        db.execute("CREATE TRIGGER no_audit BEFORE INSERT ON audit_log BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END")
        db.commit()
        db.close()
        answers = [c.call("POST", "/api/signer/sign_event", {"event": {"kind": 1, "content": f"n{i}"}}, token=reply["token"])
                   for i in range(20)]
        signed = sum(1 for _, body in answers if isinstance(body, dict) and ("event" in body or "result" in body))
        refused = sum(1 for status, body in answers if status == 503 and body.get("error") == "store_unavailable")
        return signed == 0 and refused == 20 and healthy(server.port), f"{refused} of 20 sign_event calls 503, {signed} signatures answered"
    finally:
        server.stop()


def e2e_probe(test, passed, *args):
    """An e2e test as a probe: `passed` when it passes, else its assertion is the row's detail."""
    def probe():
        try:
            test(*args)
            return True, passed
        except AssertionError as error:
            return False, f"AssertionError: {str(error)[:300]}"
    return probe


def probe_type_swaps():
    from test_type_swaps import test_every_post_endpoint_survives_a_type_swap_at_every_field as swaps
    server = Server().start()
    try:
        return e2e_probe(swaps, "every answer below 500 with a JSON error; the process alive after", server)()
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a ~30-second version (CI)")
    args = parser.parse_args()
    quick = args.quick
    probes = [
        ("kill -9 under mixed load", lambda: probe_kill9(1 if quick else 5, 3 if quick else 10)),
        ("SIGTERM idle", probe_sigterm_idle),
        ("SIGTERM under load", probe_sigterm_loaded),
        ("SIGTERM with half a body sent", probe_sigterm_half_body),
        ("slowloris, HTTP port", lambda: slowloris(lambda s: s.port, 100 if quick else 300)),
        ("slowloris, NIP-46 port", lambda: slowloris(lambda s: s.nip46_port, 100 if quick else 300)),
        ("descriptors exhausted, both ports", lambda: probe_fd_exhaustion(400 if quick else 1100, 1.5 if quick else 4)),
        ("NIP-46 junk flood", lambda: probe_nip46_flood(1000 if quick else 5000)),
        ("NIP-46 readers that stop reading", lambda: probe_nip46_slow_readers(4 if quick else 15, 60 if quick else 240)),
        ("every audit write failing", probe_audit_write_fails),
        ("SIGTERM with event streams open", e2e_probe(
            test_sigterm_with_event_streams_open_stops_within_a_second, "a dashboard and an account stream open: both ended, exit 0 within 1 s")),
        ("one address's slow headers, HTTP port", e2e_probe(
            test_one_address_cannot_hold_the_http_port, "ulimit -n 256: one address held its share, the rest closed; others answered")),
        ("every POST body, a type swap at every field", probe_type_swaps),
    ]
    if not quick and os.path.isdir("/usr/lib/postgresql"):
        probes.append(("PostgreSQL outage under load, then SIGTERM", probe_postgres_outage))
        probes.append(("PostgreSQL crash under mixed load", lambda: probe_postgres_crash(5)))
        probes.append(("PostgreSQL away two minutes", lambda: probe_postgres_long_outage(125)))
    rows, failed = [], 0
    for name, probe in probes:
        started = time.monotonic()
        try:
            ok, detail = probe()
        except Exception as error:  # a probe that breaks is a failed row, with the reason
            ok, detail = False, f"{type(error).__name__}: {error}"
        failed += not ok
        rows.append(f"| {name} | {'pass' if ok else 'FAIL'} | {detail} | {time.monotonic() - started:.0f} s |")
        print(rows[-1], flush=True)
    print()
    print(f"Keyfob chaos probes ({'quick' if quick else 'full'}), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"binary {os.path.relpath(os.environ.get('KEYFOB_BINARY', '.build/debug/keyfob'), ROOT)}")
    print()
    print("| probe | result | what happened | took |")
    print("|---|---|---|---|")
    print("\n".join(rows))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
