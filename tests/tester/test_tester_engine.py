"""The Tester end to end over hand-built expectations: datagrams in, stored faults out."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3

import pytest
from tester_helpers import (
    ALL_PORTS,
    BAD,
    EGRESS,
    GOOD,
    HDR,
    FakeModel,
    expected,
    tags_of,
)

from tester.collector import SflowCollector
from tester.detect import BLACKHOLE, TYPE_A, TYPE_P_ACTION
from tester.emit import ReferenceEmitter, agent_of, synthetic_ifmap
from tester.engine import Tester
from tester.ifmap import IfMap, parse_ovsdb, probe_settings
from tester.sflow import encode_datagram
from tester.store import _MIGRATIONS, OPEN, RESOLVED, FaultStore
from tester.timers import BlackholeMonitor, CriticalFlow, TransientGuard


def make(tmp_path, **kw):
    model = FakeModel({(EGRESS, HDR["ipv4_dst"]): [expected(GOOD)]})
    store = FaultStore(str(tmp_path / "faults.db"))
    events, requests = [], []
    t = Tester(
        model,
        store,
        synthetic_ifmap(ALL_PORTS),
        on_fault=events.append,
        on_localize=requests.append,
        resolve_after=10.0,
        **kw,
    )
    return t, model, store, events, requests


def send(t, em, hops, now, header=HDR, egress=EGRESS, n=1):
    for _ in range(n):
        em.add(egress, header, *tags_of(hops))
    for d in em.flush():
        t.process_datagram(d, now)


@pytest.mark.parametrize("ovs_marking", [False, True])
def test_consistent_then_fault_then_resolved(tmp_path, ovs_marking) -> None:
    t, model, store, events, requests = make(tmp_path)
    em = ReferenceEmitter(ovs_marking=ovs_marking)
    send(t, em, GOOD, 0.0, n=20)
    assert t.stats.consistent == 20 and t.stats.fault_samples == 0 and not events
    assert model.calls == 1 and t.stats.cache_hits == 19  # one model call per class
    send(t, em, BAD, 1.0, n=3)
    assert t.stats.fault_samples == 3
    rows = store.faults()
    assert len(rows) == 1
    f = rows[0]
    assert (f.kind, f.location, f.count, f.state) == (TYPE_P_ACTION, "dpid:1", 3, OPEN)
    assert (
        f.actual["verify_port"] == tags_of(BAD)[0]
        and f.expected[0]["verify_rule"] == tags_of(GOOD)[1]
    )
    assert bytes.fromhex(f.evidence)[12:14] == b"\x08\x20"
    assert len(requests) == 1 and requests[0].candidates[0] == 1 and requests[0].fault_id == f.id
    assert [e.new for e in events] == [True, False, False]
    t.answer_localization(f.id, {"dpid": 1, "entry": "priority=100,actions=output:3"})
    # Consistent reports for less than resolve_after: still open.
    send(t, em, GOOD, 2.0)
    t.tick(5.0)
    assert store.get(f.id).state == OPEN
    # A fault sample restarts the clock.
    send(t, em, BAD, 6.0)
    send(t, em, GOOD, 7.0)
    t.tick(16.0)
    assert store.get(f.id).state == OPEN
    t.tick(17.5)
    assert store.get(f.id).state == RESOLVED and events[-1].resolved
    assert store.get(f.id).polled["dpid"] == 1
    # Reopened by a new sample, with a new localization request.
    send(t, em, BAD, 20.0)
    assert store.get(f.id).state == OPEN and store.get(f.id).reopened == 1 and len(requests) == 2


def test_survives_restart(tmp_path) -> None:
    t, _, store, _, _ = make(tmp_path)
    em = ReferenceEmitter()
    send(t, em, BAD, 1.0, n=2)
    fid = store.faults()[0].id
    store.close()
    store2 = FaultStore(str(tmp_path / "faults.db"))
    assert store2.schema_version == len(_MIGRATIONS)
    f = store2.get(fid)
    assert f.count == 2 and f.state == OPEN and f.egress == EGRESS
    # A new tester on the reopened store keeps counting the same record and resolves it.
    model = FakeModel({(EGRESS, HDR["ipv4_dst"]): [expected(GOOD)]})
    t2 = Tester(model, store2, synthetic_ifmap(ALL_PORTS), resolve_after=10.0)
    send(t2, em, BAD, 3.0)
    assert store2.get(fid).count == 3
    send(t2, em, GOOD, 4.0)
    t2.tick(15.0)
    assert store2.get(fid).state == RESOLVED
    store2.close()
    db = sqlite3.connect(str(tmp_path / "faults.db"))
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_migration_from_v1(tmp_path) -> None:
    from tester import store as store_mod

    p = str(tmp_path / "old.db")
    db = sqlite3.connect(p, isolation_level=None)
    db.executescript(store_mod._MIGRATIONS[0] + ";PRAGMA user_version=1;")
    db.execute(
        "INSERT INTO faults (kind, location, header_class, first_seen, last_seen, count, evidence,"
        " header, egress, expected, actual, localization, state) VALUES"
        " ('type_a','x','c1',1,1,1,'','{}','null','[]','{}','{}','open')"
    )
    db.close()
    s = FaultStore(p)
    assert s.schema_version == len(store_mod._MIGRATIONS) and s.faults()[0].reopened == 0
    assert s.faults()[0].audit is None


def test_type_a_and_unknown_header(tmp_path) -> None:
    t, _, store, _, requests = make(tmp_path)
    em = ReferenceEmitter()
    other = dict(HDR, ipv4_dst=0x0A0009FF)
    send(t, em, GOOD, 1.0, header=other)
    (f,) = store.faults()
    assert f.kind == TYPE_A and f.location == "egress:3:2"
    assert {1, 2, 3} <= set(requests[0].candidates)
    t.tick(5.0)
    assert store.get(f.id).state == OPEN
    t.tick(11.5)  # no more samples of it for resolve_after
    assert store.get(f.id).state == RESOLVED


def test_transient_hold_back(tmp_path) -> None:
    guard = TransientGuard(settle=2.0)
    t, _, store, _, _ = make(tmp_path, guard=guard)
    em = ReferenceEmitter()
    cls = HDR["ipv4_dst"]
    guard.begin([cls])
    send(t, em, BAD, 1.0)
    guard.end([cls], now=5.0)
    send(t, em, BAD, 6.0)
    assert t.stats.held_transient == 2 and not store.faults()
    send(t, em, BAD, 7.5)
    assert t.stats.fault_samples == 1 and len(store.faults()) == 1

    class Update:
        classes = {cls}
        version = 2

    guard.clock = lambda: 100.0
    guard.on_model_update(Update())
    send(t, em, BAD, 101.0)
    assert t.stats.held_transient == 3


def test_model_version_invalidates_cache(tmp_path) -> None:
    t, model, _, _, _ = make(tmp_path)
    em = ReferenceEmitter()
    send(t, em, GOOD, 0.0, n=2)
    model.version = 2
    send(t, em, GOOD, 0.0, n=2)
    assert model.calls == 2 and t.stats.consistent == 4


def silence_for(lam: float) -> float:
    """The alarm's silence for a flow reported at lam per second at its egress, by the
    derivation in docs/tester.md: a 1 s batch, 0.5 s latency, and 3600 lam e^(-lam t) =
    5e-7 (half of the 1e-6 per flow-hour bound)."""
    return 1.5 + math.log(3600 * lam / 5e-7) / lam


def test_blackhole(tmp_path) -> None:
    flow = CriticalFlow(
        "web", (1, 1), EGRESS, {"ipv4_dst": HDR["ipv4_dst"]}, timeout=5.0, header=HDR
    )
    mon = BlackholeMonitor([flow], now=0.0)
    t, _, store, events, requests = make(tmp_path, blackholes=mon)
    em = ReferenceEmitter(sampling_rate=100)
    # Five reports a second (one batch) for 20 s, then none: 5 reports/s measured, and
    # the monitor alarms on a lower bound of it, so between the silence for 5/s and for
    # 2.5/s (90 reports in the window: the bound is about 3/s).
    for s in range(20):
        send(t, em, GOOD, float(s), n=5)
    t.tick(19.0 + silence_for(5.0) - 0.1)
    assert not store.faults()
    t.tick(19.0 + silence_for(2.5) + 0.1)
    (f,) = store.faults()
    assert f.kind == BLACKHOLE and requests[0].candidates == (1, 2, 3)
    assert silence_for(5.0) <= f.localization["threshold_s"] <= silence_for(2.5)
    assert f.localization["expected_gap_s"] == pytest.approx(0.2, rel=0.1)
    t.tick(60.0)
    assert store.get(f.id).count == 1  # one alarm per outage
    for s in range(61, 72):
        send(t, em, GOOD, float(s))
        t.tick(s + 0.5)
    t.tick(72.0)
    assert store.get(f.id).state == RESOLVED


def test_marked_probe_reports_are_not_a_critical_flows_production(tmp_path) -> None:
    """The fuzzer's probes of a critical flow's header are reported 1/1 (marked): were they
    counted, the flow's rate would read as the probes' and its silence would not alarm.
    Production stops at 20 s; the marked probes go on; the alarm comes as without them."""
    flow = CriticalFlow(
        "web", (1, 1), EGRESS, {"ipv4_dst": HDR["ipv4_dst"]}, timeout=5.0, header=HDR
    )
    mon = BlackholeMonitor([flow], now=0.0)
    t, _, store, events, requests = make(tmp_path, blackholes=mon)
    em = ReferenceEmitter(sampling_rate=100)
    for s in range(20):
        send(t, em, GOOD, float(s), n=5)
    for s in range(20, 60):  # one marked probe a second
        em.add(EGRESS, HDR, *tags_of(GOOD), marked=True)
        for d in em.flush():
            t.process_datagram(d, float(s))
        t.tick(float(s) + 0.5)
    (f,) = store.faults()
    assert f.kind == BLACKHOLE
    assert t.stats.consistent == 100 + 40  # the probes were judged all the same


def test_blackhole_clock_starts_when_armed_and_waits_out_a_hold() -> None:
    # expect_traffic: the operator wants an alarm even for a flow never seen.
    flow = CriticalFlow(
        "web", (1, 1), EGRESS, {"ipv4_dst": HDR["ipv4_dst"]}, timeout=3.0, expect_traffic=True
    )
    mon = BlackholeMonitor([flow], k=10.0, now=0.0)
    mon.arm(4.0)  # the collector started listening at t=4
    assert mon.check(6.5) == []
    mon.hold(8.0)  # the reader was blocked; queued reports may still come
    assert mon.check(7.5) == []
    (alarm,) = mon.check(8.0)
    assert alarm.since == 4.0 and alarm.threshold == 3.0
    # A flow that already reported keeps its clock when armed again (one report is no
    # rate: only the operator's max_silence alarms on it).
    mon2 = BlackholeMonitor([flow], k=10.0, now=0.0, max_silence=3.0)
    mon2.on_report(EGRESS, HDR, 1.0, 1)
    mon2.arm(4.0)
    (alarm2,) = mon2.check(4.5)
    assert alarm2.since == 1.0 and "max_silence" in alarm2.detail


def test_blackhole_idle_source_no_alarm(tmp_path) -> None:
    flow = CriticalFlow("web", (1, 1), EGRESS, {"ipv4_dst": HDR["ipv4_dst"]}, timeout=1.0)
    mon = BlackholeMonitor([flow], now=0.0)
    t, _, store, _, _ = make(tmp_path, blackholes=mon)
    em = ReferenceEmitter(sampling_rate=10)
    # 1:10 at both ends, one batch a second: ~2 ingress samples and ~2 reports a second
    # for 30 s, then the reports stop while the ingress is still sampled.
    for s in range(90):
        em.add_ingress((1, 1), HDR)
        em.add_ingress((1, 1), HDR)
        if s < 30:
            em.add(EGRESS, HDR, *tags_of(GOOD))
            em.add(EGRESS, HDR, *tags_of(GOOD))
        for d in em.flush():
            t.process_datagram(d, float(s))
        t.tick(s + 0.5)
    assert t.stats.ingress_samples == 180
    (f,) = store.faults()
    assert f.kind == BLACKHOLE and "ingress" in f.localization["detail"]
    # Alarmed on enough ingress samples without a report: of the packets sampled anywhere
    # 0.1*0.9/(0.1*0.9+0.1) = 47 % are sampled at the ingress only, so 0.47^m times the
    # reports per hour (7200 at 2/s, or a few times that) must stay under 5e-7.
    # Two ingress samples a batch count from 1.5 s after the last report (at 29 s) to
    # 1.5 s before the tick.
    need = math.log(5e-7 / 7201) / math.log(0.09 / 0.19)
    fired = f.first_seen - 29.0
    assert 2.5 + need / 2 <= fired <= 2.5 + (need + 6) / 2, (need, fired)
    # A second flow whose source stops entirely: no alarm.
    flow2 = CriticalFlow("idle", (1, 1), EGRESS, {"ipv4_dst": 0x0A000303}, timeout=1.0)
    mon2 = BlackholeMonitor([flow2], now=0.0)
    h2 = dict(HDR, ipv4_dst=0x0A000303)
    for i in range(60):
        mon2.on_ingress((1, 1), h2, float(i), 10)
        mon2.on_report(EGRESS, h2, float(i), 10)
    assert all(mon2.check(60.0 + s) == [] for s in range(3600))


def test_sequence_loss_unknown_interface_and_malformed(tmp_path) -> None:
    t, _, _, _, _ = make(tmp_path)
    em = ReferenceEmitter()
    em.add(EGRESS, HDR, *tags_of(GOOD))
    (d1,) = em.flush()
    t.process_datagram(d1, 0.0)
    for _ in range(3):  # received: a gap counts at most the datagrams received
        em.add(EGRESS, HDR, *tags_of(GOOD))
        t.process_datagram(em.flush()[0], 0.0)
    for _ in range(4):
        em.add(EGRESS, HDR, *tags_of(GOOD))
        lost = em.flush()
    t.process_datagram(lost[0], 0.0)
    assert t.stats.lost_datagrams == 3
    em2 = ReferenceEmitter()
    em2.add((9, 9), HDR, *tags_of(GOOD))
    for d in em2.flush():
        t.process_datagram(d, 0.0)
    assert t.stats.unknown_interface == 1
    t.process_datagram(b"\x00\x00\x00\x05garbage", 0.0)
    t.process_datagram(d1[:-3], 0.0)
    assert t.stats.malformed == 2


def test_ovsdb_mapping() -> None:
    bridges = json.dumps(
        {
            "headings": ["_uuid", "datapath_id", "ports"],
            "data": [
                [["uuid", "b1"], "000000000000000a", ["set", [["uuid", "p1"], ["uuid", "p2"]]]]
            ],
        }
    )
    ports = json.dumps(
        {
            "headings": ["_uuid", "interfaces"],
            "data": [[["uuid", "p1"], ["uuid", "i1"]], [["uuid", "p2"], ["uuid", "i2"]]],
        }
    )
    ifaces = json.dumps(
        {
            "headings": ["_uuid", "name", "ofport", "ifindex", "other_config"],
            "data": [
                [["uuid", "i1"], "s10-eth1", 1, 41, ["map", [["verify-probe", "trust"]]]],
                [["uuid", "i2"], "s10", 65534, ["set", []], ["map", []]],
            ],
        }
    )
    assert parse_ovsdb(bridges, ports, ifaces) == {41: (10, 1)}
    assert probe_settings(bridges, ports, ifaces) == {(10, 1): "trust", (10, 65534): ""}

    class Done:
        def __init__(self, out):
            self.returncode, self.stdout, self.stderr = 0, out, ""

    outs = iter([bridges, ports, ifaces])
    m = IfMap()
    assert m.load_ovsdb("192.0.2.1", "unix:/nonexistent", run=lambda *a, **k: Done(next(outs))) == 1
    assert m.lookup("192.0.2.1", 7, 41) == (10, 1) and m.verify_probe[(10, 1)] == "trust"
    assert m.load_ovsdb("192.0.2.1", "unix:/nonexistent/db.sock") == 0  # unreachable: no crash
    cfg = IfMap.from_config([{"agent": "192.0.2.2", "ifindex": 3, "dpid": "0x0b", "port": 2}])
    assert cfg.lookup("192.0.2.2", 0, 3) == (11, 2)


def test_collector_udp_v4_v6(tmp_path) -> None:
    t, _, store, _, _ = make(tmp_path)
    em = ReferenceEmitter()

    async def run():
        col = SflowCollector(t.process_datagram, hosts=("127.0.0.1", "::1"), port=0)
        await col.start()
        try:
            for i, addr in enumerate(col.bound):
                host, port = addr[:2]
                hops = GOOD if i == 0 else BAD
                em.add(EGRESS, HDR, *tags_of(hops))
                em.send((host, port), em.flush())
            em.send(col.bound[0][:2], [b"junk", encode_datagram(agent_of(3), 0, 99, 0, [])])
            for _ in range(200):
                if col.received >= len(col.bound) + 2:
                    break
                await asyncio.sleep(0.01)
        finally:
            col.close()
        return col

    col = asyncio.run(run())
    assert col.received == len(col.bound) + 2 and col.handler_errors == 0
    assert t.stats.consistent == 1 and t.stats.malformed == 1
    if len(col.bound) == 2:
        assert t.stats.fault_samples == 1 and store.faults()[0].kind == TYPE_P_ACTION
