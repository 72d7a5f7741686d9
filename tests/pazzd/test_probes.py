"""The probe service (pazzd.probes): one verdict rule, judged by the real tester.

The data plane is cpc.refdp's reference of the switches, holding what each test says they
hold (the model's entries, or changed behind the controller's back). Every confirmation
copy the service has the fuzzer send goes through it; each exit report goes out as an sFlow
datagram (tester.emit) into the real Tester with its real hold-back (TransientGuard), so a
report inside the hold is not judged, as on a live network. The clock is the test's.

The oracle of the random test is the brute-force comparison of the reference data plane
with the model's entries and with the switches' entries, header by header.
"""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import FlowEntry, FlowMod, Instructions, Match, ModelError
from cpc.topology import Topology
from pazzd.probes import RETRIES, Probe, ProbeService
from tester.emit import ReferenceEmitter, synthetic_ifmap
from tester.engine import Tester
from tester.store import FaultStore
from tester.timers import TransientGuard
from tests.cpc.netgen import flowmods, headers, networks

IP = {"eth_type": (0x0800, 0xFFFF)}
NET = Match.build({**IP, "ipv4_dst": (0x0A000100, 0xFFFFFF00)})  # 10.0.1.0/24
HDR = {"eth_type": 0x0800, "ipv4_dst": 0x0A000105, "ipv4_src": 0x0A000001, "ip_proto": 6,
       "tp_src": 40000, "tp_dst": 80}  # fmt: skip
OTHER = {**HDR, "ipv4_dst": 0x0A000909, "tp_dst": 443}  # background traffic, routed by default
SETTLE = 2.0


def out(port):
    return Instructions((("output", port),), (), False, None)


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


class Network:
    """The model, the switches (None: as the model), the tester and a fuzzer that sends each
    confirmation copy through the switches, one step (0.5 s) at a time."""

    def __init__(self, topo: Topology, model: Model, background=None):
        self.topo, self.model = topo, model
        self.clock = Clock()
        self.guard = TransientGuard(settle=SETTLE, clock=self.clock)
        model.subscribe(self.guard.on_model_update)
        self.tester = Tester(
            model,
            FaultStore(":memory:"),
            synthetic_ifmap(topo.edge_ports()),
            ports=topo.edge_ports(),
            guard=self.guard,
            clock=self.clock,
        )
        self.emitter = ReferenceEmitter(ovs_marking=True)
        self.actual: list[FlowEntry] | None = None
        self.background = background  # (ingress, header) sent every step, or None
        self.queue: list = []
        self.per_step = 10**6  # confirmation copies sent per step, at most (round robin)
        self.sent: list = []  # (time, ingress, header, copies)
        self.ingresses = topo.edge_ports()

    def confirm(self, ingress, header, copies):
        """As fuzzer.engine: the queued item, [ingress, header, copies left]."""
        self.sent.append((self.clock(), ingress, dict(header), copies))
        item = [ingress, dict(header), copies]
        self.queue.append(item)
        return item

    def switches(self) -> RefDataPlane:
        entries = self.actual if self.actual is not None else self.model.entries()
        return RefDataPlane(self.topo, list(entries), self.model.groups())

    def step(self, svc: ProbeService) -> None:
        self.clock.t += 0.5
        ref = self.switches()
        sends = []
        while self.queue and len(sends) < self.per_step:
            item = self.queue.pop(0)
            sends.append((item[0], item[1]))
            item[2] -= 1
            if item[2] > 0:
                self.queue.append(item)
        if self.background is not None:
            sends.append(self.background)
        for ingress, header in sends:
            for d, h in ref.send_with_headers(ingress, header):
                if d.kind == "egress":
                    self.emitter.add(d.egress, h, d.verify_port, d.verify_rule)
        for dg in self.emitter.flush():
            self.tester.process_datagram(dg, now=self.clock())
        self.tester.tick(self.clock())
        svc.tick()

    def service(self) -> ProbeService:
        return ProbeService(
            self.tester,
            self,
            self.model,
            self.topo,
            sampling_rate=1,
            probe_rate=100.0,
            share=0.5,
            clock=self.clock,
        )

    def run(self, svc, job, seconds=60.0):
        for _ in range(int(seconds * 2)):
            if job.verdict is not None:
                return job
            self.step(svc)
        return job


def two_switches() -> Network:
    """s1 (edges 1, 2) -- s2 (edge 2); IP goes out s1:2 by default, with background
    traffic from s1:1; a test adds 10.0.1.0/24 to s2 (a model update, so its reports are
    held back for SETTLE s)."""
    topo = Topology()
    topo.add_switch(1, "s1", [1, 2, 3])
    topo.add_switch(2, "s2", [1, 2])
    topo.add_link((1, 3), (2, 1))
    for p in ((1, 1), (1, 2), (2, 2)):
        topo.add_edge(p)
    model = Model(topo)
    model.add_entries([])
    ip = Match.build(IP)
    model.apply(FlowMod("add", 1, 0, 10, ip, out(2), rule_id=1))
    model.apply(FlowMod("add", 2, 0, 10, ip, out(2), rule_id=2))
    return Network(topo, model, background=((1, 1), OTHER))


@pytest.fixture
def net():
    return two_switches()


def _route(n: Network) -> None:
    n.model.apply(FlowMod("add", 1, 0, 100, NET, out(3), rule_id=9))


def _job(n: Network, svc, exits=((2, 2),)):
    done = []
    job = svc.start([Probe("witness", (1, 1), HDR, frozenset(exits))], done.append)
    assert job is not None
    return job, done


def test_a_probe_inside_the_hold_goes_out_after_it_and_agrees(net):
    _route(net)  # the switch has it too (actual: the model's entries)
    svc = net.service()
    t0 = net.clock()
    job, done = _job(net, svc)
    assert net.sent == []  # the header is held back: a copy now would never be judged
    net.run(svc, job)
    assert done == [job] and job.verdict == "agrees", job
    assert net.sent and net.sent[0][0] >= t0 + SETTLE
    (w,) = job.probes
    assert w.fate == "expected" and w.held == 0
    assert {r["egress"] for r in w.reports} == {"s2:2"} and all(r["allowed"] for r in w.reports)


def test_a_hidden_entry_differs_even_when_the_job_starts_inside_the_hold(net):
    _route(net)
    hidden = FlowEntry(1, 0, 200, NET, out(2), cookie=0xBAD)  # sends the /24 out s1:2
    net.actual = [*net.model.entries(), hidden]
    svc = net.service()
    job, _ = _job(net, svc)
    net.run(svc, job)
    assert job.verdict == "differs"
    (w,) = job.probes
    assert w.fate == "elsewhere"
    assert any(r["egress"] == "s1:2" and not r["allowed"] for r in w.reports)


def test_reports_held_by_a_later_update_are_not_judged_and_the_probe_goes_again(net):
    _route(net)
    svc = net.service()
    job, _ = _job(net, svc)
    while not net.sent:  # the hold ends: the copies are queued, to go out next step
        net.step(svc)
    assert net.queue
    # Another update touches the header just before its copies go out.
    net.model.apply(FlowMod("add", 1, 0, 150, NET, out(3), rule_id=10))
    net.run(svc, job)
    (w,) = job.probes
    assert job.verdict == "agrees" and w.fate == "expected"
    assert w.held >= 1 and w.rounds == 2  # held reports counted, then a round judged


def test_a_forwarded_probe_that_never_arrives_is_dropped_after_the_retry(net):
    _route(net)
    net.actual = [e for e in net.model.entries() if e.dpid != 2]  # s2 lost its route
    svc = net.service()
    job, _ = _job(net, svc)
    net.run(svc, job, seconds=120)
    (w,) = job.probes
    assert job.verdict == "differs" and w.fate == "dropped"
    assert w.rounds == 1 + RETRIES and len(net.sent) == 1 + RETRIES


def test_nothing_judged_when_no_report_reaches_the_tester_is_unseen(net):
    _route(net)
    net.actual = []  # the network drops everything: not one report anywhere
    net.background = None
    svc = net.service()
    job, _ = _job(net, svc)
    net.run(svc, job, seconds=120)
    assert job.verdict == "unseen" and job.probes[0].fate == "unseen"


def test_a_drop_the_model_predicts_agrees_only_when_silent(net):
    drop = Instructions((), (), False, None)
    net.model.apply(FlowMod("add", 1, 0, 100, NET, drop, rule_id=9))
    svc = net.service()
    job, _ = _job(net, svc, exits=())
    net.run(svc, job)
    assert job.verdict == "agrees" and job.probes[0].fate == "expected"
    # The switch forwards it after all (its drop entry is gone).
    net.actual = [e for e in net.model.entries() if e.priority != 100]
    job, _ = _job(net, svc, exits=())
    net.run(svc, job)
    assert job.verdict == "differs" and job.probes[0].fate == "elsewhere"


def test_jobs_that_share_a_slow_budget_wait_for_their_copies(net):
    """Forty jobs' copies go out one a step: each round's window starts when its copies
    are out, so that none of them is taken for dropped on a network that does what the
    model says."""
    _route(net)
    net.per_step = 1
    svc = net.service()
    net.clock.t += 10 * SETTLE
    jobs = []
    for i in range(40):
        hdr = {**HDR, "tp_src": 40000 + i}
        jobs.append(svc.start([Probe("w", (1, 1), hdr, frozenset({(2, 2)}))], lambda j: None))
    for _ in range(400):
        if all(j.verdict for j in jobs):
            break
        net.step(svc)
    assert [j.verdict for j in jobs] == ["agrees"] * 40
    assert max(j.probes[0].rounds for j in jobs) == 1


def test_the_same_header_from_a_host_elsewhere_is_not_the_probe(net):
    """The switch drops the probe's header from s1:1 (a hidden entry for in_port 1); a
    host behind s1:2 sends the same header, which reaches s2:2 as the model says. Its
    reports lack the probe's ingress bits: the probe is dropped, not seen."""
    _route(net)
    in1 = Match.build({**IP, "ipv4_dst": (0x0A000100, 0xFFFFFF00)}, in_port=1)
    hidden = FlowEntry(1, 0, 300, in1, Instructions((), (), False, None), cookie=0xBAD)
    net.actual = [*net.model.entries(), hidden]
    net.background = ((1, 2), HDR)
    svc = net.service()
    job, _ = _job(net, svc)
    net.run(svc, job, seconds=120)
    (w,) = job.probes
    assert job.verdict == "differs" and w.fate == "dropped", w
    assert w.reports == [] and svc.foreign > 0


def test_cancel_stops_watching_and_no_verdict_comes(net):
    svc = net.service()
    job, done = _job(net, svc, exits=((1, 2),))
    svc.cancel(job)
    assert net.tester.watches == {} and svc.jobs == {}
    for _ in range(40):
        net.step(svc)
    assert done == []


@st.composite
def scenarios(draw):
    """A random network and intended FlowMods (no rewrites: a probe is recognized at the
    exit by its header), the switches' tables changed behind the controller's back (an
    entry lost, or a hidden one added), a probe header and its ingress."""
    topo = draw(networks())
    fms = draw(st.lists(flowmods(topo, 1, rewrite=False, group_ids=()), min_size=1, max_size=12))
    hidden = draw(flowmods(topo, 1, rewrite=False, group_ids=()))
    change = draw(st.sampled_from(["none", "lose", "hide"]))
    hdr = draw(headers())
    ingress = draw(st.sampled_from(topo.edge_ports()))
    pick = draw(st.integers(0, 10**6))
    return topo, fms, hidden, change, hdr, ingress, pick


def _outcomes(ref: RefDataPlane, ingress, hdr) -> set:
    return {
        (d.egress, d.verify_port, d.verify_rule)
        for d in ref.send(ingress, hdr)
        if d.kind == "egress"
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_verdicts_follow_the_switches_against_brute_force(sc):
    """agrees exactly when the switches deliver the probe as the model does, or nowhere
    where the model drops it; differs when they deliver it elsewhere, with other tags, or
    not at all where the model forwards it."""
    topo, fms, hidden, change, hdr, ingress, pick = sc
    model = Model(topo)
    model.add_entries([])
    for fm in fms:
        with contextlib.suppress(ModelError):  # refused as the switch would
            model.apply(fm)
    entries = list(model.entries())
    if change == "lose" and entries:
        actual = [e for i, e in enumerate(entries) if i != pick % len(entries)]
    elif change == "hide" and hidden.command == "add":
        actual = [*entries, dataclasses.replace(hidden.entry(), cookie=0xBAD)]
    else:
        actual = entries
    hdr = {**hdr, "ipv4_src": 0x0B000001, "ip_proto": hdr.get("ip_proto", 17)}
    # The background traffic shows that reports reach the tester: one header the switches
    # deliver somewhere, when there is one.
    bg = None
    ref_actual = RefDataPlane(topo, actual, model.groups())
    for d in range(16):
        h = {"eth_type": 0x0800, "ipv4_dst": 0x0A000000 + d, "ipv4_src": 0x0C000001,
             "ip_proto": 17, "tp_src": 1, "tp_dst": 2}  # fmt: skip
        for i in topo.edge_ports():
            if _outcomes(ref_actual, i, h):
                bg = (i, h)
                break
        if bg:
            break
    n = Network(topo, model, background=bg)
    n.clock.t += 10 * SETTLE  # the model's updates are long settled
    n.actual = actual
    want = _outcomes(RefDataPlane(topo, entries, model.groups()), ingress, hdr)
    got = _outcomes(ref_actual, ingress, hdr)
    exits = frozenset(e for e, _, _ in want)
    svc = n.service()
    job = svc.start([Probe("p", ingress, hdr, exits)], lambda j: None)
    n.run(svc, job, seconds=120)
    if bg is None and not got:
        # Nothing reaches the tester: nothing could be judged, not even a probe the model
        # forwards and the switches drop (dropped counts only while reports arrive).
        expected = "unseen"
    elif got - want or (want and not got):
        expected = "differs"
    else:
        expected = "agrees"
    assert job.verdict == expected, (want, got, job.probes[0])
