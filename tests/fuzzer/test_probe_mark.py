"""Every frame the fuzzer sends is a marked probe (docs/verify-header.md, "The probe mark"):
fuzz probes, confirmation and corroboration copies, on the packet-out and the raw-socket
paths. The oracle for the shim is the byte layout of the contract, read by scapy."""

from __future__ import annotations

import asyncio

from scapy.layers.l2 import Ether

from cpc.fields import parse_header
from cpc.tags import VERIFY_ETHERTYPE_MARKED, VERIFY_PORT_INIT, VERIFY_RULE_INIT
from cpc.verify_layer import Verify, is_marked
from fuzzer.craft import Crafter, probe_seq
from fuzzer.engine import Fuzzer
from fuzzer.inject import (
    ByIngress,
    PacketOutInjector,
    QueuedPacketOut,
    RawSocketInjector,
    RecordingInjector,
    marked,
)
from tests.fuzzer.test_craft import _headers
from tests.fuzzer.test_engine import Clock, _model


def _fresh_marked(frame: bytes) -> bool:
    """scapy's reading: a Verify header with the mark, Verify_Port 0, Verify_Rule 1."""
    p = Ether(frame)
    return (
        is_marked(p)
        and p[Ether].type == VERIFY_ETHERTYPE_MARKED
        and (p[Verify].port, p[Verify].rule) == (VERIFY_PORT_INIT, VERIFY_RULE_INIT)
    )


def test_fuzz_confirmation_and_corroboration_probes_are_marked():
    wl, m = _model()
    clk = Clock()
    fz = Fuzzer(m, pairs=[((1, 5), (4, 5))], rate=10_000, burst=1000, clock=clk, seed=3)
    h = parse_header("nw_dst=10.0.1.7,tcp_dst=443")
    assert fz.confirm((1, 5), h, 5)
    assert fz.corroborate((1, 5), parse_header("nw_dst=10.0.1.9,udp_dst=53"), 10)
    inj = RecordingInjector()
    clk.t = 1.0
    n = fz.step(inj, max_probes=400)
    assert n == len(inj.frames) > 0
    assert fz.confirm_sent > 5  # confirmation and corroboration copies went out too
    seqs = set()
    for _, f in inj.frames:
        assert _fresh_marked(f), f.hex()
        seqs.add(probe_seq(f))
    assert None not in seqs and len(seqs) == n


def test_marked_puts_the_mark_on_any_frame():
    plain = Crafter()
    for i, h in enumerate(_headers(100, seed=7)):
        want = Crafter(mark=True).scapy_packet(h, i)
        got = marked(plain.frame(h, i))
        # the same frame; a short one keeps the padding its untagged form had
        assert got[: len(want)] == want and not got[len(want) :].strip(b"\0")
        assert marked(want) is want  # a marked frame is left alone
        tagged = Crafter(pretag=True).frame(h, i)
        assert marked(tagged) == want  # an unmarked shim gets the mark, tags kept
    odd = bytes(12) + bytes.fromhex("0820deadbeef1234") + bytes(40)
    assert marked(odd)[12:20] == bytes.fromhex("0821deadbeef1234")


class _Sock:
    def __init__(self):
        self.sent = []

    def send(self, b):
        self.sent.append(b)
        return len(b)

    def close(self):
        pass


def test_both_injection_paths_send_marked_probes():
    h = _headers(1)[0]
    plain, tagged = Crafter().frame(h, 9), Crafter(pretag=True).frame(h, 9)
    want = Crafter(mark=True).frame(h, 9)
    po = []
    inj = PacketOutInjector(lambda dpid, port, data: po.append(data))
    inj.inject((1, 5), [plain, tagged, want])
    sock = _Sock()
    raw = RawSocketInjector(sockets={(2, 5): sock})
    raw.inject((2, 5), [plain, tagged, want])
    got = []

    async def send(dpid, port, data):
        got.append(data)

    async def main():
        q = QueuedPacketOut(send)
        stop = asyncio.Event()
        task = asyncio.ensure_future(q.run(stop))
        ByIngress({(2, 5): raw}, q).inject((3, 5), [plain, tagged])
        await asyncio.sleep(0.05)
        stop.set()
        await task

    asyncio.run(main())
    for f in po + sock.sent + got:
        assert _fresh_marked(f)
    assert po == sock.sent == [want] * 3 and got == [want] * 2
