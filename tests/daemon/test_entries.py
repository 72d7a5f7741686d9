"""Entry confirmation (pazzd.entries) over a simulated data plane.

The switches are cpc.refdp reference data planes holding what each test says the switch
installed (the accepted entry, none, or a wider one); every confirmation copy the fuzzer
is asked to send goes through it, and each exit report is judged by the model (the
tester's `allows`) and handed to the tester's watch, as tester.engine does. The clock is
the test's.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import FlowMod, Instructions, Match
from cpc.topology import Topology
from pazzd.entries import AGENT, EntryConfirmations
from pazzd.probewatch import ProbeWatch
from tester.engine import watch_key
from tester.store import FaultStore

from .helpers import Pazzd, base_config, pazzctl, write_config

IP = {"eth_type": (0x0800, 0xFFFF)}
NET = Match.build({**IP, "ipv4_dst": (0x0A000100, 0xFFFFFF00)})  # 10.0.1.0/24


def out(port):
    return Instructions((("output", port),), (), False, None)


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


class FakeTester:
    def __init__(self):
        self.watches = {}


class SimFuzzer:
    """Sends each confirmation copy through the switches' actual tables at once."""

    def __init__(self, model, topo, clock, tester):
        self.model, self.topo, self.clock, self.tester = model, topo, clock, tester
        self.actual = None  # the entries the switches hold: None = the model's
        self.sent = []
        self.ingresses = topo.edge_ports()

    def confirm(self, ingress, header, copies):
        self.sent.append((ingress, dict(header), copies))
        entries = self.actual if self.actual is not None else self.model.entries()
        ref = RefDataPlane(self.topo, entries, self.model.groups())
        for d, h in ref.send_with_headers(ingress, header):
            if d.kind != "egress":
                continue
            fn = self.tester.watches.get(watch_key(h))
            if fn is not None:
                ok = self.model.allows(d.egress, h, d.verify_port, d.verify_rule)
                fn(d.egress, h, d.verify_port, d.verify_rule, ok, self.clock())
        return True


@pytest.fixture
def net(tmp_path):
    topo = Topology()
    topo.add_switch(1, "s1", [1, 2, 3])
    topo.add_switch(2, "s2", [1, 2])
    topo.add_link((1, 3), (2, 1))
    for p in ((1, 1), (1, 2), (2, 2)):
        topo.add_edge(p)
    model = Model(topo)
    model.add_entries([])
    ip = Match.build(IP)
    model.apply(FlowMod("add", 1, 0, 10, ip, out(2), rule_id=1))  # default: to s1:2
    model.apply(FlowMod("add", 2, 0, 10, ip, out(2), rule_id=2))
    clock = Clock()
    tester = FakeTester()
    fuzzer = SimFuzzer(model, topo, clock, tester)
    store = FaultStore(str(tmp_path / "faults.db"))
    probes = ProbeWatch(tester, fuzzer, topo, sampling_rate=1)
    ec = EntryConfirmations(
        model,
        probes,
        store,
        topo,
        probe_rate=100.0,
        share=0.25,
        delay=2.0,
        probes_per_entry=3,
        max_pending=4,
        clock=clock,
    )
    return model, fuzzer, store, ec, clock


def _install(model, ec, match=NET, rid=9):
    """The controller's FlowMod through the proxy: 10.0.1.0/24 goes to s2."""
    model.apply(FlowMod("add", 1, 0, 100, match, out(3), rule_id=rid))
    ec.schedule(1, 0, 100, match, rid)
    return model.find_entry(1, 0, 100, match)


def _run(ec, clock, seconds=40.0):
    for _ in range(int(seconds * 2)):
        clock.t += 0.5
        ec.tick()


def test_installed_entry_is_confirmed(net):
    model, fuzzer, store, ec, clock = net
    _install(model, ec)
    ec.tick()
    assert not fuzzer.sent  # not before the delay
    _run(ec, clock)
    kinds = [h for _, h, _ in fuzzer.sent]
    assert len(kinds) >= 2  # inside probes and the one outside the /24
    st = ec.state()
    assert (st["confirmed"], st["diverged"], st["pending"]) == (1, 0, 0)
    assert st["confirm_seconds_median"] == pytest.approx(2.0, abs=0.6)
    assert store.findings(AGENT) == []


def test_entry_missing_on_the_switch_is_a_finding(net):
    model, fuzzer, store, ec, clock = net
    e = _install(model, ec)
    fuzzer.actual = [x for x in model.entries() if x is not e]
    _run(ec, clock)
    assert ec.state()["diverged"] == 1
    (f,) = store.findings(AGENT, "open")
    assert f.detail["reason"] == "not-there"
    assert "as if it were not there" in f.summary
    inside = [p for p in f.detail["probes"] if p["kind"] == "inside"]
    assert inside and all(p["verdict"] == "other-tags" for p in inside)
    assert all(r["egress"] == "s1:2" for p in inside for r in p["reports"])
    # The entry is deleted: the finding resolves.
    ec.deleted(1, 0, 100, NET)
    assert store.findings(AGENT, "open") == []


def test_wider_entry_on_the_switch_is_a_finding(net):
    model, fuzzer, store, ec, clock = net
    e = _install(model, ec)
    wide = dataclasses.replace(e, match=Match.build({**IP, "ipv4_dst": (0x0A000000, 0xFFFFFE00)}))
    fuzzer.actual = [wide if x is e else x for x in model.entries()]
    _run(ec, clock)
    (f,) = store.findings(AGENT, "open")
    assert f.detail["reason"] == "wider"
    bad = [p for p in f.detail["probes"] if p["verdict"] == "other-tags"]
    assert [(p["kind"], p["field"]) for p in bad] == [("outside", "ipv4_dst")]
    assert "10.0.0." in bad[0]["header"]  # the /24 next to it, within the /23


def test_nothing_seen_is_a_finding_then_a_later_confirmation_resolves_it(net):
    model, fuzzer, store, ec, clock = net
    _install(model, ec)
    fuzzer.actual = []  # the switch drops everything
    _run(ec, clock)
    (f,) = store.findings(AGENT, "open")
    assert f.detail["reason"] == "unseen" and f.severity == "warning"
    fuzzer.actual = None
    ec.schedule(1, 0, 100, NET, 9)  # the controller sends it again
    _run(ec, clock)
    assert store.findings(AGENT, "open") == []
    assert ec.state()["confirmed"] == 1


def test_superseded_and_budget(net):
    model, fuzzer, store, ec, clock = net
    for i in range(6):
        m = Match.build({**IP, "ipv4_dst": (0x0A000100 + (i << 8), 0xFFFFFF00)})
        _install(model, ec, m, rid=20 + i)
    gone = Match.build({**IP, "ipv4_dst": (0x0A000100, 0xFFFFFF00)})
    model.apply(FlowMod("delete_strict", 1, 0, 100, gone))
    clock.t += 2.5
    ec.tick()
    st = ec.state()
    assert len(ec.probing) == 4 and st["superseded"] == 1  # max_pending; the deleted one
    assert st["pending"] == 5
    _run(ec, clock, 80.0)
    st = ec.state()
    assert (st["confirmed"], st["pending"]) == (5, 0)


def test_pazzctl_agents(net, tmp_path):
    """The findings through a running pazzd's API and pazzctl (the store is its database)."""
    model, fuzzer, store, ec, clock = net
    e = _install(model, ec)
    wide = dataclasses.replace(e, match=Match.build({**IP, "ipv4_dst": (0x0A000000, 0xFFFFFE00)}))
    fuzzer.actual = [wide if x is e else x for x in model.entries()]
    _run(ec, clock)
    (f,) = store.findings(AGENT, "open")
    d = Pazzd(write_config(tmp_path / "pazzd.yaml", base_config(tmp_path)))
    try:
        d.wait_ready()
        listing = pazzctl(d.sock, "agents", "--open").stdout
        assert f"{f.id} " in listing and "wider" in listing and "s1" in listing
        shown = pazzctl(d.sock, "agents", "show", str(f.id)).stdout
        assert "outside (ipv4_dst) from s1:1: other-tags" in shown, shown
        assert "reported  s2:2 other tags" in shown, shown
        as_json = json.loads(pazzctl(d.sock, "--json", "agents").stdout)
        assert [x["id"] for x in as_json] == [f.id]
        bad = pazzctl(d.sock, "agents", "show", "999", check=False)
        assert bad.returncode != 0
    finally:
        d.stop()
