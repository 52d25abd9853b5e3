#!/usr/bin/env python3
"""Writes Tests/Vectors/blake3/blake3-vectors.json with PyPI's `blake3` (the BLAKE3 team's Rust
implementation behind a Python binding), in the form of the team's own test_vectors.json: every
input length the team tests, the input the repeating bytes 0, 1, …, 250, 0, 1, …; the key
"whats the Elvish word for friend"; the derive_key context "BLAKE3 2019-12-27 16:29:52 test vectors
context"; 131 bytes of extended output per mode. KeyfobCryptoTests.BLAKE3Tests checks Keyfob's
BLAKE3 against it. Regenerate: python3 -m pip install blake3 && python3 scripts/vectors/blake3_vectors.py
"""
import json
import os

import blake3

KEY = b"whats the Elvish word for friend"
CONTEXT = "BLAKE3 2019-12-27 16:29:52 test vectors context"
LENGTHS = [0, 1, 1023, 1024, 1025, 2048, 2049, 3072, 3073, 4096, 4097, 5120, 5121, 6144, 6145, 7168, 7169, 8192, 8193,
           16384, 31744, 102400]
OUTPUT = 131


def case(length):
    data = bytes(i % 251 for i in range(length))
    return {
        "input_len": length,
        "hash": blake3.blake3(data).hexdigest(length=OUTPUT),
        "keyed_hash": blake3.blake3(data, key=KEY).hexdigest(length=OUTPUT),
        "derive_key": blake3.blake3(data, derive_key_context=CONTEXT).hexdigest(length=OUTPUT),
    }


def main():
    out = {
        "_source": f"generated with PyPI blake3 {blake3.__version__} by scripts/vectors/blake3_vectors.py, in the form of "
                   "BLAKE3-team/BLAKE3 test_vectors/test_vectors.json",
        "key": KEY.decode(), "context_string": CONTEXT, "cases": [case(n) for n in LENGTHS],
    }
    path = os.path.join(os.path.dirname(__file__), "..", "..", "Tests", "Vectors", "blake3", "blake3-vectors.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
