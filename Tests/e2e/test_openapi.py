"""#58: the REST contract, checked by tools nobody here wrote. openapi-spec-validator accepts the
served document as OpenAPI 3.1; schemathesis runs every operation against a live Keyfob from it —
no server error, status codes, content types, headers and bodies as documented, schema-invalid
requests refused with a 4xx — with a bearer session made by the software passkey through its auth
hook (schemathesis_auth.py), so authenticated operations are exercised too. The number of
operations and test cases is printed (pytest -s)."""
import json
import os
import re
import subprocess
import sys
import urllib.request

from openapi_spec_validator import validate

from conftest import SUMMARY, Server

HERE = os.path.dirname(os.path.abspath(__file__))
LIMITS = ["--signups-per-hour", "1000000", "--ip-rate", "1000000", "--ip-burst", "1000000", "--max-challenges-per-ip", "1000000",
          "--sign-rate", "1000000"]
# Every check schemathesis has but positive_data_acceptance: a body the schema allows is not one
# Keyfob must accept (a random credential is schema-valid and never verifies; a challengeKey must
# be one Keyfob issued), so that check can only fail. The rest: no server error, status codes,
# content types, headers and bodies as documented, schema-invalid requests refused with a 4xx,
# undeclared methods 405, authentication enforced where the document says.
CHECKS = ["--checks", "all", "--exclude-checks", "positive_data_acceptance"]


def test_the_served_document_is_valid_openapi_3_1(server):
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/openapi.json") as r:
        document = json.load(r)
    validate(document)  # raises on anything 3.1 does not allow
    assert document["openapi"] == "3.1.0"
    with open(os.path.join(HERE, "..", "..", "docs", "openapi.json")) as f:
        assert json.load(f) == document
    # And both are what scripts/openapi.py writes (make openapi).
    check = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "scripts", "openapi.py"), "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


def test_schemathesis_finds_nothing_the_document_does_not_say():
    server = Server(args=LIMITS).start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        env = {**os.environ, "KEYFOB_SCHEMATHESIS_BASE": base, "KEYFOB_SCHEMATHESIS_ORIGIN": server.url,
               "SCHEMATHESIS_HOOKS": "schemathesis_auth", "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", "")}
        run = subprocess.run(
            [sys.executable, "-m", "schemathesis.cli", "run", f"{base}/openapi.json", "--url", base, *CHECKS,
             "--max-examples", os.environ.get("KEYFOB_SCHEMATHESIS_EXAMPLES", "12"), "--workers", "1", "--seed", "58",
             "--generation-deterministic", "--no-shrink", "--warnings", "off"],
            env=env, capture_output=True, text=True, timeout=900, cwd=server.data)  # its cache stays out of the repository
        summary = run.stdout[run.stdout.rfind("SUMMARY"):] if "SUMMARY" in run.stdout else run.stdout[-4000:]
        print(summary)
        tested = re.search(r"Tested: (\d+)", run.stdout)
        cases = re.search(r"(\d+) generated", run.stdout)
        SUMMARY.append(f"schemathesis: {tested and tested.group(1)} operations of docs/openapi.json, "
                       f"{cases and cases.group(1)} test cases, checks: all but positive_data_acceptance")
        assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-4000:]
        assert tested and int(tested.group(1)) >= 70
    finally:
        server.stop()
