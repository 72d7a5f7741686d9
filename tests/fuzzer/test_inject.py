"""The injectors that need no network: pre-tagging, the packet-out queue, routing by ingress."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzer.craft import Crafter
from fuzzer.inject import (
    ByIngress,
    PacketOutInjector,
    QueuedPacketOut,
    RecordingInjector,
    marked,
    pretagged,
)
from tests.fuzzer.test_craft import _headers


def test_pretagged_is_the_crafters_pretag():
    """scapy builds the pre-tagged frames (Crafter's own test): pretagged() must agree."""
    plain, tagged = Crafter(pretag=False), Crafter(pretag=True)
    for i, h in enumerate(_headers(200)):
        want = tagged.scapy_packet(h, i)
        got = pretagged(plain.frame(h, i))
        # the same frame; a short one keeps the 8 more bytes of padding its untagged form had
        assert got[: len(want)] == want and not got[len(want) :].strip(b"\0")
        assert pretagged(want) == want  # a present header is left alone


def test_packet_out_injector_pretags_and_marks():
    sent = []
    inj = PacketOutInjector(lambda dpid, port, data: sent.append((dpid, port, data)))
    h = _headers(1)[0]
    assert inj.inject((3, 5), [Crafter().frame(h, 7)]) == 1
    assert sent == [(3, 5, Crafter(mark=True).frame(h, 7))]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 2, 9]), st.integers(1, 20)), max_size=30))
def test_queued_packet_out(batches):
    """inject() only queues (the oldest go beyond the limit); run() sends from the event loop
    in the order injected, pre-tagged with the probe mark; a switch that is not connected (dpid 9: KeyError, as
    Proxy.send_packet_out raises) counts as failed."""
    limit = 64
    injected = [
        ((dpid, 1), bytes(14) + bytes([dpid, k, i]))
        for k, (dpid, n) in enumerate(batches)
        for i in range(n)
    ]

    async def main():
        got = []

        async def send(dpid, port, data):
            if dpid == 9:
                raise KeyError(f"switch {dpid:#x} is not connected")
            got.append(((dpid, port), data))

        inj = QueuedPacketOut(send, limit=limit)
        for (dpid, n), k in zip(batches, range(len(batches)), strict=True):
            frames = [f for (d, _), f in injected if d == dpid and f[15] == k]
            assert inj.inject((dpid, 1), frames) == n
        assert got == []  # nothing is sent before the loop runs the sender
        stop = asyncio.Event()
        task = asyncio.ensure_future(inj.run(stop))
        while inj.queue:
            await asyncio.sleep(0)
        stop.set()
        await task
        return inj, got

    inj, got = asyncio.run(main())
    kept = injected[-limit:]
    assert inj.dropped == len(injected) - len(kept)
    assert got == [(i, marked(f)) for i, f in kept if i[0] != 9]
    assert inj.failed == sum(1 for i, _ in kept if i[0] == 9)
    assert inj.sent == len(got)


def test_by_ingress_routes_and_falls_back():
    a, b = RecordingInjector(), RecordingInjector()
    inj = ByIngress({(1, 1): a}, default=b)
    inj.inject((1, 1), [b"x"])
    inj.inject((2, 1), [b"y"])
    assert a.frames == [((1, 1), b"x")] and b.frames == [((2, 1), b"y")]
