"""schemathesis's auth hook for test_openapi.py: each API operation gets an account of its own,
signed up with the software passkey (softkey.py), and its bearer session. An operation that ends
its session (sign out) answers 401 next; schemathesis then asks this hook again."""
import os
import secrets

import schemathesis

from softkey import Client, SoftKey


@schemathesis.auth(cache_by_key=lambda case, context: context.operation.label)
class KeyfobSession:
    def get(self, case, context):
        base, origin = os.environ["KEYFOB_SCHEMATHESIS_BASE"], os.environ["KEYFOB_SCHEMATHESIS_ORIGIN"]
        status, reply = Client(base, origin).register(SoftKey(origin), "st-" + secrets.token_hex(6))
        assert status == 200, reply
        return reply["token"]

    def set(self, case, data, context):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}
