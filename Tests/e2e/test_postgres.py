"""Several keyfob instances on one PostgreSQL database, PostgreSQL going away under load, and
moving a SQLite database over (`keyfob migrate-store`). The cluster comes from
KEYFOB_TEST_POSTGRES (`scripts/postgres.sh run`, which `make test` uses); each test gets a schema
of its own, and the outage test a cluster of its own."""
import base64
import concurrent.futures
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid

import pytest

from conftest import BINARY, ROOT, Server, free_port
from softkey import Client, SoftKey

ORIGIN = "http://localhost:9999"  # the load balancer's origin, the same for every instance
MASTER_KEY = base64.b64encode(os.urandom(32)).decode()


def postgres_url(base=None):
    base = base or os.environ.get("KEYFOB_TEST_POSTGRES")
    assert base, "KEYFOB_TEST_POSTGRES is not set: run through `make test` or `scripts/postgres.sh run pytest Tests/e2e`"
    return f"{base}?schema=e2e_{uuid.uuid4().hex[:16]}"


# Many accounts from one test address: the per-address limits raised (they are not what is tested),
# and sign-ups spread over addresses (X-Forwarded-For from the trusted loopback) past the burst.
LIMITS = ["--trusted-proxy", "127.0.0.1", "--signups-per-hour", "10000", "--ip-rate", "100000", "--ip-burst", "100000", "--max-challenges-per-ip", "10000"]


def instance(database, *extra):
    return Server(args=["--database", database, "--origin", ORIGIN, *LIMITS, *extra], env={"KEYFOB_MASTER_KEY": MASTER_KEY})


DB_PASSWORD = "e2e-db-password-5c1f"  # the test cluster trusts loopback; the password must still never be logged


@pytest.fixture
def pair():
    database = postgres_url().replace("://keyfob@", f"://keyfob:{DB_PASSWORD}@")
    a = instance(database).start()
    b = instance(database).start()
    yield a, b
    a.stop()
    b.stop()


def client(server):
    return Client(f"http://127.0.0.1:{server.port}", ORIGIN)


def register_people(c, count, prefix):
    """`count` new accounts, each from an address of its own; their passkeys and session tokens."""
    people = []
    for i in range(count):
        key = SoftKey(ORIGIN)
        status, reply = c.register(key, f"{prefix}{i}", client=f"10.{len(prefix)}.0.{i}")
        assert status == 200, reply
        people.append((key, reply["token"]))
    return people


def test_two_instances_finish_each_others_ceremonies(pair):
    a, b = pair
    ca, cb = client(a), client(b)
    key = SoftKey(ORIGIN)
    # Registration options from A, verified on B.
    status, options = ca.call("GET", "/generate-registration-options?username=alice")
    assert status == 200
    status, registered = cb.call("POST", "/verify-registration", key.registration(options))
    assert status == 200 and registered["verified"], registered
    # Sign-in options from B, verified on A.
    status, options = cb.call("POST", "/generate-authentication-options", {})
    status, signed_in = ca.call("POST", "/verify-authentication", key.assertion(options))
    assert status == 200, signed_in
    token = signed_in["token"]
    # A session from A works on B, and the nostr key is the same through both.
    assert cb.call("GET", "/session", token=token)[0] == 200
    pub_a = ca.call("POST", "/api/signer/get_public_key", {}, token=token)
    pub_b = cb.call("POST", "/api/signer/get_public_key", {}, token=token)
    assert pub_a[0] == 200 and pub_a == pub_b
    # A second passkey added through B (with the unlocked session), the first removed on A:
    # B refuses the removed passkey and the sessions it started at once.
    second = SoftKey(ORIGIN)
    status, added = cb.register(second, "alice", token=token, confirm_with=key)
    assert status == 200, added
    status, fresh = cb.sign_in(second)
    assert status == 200, fresh
    status, reply = ca.call("DELETE", f"/account/credentials/{key.id}",
                            {"confirmation": ca.confirmation(second, "passkey.remove", fresh["token"], target=key.id)},
                            token=fresh["token"])
    assert status == 200, reply
    status, reply = cb.sign_in(key)
    assert status == 404 and reply["error"] == "credential_not_found", reply
    assert cb.call("GET", "/session", token=token)[0] == 401
    assert cb.sign_in(second)[0] == 200
    # Signing out on B ends the session on A.
    assert cb.call("POST", "/logout", {}, token=fresh["token"])[0] == 200
    assert ca.call("GET", "/session", token=fresh["token"])[0] == 401
    for server in pair:
        assert "postgres://keyfob@127.0.0.1" in server.logs()  # the database is named in the start-up line,
        assert DB_PASSWORD not in server.logs()                # its password never


def test_concurrent_logins_over_two_instances_count_exactly(pair):
    a, b = pair
    servers = [a, b]
    users = [key for key, _ in register_people(client(a), 64, "user")]

    local = threading.local()

    def connection(n):
        if not hasattr(local, "clients"):
            local.clients = [client(s) for s in servers]
        return local.clients[n % 2]

    # 64 logins at once, half on each instance: every one accepted, once.
    def login(n):
        key = users[n]
        c = connection(n)
        status, options = c.call("POST", "/generate-authentication-options", {})
        return c.call("POST", "/verify-authentication", key.assertion(options, counter=1))[0]

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        assert list(pool.map(login, range(64))) == [200] * 64

    # The same signed assertion sent to both instances at once: accepted by exactly one.
    bodies = []
    for n in range(32):
        status, options = client(servers[n % 2]).call("POST", "/generate-authentication-options", {})
        bodies.append(users[n].assertion(options, counter=2))

    def replay(job):
        n, side = job
        return connection(side).call("POST", "/verify-authentication", bodies[n])[0]

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(replay, [(n, side) for n in range(32) for side in (0, 1)]))
    for n in range(32):
        assert sorted(results[2 * n:2 * n + 2])[0] == 200 and sorted(results[2 * n:2 * n + 2])[1] != 200, results

    # One passkey, eight assertions with the same counter on eight challenges, on both
    # instances at once: the counter's compare-and-swap lets exactly one through.
    racer = users[40]
    racing = []
    for n in range(8):
        status, options = client(servers[n % 2]).call("POST", "/generate-authentication-options", {})
        racing.append(racer.assertion(options, counter=3))

    def race(n):
        return connection(n).call("POST", "/verify-authentication", racing[n])[0]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(race, range(8)))
    assert outcomes.count(200) == 1, outcomes

    # Exact counters: every stored counter is what its last accepted login reported (1, or 2 for
    # the replayed ones, 3 for the racer): the same value again is a regression, one more is not.
    checker = client(b)
    for n, key in enumerate(users):
        stored = 3 if n == 40 else 2 if n < 32 else 1
        status, reply = checker.sign_in(key, counter=stored)
        assert status == 409 and reply["error"] == "counter_regression", (n, status, reply)
        assert checker.sign_in(key, counter=stored + 1)[0] == 200, n


class Cluster:
    """A PostgreSQL cluster of the test's own, to stop and start."""

    def __init__(self, ssl=False):
        self.dir = tempfile.mkdtemp(prefix="keyfob-pg-")
        self.port = free_port()
        self.ssl = ssl

    def start(self):
        subprocess.run([os.path.join(ROOT, "scripts", "postgres.sh"), "start", self.dir, str(self.port)], check=True,
                       env={**os.environ, "POSTGRES_SSL": "on" if self.ssl else "off"})

    def sql(self, query):
        """One value, asked over a plain connection (so it is not one of Keyfob's)."""
        return subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "keyfob", "-d", "keyfob_test", "-Atc", query],
                              check=True, capture_output=True, text=True, env={**os.environ, "PGSSLMODE": "disable"}).stdout.strip()

    def stop(self):
        subprocess.run([os.path.join(ROOT, "scripts", "postgres.sh"), "stop", self.dir], check=True)

    @property
    def url(self):
        return f"postgres://keyfob@127.0.0.1:{self.port}/keyfob_test"


def test_postgres_going_away_under_load_gives_fast_503s_and_recovers():
    cluster = Cluster()
    cluster.start()
    server = instance(cluster.url).start()
    try:
        key = SoftKey(ORIGIN)
        c = client(server)
        assert c.register(key, "alice")[0] == 200
        stop = threading.Event()
        seen = []  # (status, seconds)

        def load():
            mine = Client(f"http://127.0.0.1:{server.port}", ORIGIN, timeout=15)
            while not stop.is_set():
                started = time.monotonic()
                try:
                    status, _ = mine.call("POST", "/generate-authentication-options", {})
                except OSError as error:  # no answer at all (a hang): recorded, so the test fails
                    status = repr(error)
                seen.append((status, time.monotonic() - started))

        threads = [threading.Thread(target=load) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(1)
        assert any(status == 200 for status, _ in seen)
        cluster.stop()
        down_from = len(seen)
        time.sleep(11)  # at least two store timeouts (5 s) for each of the four clients
        during = seen[down_from:]
        # Every request answered: 503 (internal_error), none slower than the store's timeout
        # plus slack, and the server still running.
        assert during and all(status in (200, 503) for status, _ in during), during[:20]
        assert sum(1 for status, _ in during if status == 503) >= 4
        assert max(seconds for _, seconds in during) < 7, max(seconds for _, seconds in during)
        assert server.process.poll() is None
        status, reply = c.call("GET", "/healthz")
        assert status == 503 and reply == {"status": "unavailable"}
        status, reply = c.call("POST", "/generate-authentication-options", {})
        assert status == 503 and reply["error"] == "internal_error"
        # PostgreSQL back: the same process recovers.
        cluster.start()
        deadline = time.time() + 30
        while time.time() < deadline and c.call("GET", "/healthz")[0] != 200:
            time.sleep(0.5)
        assert c.call("GET", "/healthz")[0] == 200
        stop.set()
        for t in threads:
            t.join()
        assert seen[-1][0] == 200
        assert c.sign_in(key)[0] == 200
        assert "database unavailable" in server.logs()
    finally:
        stop.set() if "stop" in locals() else None
        server.stop()
        cluster.stop()
        shutil.rmtree(cluster.dir, ignore_errors=True)


def test_an_instance_started_before_postgres_answers_503_then_serves():
    cluster = Cluster()
    server = instance(cluster.url)
    server.process = subprocess.Popen(server.args, stdout=open(os.path.join(server.data, "server.log"), "w"),
                                      stderr=subprocess.STDOUT, env=server.env)
    server.log = open(os.path.join(server.data, "server.log"))
    try:
        c = client(server)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                status, reply = c.call("GET", "/healthz")
                break
            except OSError:
                time.sleep(0.2)
        # Not ready: start-up (migrations) has not run, so a load balancer keeps it out.
        assert status == 503 and reply == {"status": "starting"}
        status, reply = c.call("GET", "/generate-registration-options?username=bob")
        assert status == 503 and reply["error"] == "internal_error"
        # It says so in its log, and keeps trying.
        deadline = time.time() + 20
        while time.time() < deadline and "database not reachable; keyfob answers 503 until it is. Retrying" not in server.logs():
            time.sleep(0.2)
        assert "attempt=1" in server.logs()
        cluster.start()
        deadline = time.time() + 60
        while time.time() < deadline and c.call("GET", "/healthz")[0] != 200:
            time.sleep(0.5)
        assert c.register(SoftKey(ORIGIN), "bob")[0] == 200
        assert "database reachable; schema up to date" in server.logs()
    finally:
        server.stop()
        cluster.stop()
        shutil.rmtree(cluster.dir, ignore_errors=True)


def test_migrate_store_moves_a_sqlite_database_and_everyone_signs_in():
    sqlite = Server(args=["--origin", ORIGIN, *LIMITS], env={"KEYFOB_MASTER_KEY": MASTER_KEY}).start()
    try:
        c = client(sqlite)
        people = register_people(c, 5, "person")
        keys = [key for key, _ in people]
        pubkeys = [c.call("POST", "/api/signer/get_public_key", {}, token=token)[1]["result"] for _, token in people]
        assert c.sign_in(keys[0])[0] == 200
    finally:
        sqlite.stop()
    database = postgres_url()
    moved = subprocess.run([BINARY, "migrate-store", "--from", f"sqlite:{sqlite.data}/keyfob.sqlite", "--to", database],
                           capture_output=True, text=True, timeout=120)
    assert moved.returncode == 0, moved.stderr
    assert "users\t5" in moved.stdout and "credentials\t5" in moved.stdout, moved.stdout
    # Into a database that holds accounts already: refused, nothing written.
    again = subprocess.run([BINARY, "migrate-store", "--from", f"sqlite:{sqlite.data}/keyfob.sqlite", "--to", database],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode != 0 and "holds 5 accounts already" in again.stderr, again.stderr
    server = instance(database).start()
    try:
        c = client(server)
        for key, pubkey in zip(keys, pubkeys):
            status, reply = c.sign_in(key)
            assert status == 200, reply
            signed = c.call("POST", "/api/signer/get_public_key", {}, token=reply["token"])
            assert signed[1]["result"] == pubkey
        # The counter came along: the first person's next login must report more than 1.
        assert c.sign_in(keys[0], counter=1)[0] == 409
    finally:
        server.stop()


def test_the_deploy_example_nginx_routes_around_a_stopped_instance():
    """Deploy/multi: nginx (the shipped upstream config) in front of two instances on one database."""
    from test_deploy import nginx_site

    database = postgres_url()
    origin = "https://login.example.com"
    args = ["--database", database, "--rp-id", "example.com", "--origin", origin, *LIMITS]
    a = Server(args=args, env={"KEYFOB_MASTER_KEY": MASTER_KEY}).start()
    b = Server(args=args, env={"KEYFOB_MASTER_KEY": MASTER_KEY}).start()
    https, http = free_port(), free_port()
    work, conf = nginx_site("multi/nginx-upstream.conf", [
        ("server 127.0.0.1:8081", f"server 127.0.0.1:{a.port}"), ("server 127.0.0.1:8082", f"server 127.0.0.1:{b.port}"),
        ("server 127.0.0.1:8091", f"server 127.0.0.1:{a.nip46_port}"), ("server 127.0.0.1:8092", f"server 127.0.0.1:{b.nip46_port}"),
        ("listen 443 ssl http2;", f"listen 127.0.0.1:{https} ssl http2;"), ("listen 80;", f"listen 127.0.0.1:{http};"),
        # An instance nginx saw fail is left out this long: shortened so the test need not wait 10 s.
        ("max_fails=2 fail_timeout=10s;\n    server", "max_fails=2 fail_timeout=1s;\n    server"),
        ("fail_timeout=10s;\n    keepalive", "fail_timeout=1s;\n    keepalive")])
    nginx = subprocess.Popen(["nginx", "-c", conf, "-g", "daemon off;"], stderr=subprocess.PIPE)
    try:
        c = Client(f"https://127.0.0.1:{https}", origin)
        deadline = time.time() + 10
        while True:
            try:
                assert c.call("GET", "/healthz") == (200, {"status": "ok"})
                break
            except OSError:
                assert time.time() < deadline
                time.sleep(0.1)
        # The built-in NIP-46 relay through the proxy: wss://<host>/nip46.
        import ssl
        import websocket
        relay = websocket.create_connection(f"wss://127.0.0.1:{https}/nip46", sslopt={"cert_reqs": ssl.CERT_NONE}, timeout=10)
        relay.send('["REQ","s",{"kinds":[24133]}]')
        assert relay.recv() == '["EOSE","s"]'
        relay.close()
        key = SoftKey(origin, rp_id="example.com")
        status, reply = c.register(key, "alice")
        assert status == 200, reply
        for stopped, running in ((a, b), (b, a)):
            stopped.stop()
            for _ in range(3):
                status, reply = c.sign_in(key)
                assert status == 200, (status, reply)
            assert c.call("GET", "/session", token=reply["token"])[0] == 200
            stopped.start()
            time.sleep(3)  # past fail_timeout (nginx counts it in whole seconds): it tries the instance again
        served = {line.split()[-1] for line in open(os.path.join(work, "keyfob.access.log"))}
        assert {f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"} <= served, served
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)
        a.stop()
        b.stop()


def test_sslmode_require_encrypts_every_connection_and_verify_full_checks_the_certificate():
    cluster = Cluster(ssl=True)
    cluster.start()
    server = instance(cluster.url + "?sslmode=require").start()
    try:
        assert client(server).register(SoftKey(ORIGIN), "alice")[0] == 200
        mine = "datname = 'keyfob_test' AND pid <> pg_backend_pid()"
        assert int(cluster.sql(f"SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE ssl AND {mine}")) >= 1
        assert cluster.sql(f"SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE NOT ssl AND {mine}") == "0"
        server.stop()
        # verify-full: the throwaway certificate is self-signed, so the instance must not use it.
        strict = instance(cluster.url + "?sslmode=verify-full&timeout=1")
        strict.process = subprocess.Popen(strict.args, stdout=open(os.path.join(strict.data, "server.log"), "w"),
                                          stderr=subprocess.STDOUT, env=strict.env)
        strict.log = open(os.path.join(strict.data, "server.log"))
        try:
            deadline = time.time() + 20
            while time.time() < deadline and "database not reachable" not in strict.logs():
                time.sleep(0.2)
            assert "database not reachable" in strict.logs()
            assert client(strict).call("GET", "/healthz")[0] == 503
        finally:
            strict.stop()
    finally:
        server.stop()
        cluster.stop()
        shutil.rmtree(cluster.dir, ignore_errors=True)
