"""Independent nostr checks for the browser tests: NIP-01 ids, BIP-340 verification and bech32,
written from the specs (BIP-340's reference algorithm) so they share no code with the server."""
import base64
import hashlib
import json

P = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEFFFFFC2F
N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
G = (0x79BE667EF9DCBBAC55A06295CE870B07029BFCDB2DCE28D959F2815B16F81798,
     0x483ADA7726A3C4655DA4FBFC0E1108A8FD17B448A68554199C47D08FFB10D4B8)


def _add(p1, p2):
    if p1 is None:
        return p2
    if p2 is None:
        return p1
    if p1[0] == p2[0] and p1[1] != p2[1]:
        return None
    if p1 == p2:
        lam = (3 * p1[0] * p1[0] * pow(2 * p1[1], P - 2, P)) % P
    else:
        lam = ((p2[1] - p1[1]) * pow(p2[0] - p1[0], P - 2, P)) % P
    x3 = (lam * lam - p1[0] - p2[0]) % P
    return (x3, (lam * (p1[0] - x3) - p1[1]) % P)


def _mul(point, n):
    result = None
    for i in range(256):
        if (n >> i) & 1:
            result = _add(result, point)
        point = _add(point, point)
    return result


def _tagged(tag, data):
    t = hashlib.sha256(tag.encode()).digest()
    return hashlib.sha256(t + t + data).digest()


def _lift_x(x):
    if x >= P:
        return None
    y_sq = (pow(x, 3, P) + 7) % P
    y = pow(y_sq, (P + 1) // 4, P)
    if pow(y, 2, P) != y_sq:
        return None
    return (x, y if y % 2 == 0 else P - y)


def schnorr_verify(msg: bytes, pubkey: bytes, sig: bytes) -> bool:
    point = _lift_x(int.from_bytes(pubkey, "big"))
    r, s = int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big")
    if point is None or r >= P or s >= N:
        return False
    e = int.from_bytes(_tagged("BIP0340/challenge", sig[:32] + pubkey + msg), "big") % N
    R = _add(_mul(G, s), _mul(point, N - e))
    return R is not None and R[1] % 2 == 0 and R[0] == r


def event_id(event) -> str:
    serialized = json.dumps([0, event["pubkey"], event["created_at"], event["kind"], event["tags"], event["content"]],
                            separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(serialized.encode()).hexdigest()


def verify_event(event) -> bool:
    return event_id(event) == event["id"] and schnorr_verify(
        bytes.fromhex(event["id"]), bytes.fromhex(event["pubkey"]), bytes.fromhex(event["sig"]))


_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def bech32_decode(text: str):
    hrp, _, data = text.lower().rpartition("1")
    values = [_CHARSET.index(c) for c in data]
    acc, bits, out = 0, 0, []
    for v in values[:-6]:
        acc = (acc << 5) | v
        bits += 5
        while bits >= 8:
            bits -= 8
            out.append((acc >> bits) & 0xFF)
    return hrp, bytes(out)


# --- WebAuthn receipts: ECDSA P-256 over (authenticatorData || SHA-256(clientDataJSON)), from FIPS 186-4.

P256 = dict(p=0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF,
            a=-3, n=0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551,
            G=(0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
               0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5))


def _p256_add(a, b):
    p = P256["p"]
    if a is None:
        return b
    if b is None:
        return a
    if a[0] == b[0] and (a[1] + b[1]) % p == 0:
        return None
    if a == b:
        lam = (3 * a[0] * a[0] + P256["a"]) * pow(2 * a[1], p - 2, p) % p
    else:
        lam = (b[1] - a[1]) * pow(b[0] - a[0], p - 2, p) % p
    x = (lam * lam - a[0] - b[0]) % p
    return (x, (lam * (a[0] - x) - a[1]) % p)


def _p256_mul(point, k):
    result = None
    while k:
        if k & 1:
            result = _p256_add(result, point)
        point = _p256_add(point, point)
        k >>= 1
    return result


def _der_signature(sig: bytes):
    assert sig[0] == 0x30
    i = 2
    values = []
    for _ in range(2):
        assert sig[i] == 0x02
        length = sig[i + 1]
        values.append(int.from_bytes(sig[i + 2:i + 2 + length], "big"))
        i += 2 + length
    return values


def _cbor_item(data, i):
    major, info = data[i] >> 5, data[i] & 0x1F
    i += 1
    if info < 24:
        value = info
    else:
        size = 1 << (info - 24)
        value = int.from_bytes(data[i:i + size], "big")
        i += size
    if major == 0:
        return value, i
    if major == 1:
        return -1 - value, i
    if major in (2, 3):
        return data[i:i + value], i + value
    if major == 5:
        out = {}
        for _ in range(value):
            key, i = _cbor_item(data, i)
            out[key], i = _cbor_item(data, i)
        return out, i
    raise ValueError("unsupported CBOR in a COSE key")


def verify_es256_receipt(receipt) -> bool:
    """A Keyfob approval receipt: the assertion's challenge is SHA-256 of the committed bytes, and its
    signature verifies with the credential's COSE public key."""
    def b64(text):
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    key, _ = _cbor_item(b64(receipt["publicKey"]), 0)
    if key.get(3) != -7:
        return False
    point = (int.from_bytes(key[-2], "big"), int.from_bytes(key[-3], "big"))
    assertion = receipt["assertion"]["response"]
    client_data = b64(assertion["clientDataJSON"])
    challenge = json.loads(client_data)["challenge"]
    if b64(challenge) != hashlib.sha256(receipt["committed"].encode()).digest():
        return False
    message = b64(assertion["authenticatorData"]) + hashlib.sha256(client_data).digest()
    r, s = _der_signature(b64(assertion["signature"]))
    n = P256["n"]
    if not (0 < r < n and 0 < s < n):
        return False
    e = int.from_bytes(hashlib.sha256(message).digest(), "big")
    w = pow(s, n - 2, n)
    R = _p256_add(_p256_mul(P256["G"], e * w % n), _p256_mul(point, r * w % n))
    return R is not None and R[0] % n == r
