"""The transient hold-back on the real model: a model update holds back only the reports
whose header it touched, not every report of the (large) classes it names."""

from __future__ import annotations

from tester_helpers import HDR, line_model

from cpc.refdp import RefDataPlane
from tester.emit import ReferenceEmitter, synthetic_ifmap
from tester.engine import Tester
from tester.store import FaultStore
from tester.timers import TransientGuard

INGRESS, EGRESS = (1, 1), (3, 2)
TOUCHED = dict(HDR, ipv4_dst=0x0A000205)  # 10.0.2.5: a benign /32 is added for it
OTHERS = [dict(HDR, ipv4_dst=0x0A000200 + i, tp_src=1000 + i) for i in (1, 9, 77, 200)]


def line():
    m = line_model(INGRESS, EGRESS)
    topo = m.topo
    for d in (1, 2, 3):
        m.add_flow(d, "priority=24,cookie=0x10,ip,nw_dst=10.0.2.0/24,actions=output:2")
    return topo, m


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def make(tmp_path):
    topo, m = line()
    clock = Clock()
    guard = TransientGuard(settle=2.0, clock=clock)
    m.subscribe(guard.on_model_update)
    ports = [(d, p) for d in sorted(topo.switches) for p in topo.ports_of(d)]
    t = Tester(
        m, FaultStore(str(tmp_path / "f.db")), synthetic_ifmap(ports), ports=ports, guard=guard
    )
    return topo, m, clock, t


def report(t, ref, header, now) -> None:
    em = ReferenceEmitter()
    for d, out in ref.send_with_headers(INGRESS, header):
        em.add_delivery(d, out)
    for dg in em.flush():
        t.process_datagram(dg, now)


def benign_update(m, clock, now) -> None:
    """A /32 with the /24's output but its own cookie: a new Verify_Rule for 10.0.2.5 only."""
    clock.now = now
    m.add_flow(1, "priority=32,cookie=0x30,ip,nw_dst=10.0.2.5,actions=output:2")


def test_reports_of_untouched_headers_are_judged_during_updates(tmp_path) -> None:
    topo, m, clock, t = make(tmp_path)
    before = RefDataPlane(topo, m.entries(), m.groups())
    benign_update(m, clock, 10.0)
    after = RefDataPlane(topo, m.entries(), m.groups())
    # The untouched headers share the touched header's class (one forwarding action)...
    assert {m.classify(h) for h in OTHERS} == {m.classify(TOUCHED)}
    # ...and the reference data plane tags them the same before and after the update.
    for h in OTHERS:
        assert [d[:6] for d in before.send(INGRESS, h)] == [d[:6] for d in after.send(INGRESS, h)]
    for h in OTHERS:  # within the settle time: judged, not held
        report(t, after, h, 10.5)
    assert t.stats.held_transient == 0 and t.stats.consistent == len(OTHERS)
    assert t.stats.fault_samples == 0


def test_report_of_a_touched_header_is_held(tmp_path) -> None:
    topo, m, clock, t = make(tmp_path)
    before = RefDataPlane(topo, m.entries(), m.groups())
    benign_update(m, clock, 10.0)
    after = RefDataPlane(topo, m.entries(), m.groups())
    assert (
        before.send(INGRESS, TOUCHED)[0].verify_rule != after.send(INGRESS, TOUCHED)[0].verify_rule
    )
    report(t, before, TOUCHED, 10.5)  # the switch has not applied the change yet
    report(t, after, TOUCHED, 11.0)
    assert t.stats.held_transient == 2 and t.stats.fault_samples == 0
    report(t, before, TOUCHED, 12.5)  # settled: the old tags are now a fault
    assert t.stats.fault_samples == 1
    report(t, after, TOUCHED, 12.6)
    assert t.stats.consistent == 1


def test_whole_class_holds_without_a_header(tmp_path) -> None:
    """Callers that do not pass the header (and begin/end) still hold the whole class."""
    topo, m, clock, t = make(tmp_path)
    benign_update(m, clock, 10.0)
    g = t.guard
    cls = m.classify(OTHERS[0])
    assert g.held(cls, 10.5) and g.held_until(cls) == 12.0
    assert not g.held(cls, 10.5, OTHERS[0]) and g.held_until(cls, OTHERS[0]) == 0.0
    assert g.held_until(cls, TOUCHED) == 12.0
    g.begin([cls])
    assert g.held(cls, 10.5, OTHERS[0])
    g.end([cls], now=11.0)
    assert g.held_until(cls, OTHERS[0]) == 13.0
    g.expire(20.0)
    assert not g.held(cls, 20.0) and not g._updates
