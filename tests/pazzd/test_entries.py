"""Entry confirmation (pazzd.entries) over a simulated data plane.

The switches are cpc.refdp reference data planes holding what each test says the switch
installed (the accepted entry, none, or a wider one); every confirmation copy the probe
service has the fuzzer send goes through them, and each exit report goes as an sFlow
datagram into the real tester (tests/pazzd/test_probes.py's Network). The clock is the
test's.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from cpc.rules import FlowMod, Instructions, Match
from pazzd.entries import AGENT, EntryConfirmations
from pazzd.findstore import FindingStore
from pazzd.services import FindingSink

from .helpers import Pazzd, base_config, pazzctl, write_config
from .test_probes import two_switches

IP = {"eth_type": (0x0800, 0xFFFF)}
NET = Match.build({**IP, "ipv4_dst": (0x0A000100, 0xFFFFFF00)})  # 10.0.1.0/24


def out(port):
    return Instructions((("output", port),), (), False, None)


@pytest.fixture
def net(tmp_path):
    n = two_switches()
    model, topo = n.model, n.topo
    store = FindingStore(str(tmp_path / "faults.db"))
    svc = n.service()
    ec = EntryConfirmations(
        model,
        svc,
        FindingSink(store, n.clock),
        topo,
        delay=2.0,
        probes_per_entry=3,
        max_pending=4,
        clock=n.clock,
    )
    ec.svc = svc
    return model, n, store, ec, n.clock


def _install(model, ec, match=NET, rid=9):
    """The controller's FlowMod through the proxy: 10.0.1.0/24 goes to s2."""
    model.apply(FlowMod("add", 1, 0, 100, match, out(3), rule_id=rid))
    ec.schedule(1, 0, 100, match, rid)
    return model.find_entry(1, 0, 100, match)


def _run(ec, n, seconds=40.0):
    for _ in range(int(seconds * 2)):
        ec.tick()
        n.step(ec.svc)


def test_installed_entry_is_confirmed(net):
    model, fuzzer, store, ec, clock = net
    _install(model, ec)
    ec.tick()
    assert not fuzzer.sent  # not before the delay
    _run(ec, fuzzer)
    kinds = [h for _, _, h, _ in fuzzer.sent]
    assert len(kinds) >= 2  # inside probes and the one outside the /24
    st = ec.state()
    assert (st["confirmed"], st["diverged"], st["pending"]) == (1, 0, 0)
    assert st["confirm_seconds_median"] == pytest.approx(2.0, abs=0.6)
    assert store.findings(AGENT) == []


def test_entry_missing_on_the_switch_is_a_finding(net):
    model, fuzzer, store, ec, clock = net
    e = _install(model, ec)
    fuzzer.actual = [x for x in model.entries() if x is not e]
    _run(ec, fuzzer)
    assert ec.state()["diverged"] == 1
    (f,) = store.findings(AGENT, "open")
    assert f.reason == "not-there"
    assert "as if it were not there" in f.summary
    inside = [p for p in f.probes if p["kind"] == "inside"]
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
    _run(ec, fuzzer)
    (f,) = store.findings(AGENT, "open")
    assert f.reason == "wider"
    bad = [p for p in f.probes if p["verdict"] == "other-tags"]
    assert [(p["kind"], p["field"]) for p in bad] == [("outside", "ipv4_dst")]
    assert "10.0.0." in bad[0]["header"]  # the /24 next to it, within the /23


def test_nothing_seen_is_no_finding(net):
    """The switches drop everything: no report reaches the tester, nothing can be judged."""
    model, fuzzer, store, ec, clock = net
    _install(model, ec)
    fuzzer.actual = []
    _run(ec, fuzzer)
    st = ec.state()
    assert (st["unjudged"], st["diverged"], st["confirmed"]) == (1, 0, 0)
    assert store.findings(AGENT) == []


def test_a_dropped_probe_is_a_finding_then_a_later_confirmation_resolves_it(net):
    """s2 lost its route: the entry's headers never arrive (other traffic does)."""
    model, fuzzer, store, ec, clock = net
    _install(model, ec)
    fuzzer.actual = [e for e in model.entries() if e.dpid != 2]
    _run(ec, fuzzer, 80.0)
    (f,) = store.findings(AGENT, "open")
    assert f.reason == "dropped" and f.severity == "critical"
    inside = [p for p in f.probes if p["kind"] == "inside"]
    assert inside and all(p["fate"] == "dropped" and p["rounds"] == 2 for p in inside)
    fuzzer.actual = None
    ec.schedule(1, 0, 100, NET, 9)  # the controller sends it again
    _run(ec, fuzzer)
    assert store.findings(AGENT, "open") == []
    assert ec.state()["confirmed"] == 1


def test_a_widened_drop_is_a_finding(net):
    """A drop for TCP port 8080 to the /24; the switch drops all TCP to it: the outside
    probe (another port), which the model forwards, never arrives."""
    model, fuzzer, store, ec, clock = net
    _install(model, ec)
    _run(ec, fuzzer)
    drop = Instructions((), (), False, None)
    m8080 = Match.build(
        {
            **IP,
            "ipv4_dst": (0x0A000100, 0xFFFFFF00),
            "ip_proto": (6, 0xFF),
            "tp_dst": (8080, 0xFFFF),
        }
    )
    model.apply(FlowMod("add", 1, 0, 200, m8080, drop, rule_id=11))
    ec.schedule(1, 0, 200, m8080, 11)
    e = model.find_entry(1, 0, 200, m8080)
    wide = dataclasses.replace(
        e, match=Match.build({**IP, "ipv4_dst": (0x0A000100, 0xFFFFFF00), "ip_proto": (6, 0xFF)})
    )
    fuzzer.actual = [wide if x is e else x for x in model.entries()]
    _run(ec, fuzzer, 80.0)
    (f,) = store.findings(AGENT, "open")
    assert f.reason == "wider", f.to_json()
    bad = [p for p in f.probes if p["fate"] == "dropped"]
    assert [(p["kind"], p["field"]) for p in bad] == [("outside", "tp_dst")], f.probes


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
    _run(ec, fuzzer, 80.0)
    st = ec.state()
    assert (st["confirmed"], st["pending"]) == (5, 0)


def test_pazzctl_agents(net, tmp_path):
    """The findings through a running pazzd's API and pazzctl (the store is its database)."""
    model, fuzzer, store, ec, clock = net
    e = _install(model, ec)
    wide = dataclasses.replace(e, match=Match.build({**IP, "ipv4_dst": (0x0A000000, 0xFFFFFE00)}))
    fuzzer.actual = [wide if x is e else x for x in model.entries()]
    _run(ec, fuzzer)
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
