"""Held connections behind a trusted proxy (#55): with nginx in front every connection comes from
127.0.0.1, so the per-address cap on live streams counts the forwarded client instead. Sixteen
streams of four accounts from one forwarded client fill its share; a fifth account from that
client is refused (429) while the same account from another client is served."""
import http.client
import urllib.parse

from conftest import Server
from softkey import Client, SoftKey

# The sign-ups come from one test address: its per-address budgets raised (they are not what is tested).
LIMITS = ["--trusted-proxy", "127.0.0.1", "--signups-per-hour", "10000", "--ip-rate", "100000", "--ip-burst", "100000",
          "--max-challenges-per-ip", "10000"]
DAPP = "https://dapp.example/"


def open_stream(server, token, forwarded):
    """A live account stream of a connected dapp, from `forwarded` behind the proxy: (connection, response)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", f"/api/polkadot/subscribe?id=1&url={urllib.parse.quote(DAPP, safe='')}",
                       headers={"Authorization": f"Bearer {token}", "X-Forwarded-For": forwarded})
    return connection, connection.getresponse()


def test_held_streams_are_counted_per_forwarded_client_behind_a_trusted_proxy():
    server = Server(args=LIMITS).start()
    held = []
    try:
        c = Client(f"http://127.0.0.1:{server.port}", server.url)
        tokens = []
        for i in range(5):
            status, reply = c.register(SoftKey(server.url), f"streamer{i}", client=f"10.9.0.{i}")
            assert status == 200, reply
            token = reply["token"]
            connect = {"id": "1", "msgType": "pub(authorize.tab)", "origin": "dapp", "request": None, "url": DAPP}
            status, reply = c.call("POST", "/api/polkadot/message", connect, token=token)
            assert status == 200, reply
            tokens.append(token)
        # Four accounts, four streams each (the per-session cap), all from one client behind the proxy.
        for token in tokens[:4]:
            for _ in range(4):
                connection, response = open_stream(server, token, "192.0.2.1")
                assert response.status == 200 and response.readline().startswith(b"data:")
                held.append(connection)
        connection, response = open_stream(server, tokens[4], "192.0.2.1")
        assert response.status == 429, response.read()
        connection.close()
        # Another client behind the same proxy is served: the proxy's own address is not what is counted.
        connection, response = open_stream(server, tokens[4], "192.0.2.2")
        assert response.status == 200 and response.readline().startswith(b"data:")
        held.append(connection)
    finally:
        for connection in held:
            connection.close()
        server.stop()
