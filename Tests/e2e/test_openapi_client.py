"""#58: a Swift client generated from docs/openapi.json by swift-openapi-generator
(Examples/KeyfobClient) signs up and signs in with a software passkey, then signs a note, against
a running Keyfob; the note's signature is checked with rust-nostr (nostr-sdk), not our code.
The package is built here (its generated code is committed, so only the runtime, the URLSession
transport and swift-crypto are compiled: about three minutes the first time)."""
import json
import os
import subprocess

from nostr_sdk import Event

from conftest import ROOT

PACKAGE = os.path.join(ROOT, "Examples", "KeyfobClient")


def test_the_generated_swift_client_signs_up_signs_in_and_signs_a_note(server):
    build = subprocess.run(["swift", "build", "--package-path", PACKAGE, "--product", "KeyfobClientExample"],
                           capture_output=True, text=True, timeout=1500)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    binary = os.path.join(PACKAGE, ".build", "debug", "KeyfobClientExample")
    run = subprocess.run([binary, f"http://127.0.0.1:{server.port}", server.url, "generated-client"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    reply = json.loads(run.stdout.strip().splitlines()[-1])
    assert reply["username"] == "generated-client"
    event = Event.from_json(json.dumps(reply["event"]))
    assert event.verify()  # rust-nostr: the id and the BIP-340 signature
    assert event.author().to_hex() == reply["pubkey"]
    assert event.content() == "hello from a generated client"
