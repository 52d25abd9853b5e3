#!/usr/bin/env python3
"""NIP-46 round trips through Keyfob's built-in relay, measured from a client's side:
connect with a bunker URL, then N requests one after another (each: seal with NIP-44, sign,
send, wait for the answer, open it). Prints p50/p90/p99 per method.

    scripts/nip46-latency.py 'bunker://…?relay=ws://localhost:8090/nip46&secret=…' [--count 500]

Needs nostr-sdk and websocket-client (pip). Signing (`sign_event`) through the bunker is not in yet,
so this measures `ping` and `get_public_key`: the transport and the bunker's own work."""
import argparse
import json
import statistics
import time
import urllib.parse

import nostr_sdk as n
import websocket


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bunker_url")
    parser.add_argument("--count", type=int, default=500)
    args = parser.parse_args()
    url = urllib.parse.urlsplit(args.bunker_url)
    query = urllib.parse.parse_qs(url.query)
    signer = n.PublicKey.parse(url.netloc)
    keys = n.Keys.generate()
    ws = websocket.create_connection(query["relay"][0].replace("localhost", "127.0.0.1"), timeout=10)
    ws.send(json.dumps(["REQ", "r", {"kinds": [24133], "#p": [keys.public_key().to_hex()]}]))
    ws.recv()
    counter = 0

    def ask(method, *params):
        nonlocal counter
        counter += 1
        body = json.dumps({"id": str(counter), "method": method, "params": list(params)})
        content = n.nip44_encrypt(keys.secret_key(), signer, body, n.Nip44Version.V2)
        event = n.EventBuilder(n.Kind(24133), content).tags([n.Tag.public_key(signer)]).finalize(keys)
        ws.send(json.dumps(["EVENT", json.loads(event.as_json())]))
        while True:
            frame = json.loads(ws.recv())
            if frame[0] == "EVENT":
                return json.loads(n.nip44_decrypt(keys.secret_key(), signer, frame[2]["content"]))

    assert ask("connect", url.netloc, query["secret"][0])["result"] == "ack"
    for method in ("ping", "get_public_key"):
        times = []
        for _ in range(args.count):
            started = time.perf_counter()
            ask(method)
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        print(f"{method:15s} n={len(times)} p50={statistics.median(times):.2f} ms "
              f"p90={times[int(len(times) * 0.9)]:.2f} ms p99={times[int(len(times) * 0.99)]:.2f} ms")


if __name__ == "__main__":
    main()
