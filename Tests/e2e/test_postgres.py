"""Several keyfob instances on one PostgreSQL database, PostgreSQL going away under load, and
moving a SQLite database over (`keyfob migrate-store`). The cluster comes from
KEYFOB_TEST_POSTGRES (`scripts/postgres.sh run`, which `make test` uses); each test gets a schema
of its own, and the outage test a cluster of its own."""
import base64
import concurrent.futures
import itertools
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


_probes = itertools.count(1)


def touches_store(c):
    """A request whose every answer needs PostgreSQL: registration options store their challenge
    (sign-in options do not: their challenge is sealed, never stored). Each from an address of its
    own, so the per-address sign-up limit never answers first."""
    n = next(_probes)
    return c.call("GET", "/generate-registration-options", client=f"10.{128 + n // 65536 % 128}.{n // 256 % 256}.{n % 256}")


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

    def __init__(self, ssl=False, durability="off"):
        self.dir = tempfile.mkdtemp(prefix="keyfob-pg-")
        self.port = free_port()
        self.ssl = ssl
        self.durability = durability  # "full": PostgreSQL's defaults (fsync and synchronous_commit on)

    def start(self):
        subprocess.run([os.path.join(ROOT, "scripts", "postgres.sh"), "start", self.dir, str(self.port)], check=True,
                       env={**os.environ, "POSTGRES_SSL": "on" if self.ssl else "off", "POSTGRES_FSYNC": self.durability})

    def crash(self):
        """`pg_ctl stop -m immediate`: every backend killed at once, no checkpoint (a power cut)."""
        subprocess.run([os.path.join(ROOT, "scripts", "postgres.sh"), "stop", self.dir], check=True,
                       env={**os.environ, "POSTGRES_STOP_MODE": "immediate"})

    def sql(self, query):
        """One value, asked over a plain connection (so it is not one of Keyfob's)."""
        return subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "keyfob", "-d", "keyfob_test", "-Atc", query],
                              check=True, capture_output=True, text=True, env={**os.environ, "PGSSLMODE": "disable"}).stdout.strip()

    def stop(self):
        subprocess.run([os.path.join(ROOT, "scripts", "postgres.sh"), "stop", self.dir], check=True)

    @property
    def url(self):
        return f"postgres://keyfob@127.0.0.1:{self.port}/keyfob_test"


def test_healthz_says_503_while_postgres_answers_but_cannot_write():
    """A database that still answers reads but refuses writes (a primary turned standby, a
    read-only switch) is not healthy: /healthz writes a probe row, so a load balancer moves away."""
    cluster = Cluster()
    cluster.start()
    server = instance(cluster.url).start()
    try:
        c = client(server)
        assert c.call("GET", "/healthz") == (200, {"status": "ok"})
        cluster.sql("ALTER SYSTEM SET default_transaction_read_only = on")
        cluster.sql("SELECT pg_reload_conf()")
        deadline = time.time() + 10
        while time.time() < deadline and c.call("GET", "/healthz")[0] == 200:
            time.sleep(0.3)
        status, reply = c.call("GET", "/healthz")
        assert status == 503 and reply["status"] == "unavailable" and reply["reason"], reply
        cluster.sql("ALTER SYSTEM RESET default_transaction_read_only")
        cluster.sql("SELECT pg_reload_conf()")
        deadline = time.time() + 10
        while time.time() < deadline and c.call("GET", "/healthz")[0] != 200:
            time.sleep(0.3)
        assert c.call("GET", "/healthz") == (200, {"status": "ok"})
    finally:
        server.stop()
        cluster.stop()
        shutil.rmtree(cluster.dir, ignore_errors=True)


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
                    status, _ = touches_store(mine)
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
        # Every request answered: 503 (store_unavailable), none slower than the store's timeout
        # plus slack, and the server still running.
        assert during and all(status in (200, 503) for status, _ in during), during[:20]
        assert sum(1 for status, _ in during if status == 503) >= 4
        assert max(seconds for _, seconds in during) < 7, max(seconds for _, seconds in during)
        assert server.process.poll() is None
        status, reply = c.call("GET", "/healthz")
        assert status == 503 and reply["status"] == "unavailable" and "cannot read or write" in reply["reason"], reply
        status, reply = touches_store(c)
        assert status == 503 and reply["error"] == "store_unavailable"
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
        assert status == 503 and reply["error"] == "store_unavailable"
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


def test_two_instances_behind_the_shipped_nginx_keep_every_guarantee_under_load():
    """#57: two instances on one database behind Deploy/multi's nginx, sign-ins from 12 threads for
    a while: no ceremony is lost between the instances (every sign-in whose options one instance
    gave and the other verified succeeds), no challenge signs in twice (the same assertion sent
    twice at once, through both instances, signs in once; each one sent again afterwards is
    refused), and the database holds one used challenge per sign-in. Its figure (sign-ins
    a second through nginx, from this test's Python client) is printed in the summary; the load
    harness measures the pair properly (BENCHMARKS.md)."""
    from test_deploy import nginx_site
    from conftest import SUMMARY

    database = postgres_url()
    schema = database.rsplit("schema=", 1)[1]
    origin = "https://login.example.com"
    args = ["--database", database, "--rp-id", "example.com", "--origin", origin, *LIMITS]
    a = Server(args=args, env={"KEYFOB_MASTER_KEY": MASTER_KEY}).start()
    b = Server(args=args, env={"KEYFOB_MASTER_KEY": MASTER_KEY}).start()
    https, http = free_port(), free_port()
    # Every client here is 127.0.0.1, which the shipped hash on the client address would send to one
    # instance: round robin instead, so a ceremony's two requests meet different instances.
    work, conf = nginx_site("multi/nginx-upstream.conf", [
        ("upstream keyfob {\n    hash $remote_addr consistent;", "upstream keyfob {"),
        ("server 127.0.0.1:8081", f"server 127.0.0.1:{a.port}"), ("server 127.0.0.1:8082", f"server 127.0.0.1:{b.port}"),
        ("server 127.0.0.1:8091", f"server 127.0.0.1:{a.nip46_port}"), ("server 127.0.0.1:8092", f"server 127.0.0.1:{b.nip46_port}"),
        ("listen 443 ssl http2;", f"listen 127.0.0.1:{https} ssl http2;"), ("listen 80;", f"listen 127.0.0.1:{http};")])
    nginx = subprocess.Popen(["nginx", "-c", conf, "-g", "daemon off;"], stderr=subprocess.PIPE)
    base = f"https://127.0.0.1:{https}"
    try:
        c = Client(base, origin)
        deadline = time.time() + 10
        while True:
            try:
                assert c.call("GET", "/healthz") == (200, {"status": "ok"})
                break
            except OSError:
                assert time.time() < deadline
                time.sleep(0.1)
        people = []
        for i in range(24):
            key = SoftKey(origin, rp_id="example.com")
            status, reply = c.register(key, f"pair{i}", client=f"10.57.0.{i}")
            assert status == 200, reply
            people.append(key)
        lock = threading.Lock()
        signed, refused, twice, sent = [], [], [], []  # (person, body, token); unexpected; double-send outcomes; bodies
        stop = threading.Event()

        def sign_in_loop(i):
            mine, other = Client(base, origin, timeout=15), Client(base, origin, timeout=15)
            key, n = people[i], 0
            while not stop.is_set():
                n += 1
                status, options = mine.call("POST", "/generate-authentication-options", {})
                if status != 200:
                    with lock:
                        refused.append((status, options))
                    continue
                body = key.assertion(options)
                if n % 5 == 0:
                    # The same assertion twice at once, on two connections (so, through nginx's round
                    # robin, on both instances): one sign-in.
                    with concurrent.futures.ThreadPoolExecutor(2) as pair_pool:
                        outcomes = list(pair_pool.map(lambda cl: cl.call("POST", "/verify-authentication", body), (mine, other)))
                    with lock:
                        twice.append(sorted(status for status, _ in outcomes))
                        sent.append(body)
                        signed.extend((i, body, reply["token"]) for status, reply in outcomes if status == 200)
                    continue
                status, reply = mine.call("POST", "/verify-authentication", body)
                with lock:
                    sent.append(body)
                    if status == 200:
                        signed.append((i, body, reply["token"]))
                    else:
                        refused.append((status, reply))

        threads = [threading.Thread(target=sign_in_loop, args=(i,)) for i in range(12)]
        started = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(12)
        stop.set()
        for t in threads:
            t.join()
        seconds = time.monotonic() - started
        assert not refused, refused[:5]
        assert len(signed) >= 200, f"only {len(signed)} sign-ins"
        # Each double send signed in exactly once; the other was refused as a replay (its challenge
        # used) or, had the first committed before it read the passkey, by its counter.
        assert twice and all(statuses[0] == 200 and statuses[1] in (400, 409) for statuses in twice), twice
        # Each person's last sessions open on both instances (an account keeps its 50 newest: a
        # 51st sign-in ends the oldest by design); every assertion sent again is refused.
        kept = [token for person in range(12) for _, _, token in [x for x in signed if x[0] == person][-40:]]
        for address in (a, b):
            direct = Client(f"http://127.0.0.1:{address.port}", origin)
            for token in kept[::5]:
                assert direct.call("GET", "/session", token=token)[0] == 200
        for body in sent[::3]:
            status, reply = c.call("POST", "/verify-authentication", body)
            assert status in (400, 409) and reply["error"] in ("challenge_not_found", "counter_regression"), (status, reply)
        # The ceremonies crossed instances: nginx's log names both, for options and for sign-ins.
        served = [line.split() for line in open(os.path.join(work, "keyfob.access.log"))]
        for path in ("/generate-authentication-options", "/verify-authentication"):
            assert {f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"} <= {f[-1] for f in served if f[4] == path}, path
        # One used challenge a sign-in or refusal: the bodies sent, each one once (replays add none).
        used = subprocess.run(["psql", os.environ["KEYFOB_TEST_POSTGRES"], "-Atc", f"SELECT count(*) FROM {schema}.used_challenges"],
                              check=True, capture_output=True, text=True, env={**os.environ, "PGSSLMODE": "disable"}).stdout.strip()
        assert int(used) == len(sent), (used, len(sent))
        SUMMARY.append(f"two instances behind nginx: {len(signed)} sign-ins in {seconds:.1f} s "
                       f"({len(signed) / seconds:.0f}/s from 12 Python threads, debug or release as built), "
                       f"{len(twice)} double sends signed in once each")
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


class MixedLoad:
    """Sign-ups, sign-ins, `sign_event` and Polkadot approvals against one instance from several
    threads, each recording what the server acknowledged (a 2xx with its result) — and only that."""

    def __init__(self, server):
        self.server = server
        self.base = f"http://127.0.0.1:{server.port}"
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.sessions = []   # (person, token): a sign-up's or a sign-in's
        self.signatures = []  # (token, event id)
        self.approvals = []  # (token, Polkadot request id, signature)
        self.errors = []     # statuses other than 2xx and 503 (the database away): a test failure
        self.threads = []

    def client(self):
        return Client(self.base, ORIGIN, timeout=15)

    # Refusals a crash explains: a ceremony's challenge begun before it (challenges live in an
    # UNLOGGED table: a crash empties it, by design), a passkey counter raced by a retry.
    EXPECTED = {(400, "challenge_not_found"), (409, "counter_regression")}

    def note(self, status, reply):
        if status not in (200, 201, 202, 503) and (status, (reply or {}).get("error")) not in self.EXPECTED:
            with self.lock:
                self.errors.append((status, reply))

    def register(self, c, name, n):
        """A new person (from an address of its own), or None while the database is away."""
        key = SoftKey(ORIGIN)
        address = f"10.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}"
        status, options = c.call("GET", f"/generate-registration-options?username={name}", client=address)
        if status != 200:
            self.note(status, options)
            return None
        status, reply = c.call("POST", "/verify-registration", key.registration(options), client=address)
        self.note(status, reply)
        if status != 200:
            return None
        with self.lock:
            self.sessions.append((name, reply["token"]))
        return key, reply["token"]

    def sign_ups(self, i):
        c, n = self.client(), 0
        while not self.stop.is_set():
            n += 1
            self.register(c, f"up{i}x{n}", 1000 * i + n)

    def sign_ins(self, i):
        c, person, used, n = self.client(), None, 0, 0
        while not self.stop.is_set():
            # A person holds 50 sessions at most (the 51st ends the oldest by design): a fresh one every 40.
            if person is None or used == 40:
                n += 1
                person, used = self.register(c, f"in{i}x{n}", 100000 + 1000 * i + n), 0
                continue
            key, _ = person
            status, options = c.call("POST", "/generate-authentication-options", {}, client=f"10.200.{i}.1")
            if status != 200:
                self.note(status, options)
                continue
            status, reply = c.call("POST", "/verify-authentication", key.assertion(options), client=f"10.200.{i}.1")
            self.note(status, reply)
            if status == 200:
                used += 1
                with self.lock:
                    self.sessions.append((f"in{i}x{n}", reply["token"]))

    def signs(self, i, token):
        c, n = self.client(), 0
        while not self.stop.is_set():
            n += 1
            status, reply = c.call("POST", "/api/signer/sign_event", {"event": {"kind": 1, "content": f"note {i}.{n}"}}, token=token)
            self.note(status, reply)
            if status == 200:
                with self.lock:
                    self.signatures.append((token, reply["event"]["id"]))

    def polkadot(self, i, key, token, address):
        c, n = self.client(), 0
        seed = lambda msg_type, request: {  # noqa: E731
            "id": f"{i}.{n}", "msgType": msg_type, "origin": "dapp-request", "request": request, "url": "https://dapp.example/"}
        while not self.stop.is_set():
            n += 1
            message = {"address": address, "data": "0x" + os.urandom(16).hex(), "type": "bytes"}
            status, asked = c.call("POST", "/api/polkadot/message", seed("pub(bytes.sign)", message), token=token)
            if status != 202:
                self.note(status, asked)
                continue
            request_id = asked["pending"]["id"]
            status, options = c.call("POST", f"/api/polkadot/requests/{request_id}/challenge", {}, token=token)
            if status != 200:
                self.note(status, options)
                continue
            assertion = key.assertion(dict(options, challengeKey=""))["cred"]
            status, outcome = c.call("POST", f"/api/polkadot/requests/{request_id}/approve", {"assertion": assertion}, token=token)
            self.note(status, outcome)
            if status == 200:
                with self.lock:
                    self.approvals.append((token, request_id, outcome["result"]["signature"]))

    def start(self):
        c = self.client()
        signers = [self.register(c, f"signer{i}", 200000 + i) for i in range(3)]
        wallets = []
        for i in range(2):
            key, token = self.register(c, f"wallet{i}", 200100 + i)
            status, created = c.call("POST", "/api/polkadot/accounts", {"name": "Main", "network": 0}, token=token)
            assert status == 201, created
            status, _ = c.call("POST", "/api/polkadot/message", {"id": "1", "msgType": "pub(authorize.tab)", "origin": "dapp-request",
                                                                  "request": None, "url": "https://dapp.example/"}, token=token)
            assert status == 200
            wallets.append((key, token, created["address"]))
        self.threads = [threading.Thread(target=self.sign_ups, args=(i,)) for i in range(2)]
        self.threads += [threading.Thread(target=self.sign_ins, args=(i,)) for i in range(3)]
        self.threads += [threading.Thread(target=self.signs, args=(i, token)) for i, (_, token) in enumerate(signers)]
        self.threads += [threading.Thread(target=self.polkadot, args=(i, *wallet)) for i, wallet in enumerate(wallets)]
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)

    def lost(self):
        """Every acknowledged item that is not there now, by kind."""
        c = self.client()
        lost = {"sessions": [], "signatures": [], "approvals": []}
        for name, token in self.sessions:
            if c.call("GET", "/account/credentials", token=token)[0] != 200:
                lost["sessions"].append(name)
        histories = {}
        for token, event in self.signatures:
            if token not in histories:
                history, cursor = set(), ""
                while cursor is not None:
                    status, page = c.call("GET", f"/api/signer/history?limit=200&before={cursor}", token=token)
                    assert status == 200, page
                    history |= {entry["eventId"] for entry in page["entries"] if entry.get("eventId")}
                    cursor = page.get("next")
                histories[token] = history
            if event not in histories[token]:
                lost["signatures"].append(event)
        for token, request_id, signature in self.approvals:
            status, state = c.call("GET", f"/api/polkadot/requests/{request_id}", token=token)
            if status != 200 or state["state"] != "approved" or state["outcome"]["result"]["signature"] != signature:
                lost["approvals"].append(request_id)
        return lost


def crash_under_mixed_load(rounds):
    """PostgreSQL at its own durability defaults killed (`pg_ctl stop -m immediate`) `rounds` times
    under `MixedLoad` and started again each time: (the load, finished; whether keyfob is still
    running; what each kind acknowledged; what of it is lost). The e2e test and `make chaos` both."""
    cluster = Cluster(durability="full")
    cluster.start()
    server = instance(cluster.url, "--sign-rate", "1000000").start()
    load = MixedLoad(server)
    try:
        load.start()
        for _ in range(rounds):
            time.sleep(2.0)
            cluster.crash()
            time.sleep(0.5)
            cluster.start()
            deadline = time.time() + 30
            while time.time() < deadline and client(server).call("GET", "/healthz")[0] != 200:
                time.sleep(0.2)
        time.sleep(1.0)
        load.finish()
        alive = server.process.poll() is None
        counts = {kind: len(getattr(load, kind)) for kind in ("sessions", "signatures", "approvals")}
        return load, alive, counts, load.lost()
    finally:
        load.stop.set()
        server.stop()
        cluster.stop()
        shutil.rmtree(cluster.dir, ignore_errors=True)


def test_no_acknowledged_write_is_lost_when_postgres_crashes():
    """Acknowledged means committed: PostgreSQL at its own durability defaults is killed
    (`pg_ctl stop -m immediate`, no checkpoint) three times under mixed load — sign-ups, sign-ins,
    `sign_event`, Polkadot approvals — and started again. Afterwards every session a client was
    given opens, every signature answered has its audit entry, and every Polkadot approval answered
    is stored approved with the signature the client got. While the database is away, every answer
    is a 503 (`store_unavailable`): nothing is answered as done that was not."""
    load, alive, counts, lost = crash_under_mixed_load(3)
    assert alive, "keyfob exited"
    assert not load.errors, load.errors[:5]
    assert counts["sessions"] >= 50 and counts["signatures"] >= 30 and counts["approvals"] >= 5, counts
    print(f"acknowledged: {counts}; lost: { {kind: len(items) for kind, items in lost.items()} }")
    assert not any(lost.values()), f"acknowledged but lost after the crashes: {lost} (of {counts})"


def serving_after_an_outage(outage_seconds):
    """PostgreSQL stopped for `outage_seconds` while a client keeps asking, then started: the
    seconds from its start (pg_ctl -w: accepting connections) to the first 200, and the log."""
    cluster = Cluster()
    cluster.start()
    server = instance(cluster.url).start()
    stop = threading.Event()
    try:
        c = client(server)

        def ask():  # light load: calls keep failing, so the pool keeps retrying and backing off
            mine = Client(f"http://127.0.0.1:{server.port}", ORIGIN, timeout=15)
            while not stop.is_set():
                try:
                    touches_store(mine)
                except OSError:
                    pass
                time.sleep(0.2)

        assert touches_store(c)[0] == 200
        thread = threading.Thread(target=ask, daemon=True)
        thread.start()
        cluster.stop()
        time.sleep(outage_seconds)
        cluster.start()
        back = time.monotonic()
        while touches_store(c)[0] != 200:
            assert time.monotonic() - back < 90, "not serving 90 s after PostgreSQL's return"
            time.sleep(0.1)
        return time.monotonic() - back, server.logs()
    finally:
        stop.set()
        server.stop()
        subprocess.run([os.path.join(ROOT, "scripts", "postgres.sh"), "stop", cluster.dir], capture_output=True)
        shutil.rmtree(cluster.dir, ignore_errors=True)


def test_after_a_long_outage_keyfob_serves_within_seconds_of_postgres_return():
    """#55: postgres-nio's pool waits longer and longer between attempts (up to a minute); after
    30 s away it could wait several seconds more. Keyfob notices the outage, and a fresh pool that
    answers takes over as soon as PostgreSQL is back."""
    seconds, logs = serving_after_an_outage(30)
    assert seconds < 3, f"{seconds:.1f} s after PostgreSQL's return"
    assert "a fresh connection pool took over" in logs

