"""What sFlow from outside can move: a fault needs two distinct packets, so one sample
repeated (in one datagram, or in renumbered ones) or copied with a bit flipped anywhere
opens nothing, and is counted; two distinct samples of a genuinely wrong tag still open
the fault. The model is the real one over a grid; the reports come from the reference
data plane (cpc.refdp), not from the model under test."""

from __future__ import annotations

import random
import struct

import pytest

from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.tags import set_verify_rule
from pazzdata import workloads
from tester.emit import ReferenceEmitter, agent_of
from tester.plausible import bloom_explained, port_masks
from tester.sflow import encode_datagram, encode_flow_sample
from tests.tester.test_tester_e2e import all_ports, make_tester, traffic

SEQ_AT = 16  # the datagram sequence number, after version, address type, IPv4 agent, sub-agent


@pytest.fixture(scope="module")
def net():
    wl = workloads.generate("grid", 2, 40, rule_ids=True, acls=1)
    m = Model(wl.topo)
    m.add_entries(wl.entries, wl.groups)
    m.build()
    ref = RefDataPlane(wl.topo, wl.entries, wl.groups)
    deliveries = [
        (dl, h)
        for ingress, hdr in traffic(wl)
        for dl, h in ref.send_with_headers(ingress, hdr)
        if dl.kind == "egress" and dl.egress is not None
    ]
    return wl, m, deliveries


def _tester(tmp_path, wl, m):
    t, store = make_tester(tmp_path, wl, m, resolve_after=1e9)
    t.corroborate, t.corroborate_window = 2, 3600.0
    return t, store


def _hidden_rule(dl):
    """The delivery's tags as if the last switch had matched an entry the model lacks."""
    vr = set_verify_rule(dl.verify_rule, dl.egress[0], 0, 999, 0, 4242)
    return dl.verify_port, vr


def _renumbered(dg: bytes, seq: int) -> bytes:
    return dg[:SEQ_AT] + struct.pack(">I", seq) + dg[SEQ_AT + 4 :]


def test_one_sample_counts_once_however_it_is_repeated(tmp_path, net):
    wl, m, deliveries = net
    dl, h = deliveries[0]
    t, store = _tester(tmp_path, wl, m)
    try:
        em = ReferenceEmitter()
        bad = em.report_sample(dl.egress, h, *_hidden_rule(dl))
        s = encode_flow_sample(bad)
        agent = agent_of(dl.egress[0])
        t.process_datagram(encode_datagram(agent, 0, 1, 0, [s, s]), now=1.0)  # twice in one
        assert t.stats.fault_samples == 2 and store.faults() == []
        for seq in range(2, 12):  # ... and in renumbered datagrams
            t.process_datagram(encode_datagram(agent, 0, seq, 0, [s]), now=1.0 + seq)
        assert t.stats.fault_samples == 12 and store.faults() == []
        assert t.stats.samples_repeated == 11 and t.stats.duplicate_datagrams == 0
        # The agent's next sample of the same header: another packet, the fault opens.
        nxt = encode_flow_sample(em.report_sample(dl.egress, h, *_hidden_rule(dl)))
        t.process_datagram(encode_datagram(agent, 0, 12, 0, [nxt]), now=20.0)
        (row,) = store.faults()
        assert row.count == 2 and row.first_seen == 1.0
    finally:
        store.close()


@pytest.mark.parametrize("pick", [0, 1, 2])
def test_twenty_thousand_bit_flipped_copies_open_no_fault(tmp_path, net, pick):
    """20,000 copies of one valid report, each renumbered (as a forger can) and with one
    bit flipped anywhere in the datagram: none opens a fault; they are counted as
    malformed, implausible, repeated or of unknown interfaces. Then two distinct samples
    of a genuinely wrong tag open one."""
    wl, m, deliveries = net
    dl, h = deliveries[pick * (len(deliveries) // 3)]
    t, store = _tester(tmp_path, wl, m)
    rng = random.Random(pick)
    try:
        em = ReferenceEmitter()
        em.add_delivery(dl, h)
        (base,) = em.flush()
        t.process_datagram(base, now=1.0)
        assert t.stats.consistent == 1
        n, seq = 20_000, 1000
        for i in range(n):
            seq += 1
            copy = bytearray(_renumbered(base, seq))
            bit = rng.randrange(len(copy) * 8)
            copy[bit // 8] ^= 0x80 >> bit % 8
            t.process_datagram(bytes(copy), now=2.0 + i * 1e-3)
        st = t.stats
        assert store.faults() == [], store.faults()[0]
        # Every fault sample among the copies was held (one per fault it shows) or
        # counted as a repeat of the packet held: none corroborated another.
        faulty = st.fault_samples + st.hop_fault_samples
        assert faulty == st.uncorroborated + st.samples_repeated and faulty > 100
        assert st.samples_repeated > 100 and st.samples_implausible > 100 and st.malformed > 0
        # A genuine fault, once the held copies are out of the window: the same wrong tag
        # in two distinct packets of the agent.
        for now in (5000.0, 5001.0):
            em.add(dl.egress, h, *_hidden_rule(dl))
            for dg in em.flush():
                t.process_datagram(dg, now=now)
            assert len(store.faults()) == (now == 5001.0)
    finally:
        store.close()


@pytest.mark.parametrize(
    "what",
    ["ip_checksum", "verify_port_bit", "header_protocol", "input_elsewhere"],
)
def test_each_implausible_sample_is_counted_not_judged(tmp_path, net, what):
    """A report the model disallows for a reason a bit flip makes: counted, not judged."""
    wl, m, deliveries = net
    dl, h = deliveries[0]
    t, store = _tester(tmp_path, wl, m)
    t.corroborate = 1  # a plausible fault sample alone would open the fault
    em = ReferenceEmitter()
    s = em.report_sample(dl.egress, h, *_hidden_rule(dl))
    frame = bytearray(s.header)
    if what == "ip_checksum":
        frame[22 + 12] ^= 1  # ipv4_src's first byte (Verify shim: IPv4 from byte 22)
    elif what == "verify_port_bit":
        vp = dl.verify_port
        free = next(b for b in range(32) if not vp >> b & 1)
        frame[14:18] = struct.pack(">I", vp | 1 << free)
        # (that bit alone completes no port's three: checked against the network's ports)
        if bloom_explained(vp | 1 << free, port_masks(all_ports(wl.topo))):
            pytest.skip("the extra bit completes some port's Bloom bits")
    elif what == "header_protocol":
        s.header_protocol = 11  # IPv4, not Ethernet
    else:
        # One agent for two switches (as one OVS host for several bridges): the input
        # ifIndex is a port of the other one.
        other = next(d for d in wl.topo.switches if d != dl.egress[0])
        s.input = 9000
        t.ifmap.add(agent_of(dl.egress[0]), 9000, (other, wl.topo.ports_of(other)[0]), 0)
    s.header = bytes(frame)
    try:
        dg = encode_datagram(agent_of(dl.egress[0]), 0, 1, 0, [encode_flow_sample(s)])
        t.process_datagram(dg, now=1.0)
        assert t.stats.samples_implausible == 1 and store.faults() == []
        # The same report without the flaw opens the fault (corroborate 1).
        good = em.report_sample(dl.egress, h, *_hidden_rule(dl))
        dg = encode_datagram(agent_of(dl.egress[0]), 0, 2, 0, [encode_flow_sample(good)])
        t.process_datagram(dg, now=2.0)
        assert len(store.faults()) == 1 and t.stats.samples_implausible == 1
    finally:
        store.close()


def test_an_ipv4_header_with_options_is_checked_whole():
    """The checksum covers the whole IPv4 header, options included (IHL 6 here): a right
    one passes, one flipped bit in the options is caught."""
    import struct

    from tester.packet import ip_checksum
    from tester.plausible import _ipv4_problem

    ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x46, 0, 44, 1, 0, 64, 17, 0, bytes(4), bytes(4)))
    ip[12:20] = bytes([10, 0, 0, 1, 10, 0, 1, 5])
    ip += bytes([1, 1, 1, 0])  # options: NOP, NOP, NOP, end
    ip[10:12] = struct.pack(">H", ip_checksum(bytes(ip)))
    eth = bytes(6) + bytes([2, 0, 0, 0, 0, 1]) + b"\x08\x00"
    frame = eth + bytes(ip) + bytes(20)
    assert _ipv4_problem(frame) is None
    bad = bytearray(frame)
    bad[14 + 21] ^= 0x04  # a bit of the options
    assert _ipv4_problem(bytes(bad)) == "IPv4 header checksum wrong"
