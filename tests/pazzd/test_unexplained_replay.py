"""A fault's first sample that no ingress explains (Type-a), from production traffic: the
tester hands its Verify_Port to pazzd, which has the fuzzer replay the header from the
edge ports whose Bloom bits it carries (pazzd.faults.FaultEvents.unexplained), at most
MAX_REPLAY_INGRESSES of them. The tester is the real one, fed a real sFlow datagram."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from cpc.tags import VERIFY_PORT_INIT, VERIFY_RULE_INIT, port_bits, set_verify_port
from pazzd.faults import MAX_REPLAY_INGRESSES, FaultEvents
from pazzd.workers import _Handler
from tester.emit import ReferenceEmitter
from tester.remote import THRIFT, Outbox

from .test_probes import two_switches

HDR = {"eth_type": 0x0800, "ipv4_dst": 0x0A000909, "ipv4_src": 0x0B000001, "ip_proto": 6,
       "tp_src": 1234, "tp_dst": 22}  # fmt: skip


def _is_hdr(h: dict) -> bool:
    return all(h.get(k) == v for k, v in HDR.items())


class Fuzzer:
    def __init__(self, probe_from=None):
        self.sent = []
        self.probe_from = probe_from  # the ingress of a recent probe of HDR, if any

    def sender(self, hdr):
        return self.probe_from if _is_hdr(hdr) else None

    def corroborate(self, ingress, hdr, sampling):
        self.sent.append((ingress, dict(hdr), sampling))


def _events(net, fuzzer):
    ev = FaultEvents(net.tester.store, None, None, None, net.topo.edge_ports())
    ev.fuzzer, ev.sampling_rate = fuzzer, 1
    net.tester.corroborate = 2
    net.tester.on_suspect = ev.suspect
    net.tester.on_unexplained = ev.unexplained
    return ev


def _report(net, egress, vport):
    em = ReferenceEmitter(ovs_marking=True)
    em.add(egress, HDR, vport, VERIFY_RULE_INIT ^ 0x1234)
    for dg in em.flush():
        net.tester.process_datagram(dg, now=net.clock())


def test_an_unexplained_sample_is_replayed_from_where_its_bloom_filter_says():
    """The model sends 10.0.9.9 out s1:2 from everywhere: at s2:2 no ingress explains it.
    It came in at s1:1 and crossed s2:1 (its Verify_Port): replayed from s1:1."""
    net = two_switches()
    fz = Fuzzer()
    ev = _events(net, fz)
    vport = set_verify_port(set_verify_port(VERIFY_PORT_INIT, 1, 1), 2, 1)
    _report(net, (2, 2), vport)
    ings = [i for i, _, _ in fz.sent]
    assert (1, 1) in ings and (2, 2) not in ings  # not from the exit it was seen at
    for ing in ings:  # the oracle: the ingress's bits are all in the sample's filter
        assert vport & port_bits(*ing) == port_bits(*ing)
    assert len(ings) <= MAX_REPLAY_INGRESSES and ev.replays == len(ings)
    assert all(_is_hdr(h) for _, h, _ in fz.sent)
    assert not net.tester.store.faults()  # one sample opens nothing (tester.corroborate 2)


def test_a_probe_of_ours_is_sent_again_from_its_own_ingress_only():
    net = two_switches()
    fz = Fuzzer(probe_from=(1, 2))
    _events(net, fz)
    vport = set_verify_port(set_verify_port(VERIFY_PORT_INIT, 1, 1), 2, 1)
    _report(net, (2, 2), vport)
    assert [i for i, _, _ in fz.sent] == [(1, 2)]


def test_the_replays_are_bounded():
    """A Verify_Port with the bits of every edge port names every one: at most the bound."""
    net = two_switches()
    fz = Fuzzer()
    ev = _events(net, fz)
    ev.edge_ports = [(1, 1), (1, 2), (2, 2), (3, 1), (3, 2), (4, 1), (4, 2)]
    net.tester.set_tag_ports(ev.edge_ports)  # switches 3 and 4 are in the network too
    vport = 0
    for p in ev.edge_ports:
        vport = set_verify_port(vport, *p)
    _report(net, (2, 2), vport)
    assert len(fz.sent) == MAX_REPLAY_INGRESSES


def test_a_workers_unexplained_sample_is_replayed_the_same_way():
    """With tester workers the first sample travels in the worker's report (Suspect with
    its Verify_Port) and pazzd replays it as the in-process tester's hook does."""
    net = two_switches()
    vport = set_verify_port(set_verify_port(VERIFY_PORT_INIT, 1, 1), 2, 1)
    here = Fuzzer()
    _events(net, here)
    _report(net, (2, 2), vport)

    net = two_switches()
    outbox = Outbox()
    net.tester.corroborate = 2
    net.tester.on_suspect, net.tester.on_unexplained = outbox.suspect, outbox.unexplained
    _report(net, (2, 2), vport)
    faults, flows, suspects = outbox.take()
    report = THRIFT.WorkerReport(0, {}, faults, flows, 0.0, suspects)
    there = Fuzzer()
    ev = FaultEvents(net.tester.store, None, None, None, net.topo.edge_ports())
    ev.fuzzer, ev.sampling_rate = there, 1
    daemon = SimpleNamespace(
        workers=SimpleNamespace(stats={}, unsaved={}, hello=lambda w: None),
        tester=net.tester,
        faults=ev,
    )
    asyncio.run(_Handler(daemon).report(report))
    assert there.sent and there.sent == here.sent
    assert ev.replays == len(there.sent)
