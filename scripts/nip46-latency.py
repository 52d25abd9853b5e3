#!/usr/bin/env python3
"""NIP-46 round trips through Keyfob, measured from a client's side: connect with a bunker URL,
then N requests one after another (each: seal with NIP-44, sign, send, wait for the answer, open
it). Prints p50/p90/p99 per method: `ping` (transport and bunker), `get_public_key`, and
`sign_event` (kind 1, after the first one is approved "until revoked").

    scripts/nip46-latency.py 'bunker://…&secret=…' [--relay ws://127.0.0.1:7777] [--count 500] \
        [--api http://127.0.0.1:8080 --token <session token>]

--relay picks the relay to talk through (default: the URL's first, Keyfob's own /nip46);
--api/--token approve the first sign_event through the API (else approve it in the browser).
Needs nostr-sdk and websocket-client (pip)."""
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
    parser.add_argument("--relay")
    parser.add_argument("--api")
    parser.add_argument("--token")
    args = parser.parse_args()
    url = urllib.parse.urlsplit(args.bunker_url)
    query = urllib.parse.parse_qs(url.query)
    signer = n.PublicKey.parse(url.netloc)
    keys = n.Keys.generate()
    ws = websocket.create_connection((args.relay or query["relay"][0]).replace("localhost", "127.0.0.1"), timeout=10)
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
            if frame[0] == "EVENT" and frame[2]["pubkey"] == signer.to_hex():
                answer = json.loads(n.nip44_decrypt(keys.secret_key(), signer, frame[2]["content"]))
                if answer["id"] != str(counter):
                    continue  # a relay that keeps ephemeral events may replay older answers
                if answer.get("result") == "auth_url":
                    approve(answer["error"])
                    continue
                return answer

    def approve(link):
        if not (args.api and args.token):
            print(f"approve the first sign_event at {link} (choose 'Until I revoke it')")
            ws.settimeout(300)
            return
        import urllib.request
        request_id = link.rsplit("/", 1)[1]
        call = urllib.request.Request(f"{args.api}/api/requests/{request_id}/approve", method="POST",
                                      data=json.dumps({"remember": "forever"}).encode(),
                                      headers={"Authorization": f"Bearer {args.token}", "Content-Type": "application/json"})
        urllib.request.urlopen(call).read()

    assert ask("connect", url.netloc, query["secret"][0])["result"] == "ack"
    note = json.dumps({"kind": 1, "content": "latency probe", "tags": []})
    assert "sig" in json.loads(ask("sign_event", note)["result"])  # the first one waits for approval
    for method, params in (("ping", ()), ("get_public_key", ()), ("sign_event", (note,))):
        times = []
        for _ in range(args.count):
            started = time.perf_counter()
            ask(method, *params)
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        print(f"{method:15s} n={len(times)} p50={statistics.median(times):.2f} ms "
              f"p90={times[int(len(times) * 0.9)]:.2f} ms p99={times[int(len(times) * 0.99)]:.2f} ms")


if __name__ == "__main__":
    main()
