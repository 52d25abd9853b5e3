#!/usr/bin/env python3
"""The load harness (`make load`; BENCHMARKS.md has the figures and how to read them).

Starts each system on a fresh data folder, measures it with wrk, stops it, and goes on to the next,
all in this one invocation: Keyfob, the bare Hummingbird floor (Benchmarks/floor), nginx answering
from its config (the leanest server here: a yardstick for the client and the kernel), the Go and the
Python relying parties (Benchmarks/peers), and Keyfob again (this VM's speed moves within minutes:
the two Keyfob passes show by how much). Then one table, and the ratios — each computed only from
two figures measured in this invocation; a side that did not run prints "not measured" instead.

Every relying party gets the same work: USERS accounts registered with a software ES256 passkey,
then LOGINS assertions signed ahead of time (scripts/load/prepare.py) and each posted once by wrk
(scripts/load/replay.lua). A run with any non-2xx answer is invalid; the table says so.

Settings (environment): SECONDS_EACH (10), CONNECTIONS (32), USERS (1000), LOGINS (enough for
two login runs), SYSTEMS (keyfob,floor,nginx,go,python,keyfob), OUT (/tmp/keyfob-load), KEYFOB and
FLOOR (binaries; default .build/release/...), DATABASE (Keyfob's --database, e.g. postgres://…),
CREDENTIALS (filler passkeys seeded into Keyfob's SQLite first), PROFILE=1 (perf record -g of
each Keyfob run into OUT/<run>.perf.data; PROFILE=dwarf unwinds with DWARF, whole call chains), SMOKE=1 (CI: 3 s runs, few logins, no speed asserted),
ONLY (some runs only: post, get, get256, logins, logins256, options, sign_event; e.g. ONLY=logins),
WRK_PREFIX (a command wrk runs under, e.g. "nice -n -10" or "taskset -c 1": where a tail comes from).

Keyfob on PostgreSQL beside Keyfob on SQLite in the same run: SYSTEMS=keyfob,keyfob-on:postgres,keyfob
starts a throwaway PostgreSQL cluster (scripts/postgres.sh, fsync on) for the middle entry.
The PostgreSQL pass of issue #57: SYSTEMS=keyfob-on:postgres,go-on:postgres,keyfob-on:postgres — Keyfob,
the Go peer in its PostgreSQL mode (its own database on the same cluster), Keyfob again; each run
also samples the cluster's CPU, and the ratios print each target met or missed. Add pair-on:postgres for
two Keyfob instances on that cluster behind nginx (round robin), the scale-out's figure. Store URL
options after a ?: keyfob-on:postgres?pool_max=20&pool_min=2&keepalive=30 (docs/configuration.md).

Another build of Keyfob in the same run (before and after a change): SYSTEMS=keyfob-at:/tmp/keyfob-before,keyfob,
keyfob-at:/tmp/keyfob-before,keyfob measures the binary at that path as Keyfob (labelled with its file name);
go-at:PATH does the same for a Go peer built elsewhere (an earlier Benchmarks/peers/go).

What each of Keyfob's layers costs a request: SYSTEMS=floor,keyfob,keyfob-without:log,...,floor
measures the trivial requests of Keyfob started with the hidden `--bench-without LAYER` (log,
metrics, headers, files, guard; several joined by "+"); the table's CPU column is the server's own
CPU time per request.
"""
import base64
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SMOKE = bool(os.environ.get("SMOKE"))
SECONDS_EACH = int(os.environ.get("SECONDS_EACH", "3" if SMOKE else "10"))
CONNECTIONS = int(os.environ.get("CONNECTIONS", "32"))
USERS = int(os.environ.get("USERS", "20" if SMOKE else "1000"))
# Enough signed logins for two runs at up to 6,000 logins/s each (the best seen is ~5,700): a run
# that uses them all up says so. Those left over are live ceremonies Keyfob holds to the end (RSS).
LOGINS = int(os.environ.get("LOGINS", 2000 if SMOKE else SECONDS_EACH * 6000 * 2))
OUT = os.environ.get("OUT", "/tmp/keyfob-load")
BUILD = os.environ.get("BUILD", "release")
KEYFOB = os.environ.get("KEYFOB", os.path.join(ROOT, ".build", BUILD, "keyfob"))
FLOOR = os.environ.get("FLOOR", os.path.join(ROOT, ".build", BUILD, "keyfob-floor"))
SYSTEMS = os.environ.get("SYSTEMS", "keyfob,floor,nginx,go,python,keyfob").split(",")
# The pair: nginx at 18085 in front of two instances at 18086 and 18087 (NIP-46 at their port + 10).
PORTS = {"keyfob": 18080, "go": 18081, "python": 18082, "floor": 18083, "nginx": 18084, "pair": 18085}
HZ = os.sysconf("SC_CLK_TCK")

LOGIN, LOGIN_256, OPTIONS = "logins", "logins, 256 connections", "options"
POST_CEILING, GET_CEILING, SIGN = "trivial POST", "trivial GET", "sign_event"
GET_256 = "trivial GET, 256 connections"
# What each system is measured on, in order. sign_event before the logins: those start many
# sessions per user and the oldest (the tokens sign_event uses) end.
RUNS = {
    "keyfob": [POST_CEILING, SIGN, LOGIN, LOGIN_256, GET_CEILING, OPTIONS],
    # The bare app's GET at 256 connections: the stack's own tail, beside Keyfob's logins there.
    "floor": [POST_CEILING, GET_CEILING, GET_256],
    # nginx answering "ok" from its config: what a GET costs, and its tail at 256 connections,
    # in the leanest server this machine has (a yardstick for the client and kernel, not a peer).
    "nginx": [GET_CEILING, GET_256],
    "go": [LOGIN, LOGIN_256, OPTIONS],
    # Two Keyfob instances on one PostgreSQL database behind nginx (#57): every login's options and
    # verification meet instances at random (round robin), so a figure here is a scale-out's.
    "pair": [LOGIN, LOGIN_256, OPTIONS],
    "python": [LOGIN, LOGIN_256, OPTIONS],
}
# ONLY=logins,options (short names: post, get, get256, logins, logins256, options, sign_event) keeps only
# those runs, for a quick before-and-after of one change.
SHORT = {"post": POST_CEILING, "get": GET_CEILING, "get256": GET_256, "logins": LOGIN, "logins256": LOGIN_256, "options": OPTIONS,
         "sign_event": SIGN}
if os.environ.get("ONLY"):
    ONLY = [SHORT[name.strip()] for name in os.environ["ONLY"].split(",")]
    RUNS = {name: [run for run in runs if run in ONLY] for name, runs in RUNS.items()}
LABELS = {"keyfob": "Keyfob", "floor": "bare Hummingbird", "nginx": "nginx", "go": "Go peer", "python": "Python peer",
          "pair": "Keyfob ×2 behind nginx"}


def process_tree(pid):
    """pid and its descendants (uvicorn's workers)."""
    pids, frontier = [pid], [pid]
    while frontier:
        parent = frontier.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children") as f:
                children = [int(c) for c in f.read().split()]
        except OSError:
            children = []
        pids += children
        frontier += children
    return pids


def over_tree(pid, path, read):
    """The sum of read(text of /proc/<p>/<path>) over pid and its descendants (those gone count 0)."""
    total = 0
    for p in process_tree(pid):
        try:
            with open(f"/proc/{p}/{path}") as f:
                total += read(f.read())
        except (OSError, StopIteration):
            pass
    return total


def cpu_ticks(pid):
    def user_and_system(stat):
        fields = stat.rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    return over_tree(pid, "stat", user_and_system)


def cluster_ticks(folder):
    """CPU ticks a PostgreSQL cluster has spent: the postmaster's own and its exited children's
    (cutime, cstime), and each live backend's. Sampled around a run: PostgreSQL's share of it."""
    try:
        with open(os.path.join(folder, "data", "postmaster.pid")) as f:
            postmaster = int(f.readline())
        with open(f"/proc/{postmaster}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, ValueError):
        return 0
    exited_children = int(fields[13]) + int(fields[14])  # cutime + cstime
    return exited_children + cpu_ticks(postmaster)  # the postmaster and every live backend


def peak_rss_mb(pid):
    return over_tree(pid, "status", lambda text: next(int(l.split()[1]) for l in text.splitlines() if l.startswith("VmHWM"))) / 1024


class System:
    """One server this invocation starts, measures and stops."""

    def __init__(self, name, folder, without="", database=None, binary=None, cluster=None):
        self.name, self.folder, self.port, self.without, self.database = name, folder, PORTS[name], without, database
        self.cluster = cluster  # the PostgreSQL cluster's folder, when on one: its CPU is sampled too
        self.binary = binary  # another build (keyfob-at:, go-at:), or this checkout's
        self.url = f"http://127.0.0.1:{self.port}"
        self.origin = f"http://localhost:{self.port}"
        self.process = None
        os.makedirs(folder, exist_ok=True)

    def keyfob(self, port, data):
        """Keyfob's command line, its limits out of the way (they are not what is measured)."""
        url = self.database or os.environ.get("DATABASE")
        database = ["--database", url] if url else []
        return [self.binary or KEYFOB, "serve", "--port", str(port), "--data-dir", data, *database,
                "--origin", self.origin, "--public-dir", os.path.join(ROOT, "Public"), "--bench-echo",
                "--ip-rate", "100000000", "--ip-burst", "100000000", "--signups-per-hour", "100000000",
                "--trusted-proxy", "127.0.0.1", "--challenge-timeout", "600",
                "--max-live-challenges", "1000000", "--sign-rate", "100000000",
                *(["--bench-without", self.without.replace("+", ",")] if self.without else [])]

    def instances(self):
        """The pair's two instances' ports."""
        return [self.port + 1, self.port + 2] if self.name == "pair" else []

    def command(self):
        data = os.path.join(self.folder, "data")
        os.makedirs(data, exist_ok=True)
        if self.name == "keyfob":
            return self.keyfob(self.port, data), {}
        if self.name == "pair":
            # Deploy/multi/nginx-upstream.conf's proxying (keep-alive to the instances, the client's
            # address replaced, a failed instance skipped) without TLS, and round robin in place of
            # its hash on the client address: every wrk connection comes from 127.0.0.1. Both
            # instances share the database and a master key, as a deployment's do.
            config = os.path.join(data, "nginx.conf")
            temp = " ".join(f"{kind}_temp_path {os.path.join(data, kind)};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            upstream = " ".join(f"server 127.0.0.1:{port} max_fails=2 fail_timeout=10s;" for port in self.instances())
            with open(config, "w") as f:
                f.write(f"worker_processes 1; pid {os.path.join(data, 'nginx.pid')}; error_log stderr;\n"
                        "events { worker_connections 2048; }\n"
                        f"http {{ access_log off; {temp}\n"
                        f"  upstream keyfob {{ {upstream} keepalive 64; }}\n"
                        f"  server {{ listen 127.0.0.1:{self.port}; keepalive_requests 100000000;\n"
                        "    proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_set_header Host $host;\n"
                        "    proxy_set_header X-Forwarded-For $remote_addr; proxy_connect_timeout 2s;\n"
                        "    proxy_next_upstream error timeout http_502 http_503 http_504 non_idempotent; proxy_next_upstream_tries 2;\n"
                        "    location / { proxy_pass http://keyfob; } } }\n")
            parts = []
            for n, port in enumerate(self.instances()):
                folder = os.path.join(data, f"instance{n + 1}")
                os.makedirs(folder, exist_ok=True)
                parts.append(shlex.join(self.keyfob(port, folder)))
            parts.append(shlex.join([tool_path("nginx"), "-c", config, "-p", data, "-g", "daemon off;"]))
            # One process tree (its CPU is summed), stopped as one group.
            return ["sh", "-c", " & ".join(parts) + " & wait"], {"KEYFOB_MASTER_KEY": base64.b64encode(os.urandom(32)).decode()}
        if self.name == "floor":
            return [FLOOR, str(self.port)], {}
        if self.name == "nginx":
            config = os.path.join(self.folder, "nginx.conf")
            temp = " ".join(f"{kind}_temp_path {os.path.join(data, kind)};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
            with open(config, "w") as f:
                f.write(f"worker_processes {os.cpu_count()}; pid {os.path.join(data, 'nginx.pid')}; error_log stderr;\n"
                        "events { worker_connections 1024; }\n"
                        f"http {{ access_log off; {temp}\n"
                        f"  server {{ listen 127.0.0.1:{self.port}; keepalive_requests 100000000;\n"
                        '    location = /healthz { return 200 "ok"; } location = /bench/echo { return 200 "ok"; } } }\n')
            return [tool_path("nginx"), "-c", config, "-p", data, "-g", "daemon off;"], {}
        if self.name == "go":
            store = ["-postgres", self.database] if self.database else ["-db", os.path.join(data, "peer.sqlite")]
            return [self.binary or os.path.join(OUT, "peer-go"), "-listen", f"127.0.0.1:{self.port}", "-origin", self.origin,
                    *store], {}
        return [sys.executable, "-m", "uvicorn", "--app-dir", os.path.join(ROOT, "Benchmarks", "peers", "python"),
                "peer:app", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "2", "--log-level", "warning",
                "--no-access-log"], {"PEER_DB": os.path.join(data, "peer.sqlite"), "PEER_ORIGIN": self.origin}

    def start(self):
        argv, extra = self.command()
        self.log = open(os.path.join(self.folder, "server.log"), "ab")
        self.process = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **extra},
                                        start_new_session=True)
        waiting = [self.url] + [f"http://127.0.0.1:{port}" for port in self.instances()]
        for _ in range(300):
            if self.process.poll() is not None:
                raise SystemExit(f"{self.name} stopped at start-up; its log: {self.folder}/server.log")
            try:
                with urllib.request.urlopen(waiting[-1] + "/healthz", timeout=1):
                    waiting.pop()
                    if not waiting:
                        return
            except OSError:
                time.sleep(0.1)
        raise SystemExit(f"{self.name} did not answer /healthz; its log: {self.folder}/server.log")

    def stop(self):
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None


def wrk(system, run, connections, path, env, limit=None):
    """One wrk run; returns the figures, or None when wrk printed no result."""
    pid = system.process.pid
    file = os.path.join(system.folder, run.replace(" ", "_").replace(",", ""))
    perf = None
    if os.environ.get("PROFILE") and system.name == "keyfob":
        # PROFILE=dwarf: call graphs unwound from DWARF (Debian's libcrypto and libsqlite3 keep no
        # frame pointers, so -g alone loses who called them); larger files, a few seconds' worth.
        graph = ["--call-graph", "dwarf,16384", "-F", "299"] if os.environ["PROFILE"] == "dwarf" else ["-g", "-F", "999"]
        perf = subprocess.Popen(["perf", "record", "-e", "cpu-clock", *graph, "-p", str(pid), "-o",
                                 file + ".perf.data",
                                 "--", "sleep", str(SECONDS_EACH)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    before = cpu_ticks(pid)
    cluster_before = cluster_ticks(system.cluster) if system.cluster else 0
    command = os.environ.get("WRK_PREFIX", "").split() + [
        "wrk", "-t2", f"-c{connections}", "--timeout", "10s", f"-d{SECONDS_EACH}s", "--latency", "-s",
        os.path.join(HERE, "replay.lua"), system.url + path]
    output = subprocess.run(command,
                            env={**os.environ, **env}, capture_output=True, text=True).stdout
    after = cpu_ticks(pid)
    cluster_after = cluster_ticks(system.cluster) if system.cluster else 0
    if perf:
        perf.wait()
    with open(file + ".wrk.txt", "w") as f:
        f.write(output)
    line = next((l for l in output.splitlines() if l.startswith("RESULT")), None)
    if line is None:
        return None
    rps, p50, p99, p999, status, errors, duration = (float(x) for x in line.split()[1:])
    figure = {"rps": rps, "p50": p50, "p99": p99, "p999": p999, "bad": int(status + errors), "connections": connections,
              "cores": (after - before) / HZ / duration, "rss": peak_rss_mb(pid), "short": False,
              "database_cores": (cluster_after - cluster_before) / HZ / duration if system.cluster else None}
    if limit and rps * duration >= 0.98 * limit:
        figure["short"] = True  # used up its pre-signed logins before the time was over
    return figure


def measure(system, results, key):
    """Prepares `system`'s logins (relying parties), then runs each of its runs into results[key]."""
    runs = [POST_CEILING, GET_CEILING] if system.without else RUNS[system.name]
    half = LOGINS // 2
    prepared = bool({LOGIN, LOGIN_256, SIGN} & set(runs))
    if prepared:
        subprocess.run([sys.executable, os.path.join(HERE, "prepare.py"), system.url, "--origin", system.origin,
                        "--users", str(USERS), "--logins", str(LOGINS), "--out", system.folder], check=True)
        with open(os.path.join(system.folder, "logins.jsonl")) as f:
            lines = f.readlines()
        for name, part in (("logins-a.jsonl", lines[:half]), ("logins-b.jsonl", lines[half:])):
            with open(os.path.join(system.folder, name), "w") as f:
                f.writelines(part)
    echo = os.path.join(system.folder, "echo.jsonl")
    with open(echo, "w") as f:  # a body the size of a login
        f.write(lines[0] if prepared else json.dumps({"challengeKey": "x" * 22, "cred": {"id": "x" * 600}}) + "\n")
    sign = os.path.join(system.folder, "sign.jsonl")
    with open(sign, "w") as f:
        f.write('{"event":{"kind":1,"content":"load test note","tags":[]}}\n')
    folder = system.folder
    plans = {
        POST_CEILING: (CONNECTIONS, "/bench/echo", {"BODIES": echo}, None),
        GET_CEILING: (CONNECTIONS, "/bench/echo", {}, None),
        GET_256: (256, "/bench/echo", {}, None),
        SIGN: (CONNECTIONS, "/api/signer/sign_event", {"BODIES": sign, "TOKENS": os.path.join(folder, "tokens.txt")}, None),
        LOGIN: (CONNECTIONS, "/verify-authentication", {"BODIES": os.path.join(folder, "logins-a.jsonl"), "THREADS": "2"}, half),
        LOGIN_256: (256, "/verify-authentication", {"BODIES": os.path.join(folder, "logins-b.jsonl"), "THREADS": "2"}, LOGINS - half),
        # Options from many client addresses (X-Forwarded-For through the trusted proxy 127.0.0.1),
        # as a crowd's would be: Keyfob caps the unfinished ceremonies of one address.
        OPTIONS: (CONNECTIONS, "/generate-authentication-options", {"SPREAD": "1"}, None),
    }
    for run in runs:
        connections, path, env, limit = plans[run]
        figure = wrk(system, run, connections, path, env, limit)
        if figure is not None:
            results[(key, run)] = figure
            print(f"  {key:<17} {run:<24} {figure['rps']:>9,.0f}/s  p99 {figure['p99']:>7.1f} ms  "
                  f"non-2xx {figure['bad']}  cores {figure['cores']:.2f} ({cpu_us(figure):.0f} µs CPU a request"
                  + (f" + PostgreSQL's {database_us(figure):.0f} µs" if figure["database_cores"] is not None else "") + ")  "
                  f"peak {figure['rss']:.0f} MB"
                  + ("  (used up its logins: raise LOGINS)" if figure["short"] else ""), flush=True)


def start_postgres():
    """A throwaway cluster with fsync on (the durability of SQLite's synchronous=NORMAL: see BENCHMARKS.md)."""
    folder = os.path.join(OUT, "postgres")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run([os.path.join(ROOT, "scripts", "postgres.sh"), "start", folder, str(port)],
                   env={**os.environ, "POSTGRES_FSYNC": "on"}, check=True)
    return folder, port


def build_go_peer():
    target = os.path.join(OUT, "peer-go")
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": "/usr/share/gocode", "GOCACHE": os.path.join(OUT, "go-cache")}
    subprocess.run(["go", "build", "-o", target, "."], cwd=os.path.join(ROOT, "Benchmarks", "peers", "go"), env=env, check=True)


def ecdsa_verify_speed():
    """`openssl speed ecdsap256` on one core, now: µs a P-256 verify, or None (no openssl)."""
    if SMOKE or shutil.which("openssl") is None:
        return None
    output = subprocess.run(["openssl", "speed", "-seconds", "3", "ecdsap256"], capture_output=True, text=True).stdout
    line = next((l for l in output.splitlines() if "nistp256" in l and "ecdsa" in l.lower()), None)
    try:
        return 1e6 / float(line.split()[-1]) if line else None
    except ValueError:
        return None


def tool_path(name):
    """Where a command is: on PATH, or in the sbin folders a user's PATH may leave out (nginx)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def cpu_us(figure):
    """The server's CPU time a request in a run, in µs."""
    return 1e6 * figure["cores"] / max(figure["rps"], 1)


def database_us(figure):
    """PostgreSQL's CPU time a request in a run, in µs (0 off PostgreSQL)."""
    return 1e6 * (figure.get("database_cores") or 0) / max(figure["rps"], 1)


def table(results, keys):
    runs = [POST_CEILING, GET_CEILING, GET_256, LOGIN, LOGIN_256, OPTIONS, SIGN]
    runs = [r for r in runs if any(run == r for (_, run) in results)]
    lines = ["| system (requests/s, p99, server CPU a request) | " + " | ".join(runs) + " | peak RSS |",
             "|---" * (len(runs) + 2) + "|"]
    for key in keys:
        cells = []
        for run in runs:
            f = results.get((key, run))
            if f is None:
                cells.append("—")
            else:
                cells.append(f"{f['rps']:,.0f}/s, p99 {f['p99']:.1f} ms, {cpu_us(f):.0f} µs"
                             + (f", **{f['bad']} non-2xx: invalid**" if f["bad"] else "")
                             + (" (logins ran out)" if f["short"] else ""))
        peak = max((f["rss"] for (k, _), f in results.items() if k == key), default=0)
        lines.append(f"| {key} | " + " | ".join(cells) + f" | {peak:.0f} MB |")
    return lines


def tail(key, run, results):
    """A run's p99 over its mean. wrk's connections each wait for their answer, so the mean wait is
    connections / throughput (Little's law) whatever the server does: the p99 over that mean is
    what scheduling adds, the server's and the machine's (nginx shows the machine's)."""
    f = results[(key, run)]
    if f["short"]:
        return f"{key} {run}: ran out of logins before the end (no mean)"
    mean = 1000 * f["connections"] / max(f["rps"], 1)
    return f"{key} {run}: mean {mean:.0f} ms ({f['connections']} / {f['rps']:,.0f}/s), p99 {f['p99']:.0f} ms = {f['p99'] / mean:.1f}× the mean"


def ratios(results, keys):
    """Each ratio from two figures of this invocation, for every Keyfob pass; a missing side says so."""
    keyfob_keys = [k for k in keys if k in ("Keyfob", "Keyfob (again)")]
    # Issue #46's targets: logins and a complete sign-in ≥ 1.25× the Go peer, options ≥ 0.8× the
    # bare app's trivial GET (Hummingbird stays; its own floor is the yardstick), p99 at 256
    # connections ≤ 100 ms, RSS ≤ 150 MB. The rest are shown for what they tell.
    checks = [
        ("logins, Keyfob / Go peer", LOGIN, "Go peer", LOGIN, 1.25),
        ("options, Keyfob / bare Hummingbird's trivial GET", OPTIONS, "bare Hummingbird", GET_CEILING, 0.8),
        ("options, Keyfob / Go peer", OPTIONS, "Go peer", OPTIONS, None),
        ("logins, Keyfob / Python peer", LOGIN, "Python peer", LOGIN, None),
        ("trivial POST, Keyfob / bare Hummingbird", POST_CEILING, "bare Hummingbird", POST_CEILING, None),
        ("trivial GET, Keyfob / bare Hummingbird", GET_CEILING, "bare Hummingbird", GET_CEILING, None),
        ("sign_event / Keyfob's logins", SIGN, None, LOGIN, None),
        ("logins, 256 / 32 connections", LOGIN_256, None, LOGIN, None),
    ]
    lines = []
    # Keyfob runs first and last and the others between: the VM's speed drifts within a run, so
    # the mean of the two passes is the fairest figure to set beside the others.
    mean_key = None
    if len(keyfob_keys) == 2:
        mean_key = "Keyfob (mean of both passes)"
        for run in RUNS["keyfob"]:
            a, b = results.get((keyfob_keys[0], run)), results.get((keyfob_keys[1], run))
            if a and b:
                results[(mean_key, run)] = {"rps": (a["rps"] + b["rps"]) / 2, "bad": a["bad"] + b["bad"]}
    for label, run, other, other_run, target in checks:
        parts = []
        for k in keyfob_keys + ([mean_key] if mean_key else []):
            a, b = results.get((k, run)), results.get((other or k, other_run))
            if a is None or b is None or not b["rps"]:
                parts.append(f"{k}: not measured in this run, no ratio")
            elif a["bad"] or b["bad"]:
                parts.append(f"{k}: a side had non-2xx answers, no ratio")
            else:
                value = a["rps"] / b["rps"]
                verdict = "" if target is None else (" (met)" if value >= target else " (missed)")
                parts.append(f"{k}: {value:.2f}×{verdict}")
        if not parts:
            parts.append("Keyfob not measured in this run, no ratio")
        goal = "" if target is None else f" — target ≥ {target}×"
        lines.append(f"- {label}{goal}: " + "; ".join(parts))
    # A complete sign-in is an options request and a verification: its CPU is the sum of the two
    # runs' CPU a request, and the ratio is the Go peer's over Keyfob's (what a core serves).
    for k in keyfob_keys:
        mine = [results.get((k, OPTIONS)), results.get((k, LOGIN))]
        peer = [results.get(("Go peer", OPTIONS)), results.get(("Go peer", LOGIN))]
        if not all(mine + peer) or any(f["bad"] for f in mine + peer):
            lines.append(f"- a complete sign-in's CPU (options + verify), Go peer / {k} — target ≥ 1.25×: not measured in this run, no ratio")
            continue
        theirs, ours = sum(map(cpu_us, peer)), sum(map(cpu_us, mine))
        value = theirs / ours
        lines.append(f"- a complete sign-in's CPU (options + verify), Go peer / {k} — target ≥ 1.25×: "
                     f"{theirs:.0f} / {ours:.0f} µs = {value:.2f}× ({'met' if value >= 1.25 else 'missed'})")
    # Another build beside this one (keyfob-at:PATH): each run, this build over that one, pass by pass.
    others = sorted({k.replace(" (again)", "") for k in keys if k.startswith("Keyfob (") and k != "Keyfob (again)"})
    for other in others:
        for run in RUNS["keyfob"]:
            pairs = [(results.get((mine, run)), results.get((theirs, run)))
                     for mine, theirs in ((keyfob_keys[0] if keyfob_keys else None, other), (keyfob_keys[-1] if keyfob_keys else None, other + " (again)"))]
            values = [f"{a['rps'] / b['rps']:.2f}×" for a, b in pairs if a and b and b["rps"] and not a["bad"] and not b["bad"]]
            if values:
                lines.append(f"- {run}, this build / {other[len('Keyfob ('):-1]}: " + ", ".join(values))
    # Issue #57's targets, on one PostgreSQL cluster: Keyfob's logins ≥ 1.25× the Go peer's with
    # Keyfob's + PostgreSQL's CPU a login ≤ the Go peer's + its PostgreSQL's, options ≥ 2×.
    pg_keys = [k for k in keys if k.startswith("Keyfob on postgres")]
    go_pg = "Go peer on postgres"
    for k in pg_keys:
        for run, target in ((LOGIN, 1.25), (OPTIONS, 2.0)):
            a, b = results.get((k, run)), results.get((go_pg, run))
            if not a or not b or a["bad"] or b["bad"] or not b["rps"]:
                lines.append(f"- {run}, {k} / {go_pg} — target ≥ {target}×: not measured in this run, no ratio")
                continue
            value = a["rps"] / b["rps"]
            lines.append(f"- {run}, {k} / {go_pg} — target ≥ {target}×: {value:.2f}× ({'met' if value >= target else 'missed'})")
        a, b = results.get((k, LOGIN)), results.get((go_pg, LOGIN))
        if a and b and not a["bad"] and not b["bad"]:
            mine, theirs = cpu_us(a) + database_us(a), cpu_us(b) + database_us(b)
            lines.append(f"- CPU a login, {k} ({cpu_us(a):.0f} + PostgreSQL {database_us(a):.0f} µs) against {go_pg} "
                         f"({cpu_us(b):.0f} + {database_us(b):.0f} µs) — target ≤: {mine:.0f} / {theirs:.0f} µs "
                         f"({'met' if mine <= theirs else 'missed'})")
    # Two instances behind nginx on the same cluster (no target: on two cores they share the
    # machine with nginx, PostgreSQL and wrk; the figure says what the scale-out costs here).
    for k in [k for k in keys if k.startswith(LABELS["pair"])]:
        for run in (LOGIN, OPTIONS):
            a = results.get((k, run))
            singles = [results.get((p, run)) for p in pg_keys]
            singles = [f for f in singles if f and not f["bad"]]
            if a and not a["bad"] and singles:
                lines.append(f"- {run}, {k} / one Keyfob on postgres (no target): {a['rps'] / (sum(f['rps'] for f in singles) / len(singles)):.2f}× "
                             f"({cpu_us(a):.0f} µs CPU a request in both instances and nginx, + PostgreSQL {database_us(a):.0f} µs)")
    if ("Keyfob on postgres", LOGIN) in results:
        pg = results[("Keyfob on postgres", LOGIN)]
        for k in keyfob_keys:
            if (k, LOGIN) in results:
                lines.append(f"- logins, Keyfob on PostgreSQL / {k} on SQLite (no target): "
                             f"{pg['rps'] / results[(k, LOGIN)]['rps']:.2f}×")
    for k in keyfob_keys:
        for run, limit in ((LOGIN, 25), (LOGIN_256, 100)):
            f = results.get((k, run))
            if f:
                lines.append(f"- {k} {run} p99: {f['p99']:.1f} ms (target ≤ {limit} ms: {'met' if f['p99'] <= limit else 'missed'})")
        if results.get((k, LOGIN_256)):
            beside = [tail(other, run, results) for other, run in (("bare Hummingbird", GET_256), ("nginx", GET_256), ("Go peer", LOGIN_256))
                      if results.get((other, run))]
            lines.append(f"  - {tail(k, LOGIN_256, results)}" + (f"; beside it, {'; '.join(beside)}" if beside else ""))
        peak = max((f["rss"] for (key, _), f in results.items() if key == k), default=None)
        if peak:
            lines.append(f"- {k} peak RSS: {peak:.0f} MB (target ≤ 150 MB: {'met' if peak <= 150 else 'missed'})")
    return lines


def main():
    names = {entry.partition("-without:")[0].partition("-on:")[0].partition("-at:")[0] for entry in SYSTEMS}
    for tool in ("wrk",) + (("go",) if "go" in names else ()) + (("nginx",) if {"nginx", "pair"} & names else ()):
        if tool_path(tool) is None:
            raise SystemExit(f"{tool} is not installed: scripts/install-deps.sh --test installs what the harness needs")
    for path in [KEYFOB] * bool({"keyfob", "pair"} & names) + [FLOOR] * ("floor" in names):
        if not os.access(path, os.X_OK):
            raise SystemExit(f"no {path}: `make load` builds it (swift build -c {BUILD} --product {os.path.basename(path)})")
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    if "go" in names:
        build_go_peer()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"== {started}: {', '.join(SYSTEMS)}; each run {SECONDS_EACH} s, {CONNECTIONS} connections "
          f"(and 256), 2 wrk threads on the same machine ==", flush=True)
    results, keys, seen = {}, [], {}
    verify_speeds = [ecdsa_verify_speed()]
    cluster = None
    for entry in SYSTEMS:
        name, _, without = entry.partition("-without:")
        name, _, on = name.partition("-on:")
        on, _, options = on.partition("?")  # postgres?pool_max=4&keepalive=0: options for the store URL
        name, _, binary = name.partition("-at:")
        if binary and not os.access(binary, os.X_OK):
            raise SystemExit(f"no {LABELS[name]} binary at {binary}")
        seen[entry] = seen.get(entry, 0) + 1
        key = LABELS[name] + (f" on {on}" if on else "") + (f" ({options})" if options else "") \
            + (f" without {without}" if without else "") \
            + (f" ({os.path.basename(binary)})" if binary else "") + (" (again)" if seen[entry] == 2 else f" (pass {seen[entry]})" if seen[entry] > 2 else "")
        database = None
        if on == "postgres":
            cluster = cluster or start_postgres()
            if name == "go":  # a database of its own (lib/pq takes no schema)
                subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(cluster[1]), "-U", "keyfob", "-d", "keyfob_test", "-qc",
                                f"CREATE DATABASE peer_go_{len(keys)}"], check=True, env={**os.environ, "PGSSLMODE": "disable"})
                database = f"postgres://keyfob@127.0.0.1:{cluster[1]}/peer_go_{len(keys)}?sslmode=disable"
            else:
                database = f"postgres://keyfob@127.0.0.1:{cluster[1]}/keyfob_test?schema=load{len(keys)}" \
                    + (f"&{options}" if options else "")
        folder = "".join("_" if c in ":/?&=" else c for c in entry)
        system = System(name, os.path.join(OUT, f"{folder}-{seen[entry]}"), without, database,
                        binary or None, cluster[0] if on == "postgres" else None)
        try:
            system.start()
            if name == "keyfob" and int(os.environ.get("CREDENTIALS", "0")) > 0:
                system.stop()
                subprocess.run([sys.executable, os.path.join(HERE, "seed.py"), os.path.join(system.folder, "data", "keyfob.sqlite"),
                                os.environ["CREDENTIALS"]], check=True)
                system.start()
            measure(system, results, key)
        except BaseException:
            if cluster:
                subprocess.run([os.path.join(ROOT, "scripts", "postgres.sh"), "stop", cluster[0]], check=False)
            raise
        finally:
            system.stop()
        keys.append(key)
    if cluster:
        subprocess.run([os.path.join(ROOT, "scripts", "postgres.sh"), "stop", cluster[0]], check=False)
    report = [f"Same-run table, {started}, {os.cpu_count()} cores, {SECONDS_EACH} s per run, "
              f"{USERS} accounts, {CONNECTIONS} connections unless named:", ""]
    verify_speeds.append(ecdsa_verify_speed())
    report += table(results, keys) + ["", "Ratios (both sides from this invocation):"] + ratios(results, keys)
    if all(verify_speeds):
        report.append(f"- `openssl speed ecdsap256` before and after: {verify_speeds[0]:.0f} and {verify_speeds[1]:.0f} µs a verify on one core")
        for k in [k for k in keys if k.startswith("Keyfob")]:
            f = results.get((k, LOGIN))
            if f and f["rps"]:
                login = cpu_us(f)
                report.append(f"  - that verify is {100 * sum(verify_speeds) / 2 / login:.0f}% of {k}'s {login:.0f} µs CPU a login")
    if SMOKE:
        report.append("SMOKE run (debug build, few logins, 3 s): it shows the harness works; no figure here is a measurement.")
    invalid = [f"{k} {r}" for (k, r), f in results.items() if f["bad"]]
    if invalid:
        report.append(f"INVALID runs (non-2xx answers): {', '.join(invalid)}")
    print("\n" + "\n".join(report))
    with open(os.path.join(OUT, "summary.md"), "w") as f:
        f.write("\n".join(report) + "\n")
    missing = [f"{LABELS[n]} {r}" for n in names for r in RUNS[n]
               if not any(k.startswith(LABELS[n]) and run == r for (k, run) in results)
               and any(entry == n for entry in SYSTEMS)]
    if invalid or missing:
        if missing:
            print(f"no result from: {', '.join(missing)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
