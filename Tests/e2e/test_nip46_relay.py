"""The built-in NIP-46 relay (ws://…/nip46, issue #9) with real third-party software: rust-nostr's
Python binding (`nostr-sdk` on PyPI) as two clients — one subscribes to messages p-tagged to its
key, the other publishes one; anything but kind 24133 is refused with a reason."""
import asyncio
from datetime import timedelta

import nostr_sdk as n


def test_rust_nostr_clients_exchange_a_nip46_message_through_keyfob(server):
    async def exchange():
        url = n.RelayUrl.parse(f"ws://127.0.0.1:{server.nip46_port}/nip46")
        sender, signer = n.Keys.generate(), n.Keys.generate()
        publisher, subscriber = n.Client(), n.Client()
        for client in (publisher, subscriber):
            await client.add_relay(url)
            await client.connect(timedelta(seconds=5))
        wanted = n.Filter().kind(n.Kind(24133)).pubkey(signer.public_key())
        stream = await subscriber.stream_events(n.ReqTarget.auto([wanted]), timeout=timedelta(seconds=10),
                                                policy=n.ReqExitPolicy.WAIT_FOR_EVENTS_AFTER_EOSE(1))
        await asyncio.sleep(0.3)  # the REQ is in before the message goes out: nothing is stored
        message = n.EventBuilder(n.Kind(24133), "sealed request").tags([n.Tag.public_key(signer.public_key())]).finalize(sender)
        sent = await publisher.send_event(message)
        note = n.EventBuilder(n.Kind(1), "hello").finalize(sender)
        refused = await publisher.send_event(note)
        item = await stream.next()
        for client in (publisher, subscriber):
            await client.shutdown()
        return message, sent, refused, item

    message, sent, refused, item = asyncio.run(exchange())
    assert [str(u) for u in sent.success] and not sent.failed
    assert not refused.success
    assert list(refused.failed.values()) == ["blocked: this relay carries NIP-46 messages (kind 24133) only"]
    assert item is not None and item.event is not None
    assert item.event.as_json() == message.as_json()
