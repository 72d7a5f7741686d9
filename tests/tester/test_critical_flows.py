"""Critical flows on the real model: the header is the one entering at the ingress, the
model derives the header leaving at the egress (set_field rewrites); the blackhole clock
starts when the flow is first seen, after the grace; pazzd's config keys for both."""

from __future__ import annotations

import textwrap

import pytest
from tester_helpers import HDR, line_model

from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.topology import Topology
from pazzd.config import ConfigError, load_config
from tester.detect import BLACKHOLE
from tester.emit import ReferenceEmitter, synthetic_ifmap
from tester.engine import Tester
from tester.store import FaultStore
from tester.timers import BlackholeMonitor, CriticalFlow

INGRESS, EGRESS = (1, 1), (3, 2)
OUTSIDE = 0x0A000002  # 10.0.0.2: what the host sends
INSIDE = 0x0A090902  # 10.9.9.2: s1 rewrites the destination to it (NAT)


def nat_line() -> tuple[Topology, Model]:
    """s1 - s2 - s3; s1 rewrites nw_dst (table 0) and its MAC in table 1, then on."""
    m = line_model(INGRESS, EGRESS)
    topo = m.topo
    m.add_flow(1, "table=0,priority=10,ip,nw_dst=10.0.0.2,actions=mod_nw_dst:10.9.9.2,goto_table:1")
    m.add_flow(1, "table=1,priority=10,ip,actions=mod_dl_dst:02:00:00:00:09:02,output:2")
    m.add_flow(2, "priority=10,ip,nw_dst=10.9.9.0/24,actions=output:2")
    m.add_flow(3, "priority=10,ip,nw_dst=10.9.9.0/24,actions=output:2")
    return topo, m


def ports(topo):
    return [(d, p) for d in sorted(topo.switches) for p in topo.ports_of(d)]


def flow(**kw) -> CriticalFlow:
    hdr = dict(HDR, ipv4_dst=OUTSIDE)
    return CriticalFlow("nat", INGRESS, EGRESS, {"ipv4_dst": OUTSIDE}, 3.0, hdr, **kw)


def test_trace_headers_match_the_reference_data_plane() -> None:
    topo, m = nat_line()
    hdr = flow().header
    ((d, out),) = m.trace_headers(INGRESS, hdr)
    ((rd, rout),) = RefDataPlane(topo, m.entries(), m.groups()).send_with_headers(INGRESS, hdr)
    assert d.kind == rd.kind == "egress" and d.egress == rd.egress == EGRESS
    assert out == rout and out["ipv4_dst"] == INSIDE and out["eth_dst"] == 0x020000000902
    assert (d.verify_port, d.verify_rule) == (rd.verify_port, rd.verify_rule)


def test_reports_after_a_rewrite_keep_the_flow_alive_and_alarm_names_the_path(tmp_path) -> None:
    topo, m = nat_line()
    f = flow()
    mon = BlackholeMonitor([f], k=5.0, now=0.0, model=m)
    store = FaultStore(str(tmp_path / "f.db"))
    requests = []
    t = Tester(
        m,
        store,
        synthetic_ifmap(ports(topo)),
        ports=ports(topo),
        blackholes=mon,
        on_localize=requests.append,
    )
    ref = RefDataPlane(topo, m.entries(), m.groups())
    em = ReferenceEmitter()
    for s in range(12):  # the reference's report: the rewritten header, at the egress
        for _ in range(5):  # five packets a second, each reported (1/1)
            for d, out in ref.send_with_headers(INGRESS, f.header):
                em.add_delivery(d, out)
        for dg in em.flush():
            t.process_datagram(dg, float(s))
        t.tick(s + 0.5)
    assert t.stats.consistent == 60 and store.faults() == []  # matched as the flow's reports
    t.tick(40.0)  # reports stop: a blackhole, localized on the model's path through the NAT
    (fault,) = store.faults()
    assert fault.kind == BLACKHOLE
    assert requests[0].candidates == (1, 2, 3)
    assert [p for p in fault.expected[0]["path"]] == [[1, 1, 2], [2, 1, 2], [3, 1, 2]]


def test_egress_header_follows_model_changes() -> None:
    topo, m = nat_line()
    f = flow()
    # Two reports are no rate: the operator's max_silence alarms on this flow.
    mon = BlackholeMonitor([f], k=1.0, now=0.0, model=m, max_silence=3.0)
    at_egress = dict(f.header, ipv4_dst=INSIDE)
    mon.on_report(EGRESS, at_egress, 1.0, 1)
    assert mon.check(2.0) == []
    # The controller moves the NAT target: reports now carry 10.9.9.3.
    m.add_flow(1, "table=0,priority=10,ip,nw_dst=10.0.0.2,actions=mod_nw_dst:10.9.9.3,goto_table:1")
    mon.on_report(EGRESS, dict(at_egress, ipv4_dst=INSIDE + 1), 3.0, 1)
    mon.on_report(EGRESS, at_egress, 5.0, 1)  # the old header is not the flow's any more
    assert mon.check(5.9) == []
    (alarm,) = mon.check(6.5)
    assert alarm.since == 3.0


def test_never_seen_flow_does_not_alarm() -> None:
    mon = BlackholeMonitor([flow()], k=10.0, now=0.0)
    mon.arm(1.0)
    assert mon.check(100.0) == []


def test_clock_starts_when_first_seen_at_ingress() -> None:
    f = flow()
    mon = BlackholeMonitor([f], k=2.0, now=0.0)
    mon.arm(0.0)
    for s in (50.0, 51.0, 52.0):  # traffic starts, nothing reaches the egress
        mon.on_ingress(INGRESS, f.header, s, 1)
        assert mon.check(s + 0.5) == []
    mon.on_ingress(INGRESS, f.header, 53.0, 1)
    (alarm,) = mon.check(53.5)
    assert alarm.since == 50.0 and "ingress" in alarm.detail


def test_grace_and_expect_traffic() -> None:
    f = flow(expect_traffic=True)
    mon = BlackholeMonitor([f], k=10.0, now=0.0, grace=20.0)
    mon.arm(1.0)
    assert mon.check(23.5) == []  # grace to 21, then the 3 s timeout
    (alarm,) = mon.check(24.5)
    assert alarm.since == 21.0
    # A seen flow's clock does not start before the grace ends either; a per-flow grace wins.
    g = flow(grace=5.0)
    mon2 = BlackholeMonitor([g], k=10.0, now=0.0, grace=20.0, max_silence=3.0)
    mon2.arm(0.0)
    mon2.on_report(EGRESS, g.header, 1.0, 1)
    assert mon2.check(7.5) == []
    (alarm2,) = mon2.check(8.5)
    assert alarm2.since == 5.0


def _cfg(tmp_path, tester: str = "", flow_extra: str = "") -> str:
    (tmp_path / "t.yaml").write_text(
        textwrap.dedent("""\
        switches:
          - {dpid: 1, name: s1, ports: [1, 2]}
        edge: [s1:1, s1:2]
        """)
    )
    (tmp_path / "r.jsonl").write_text("")
    p = tmp_path / "pazzd.yaml"
    p.write_text(
        "topology: t.yaml\nrules: r.jsonl\n"
        f"tester: {{{tester}}}\n"
        "critical_flows:\n"
        f"  - {{name: web, from: s1:1, to: s1:2, header: 'nw_dst=10.0.0.2'{flow_extra}}}\n"
    )
    return str(p)


def test_config_keys(tmp_path) -> None:
    cfg = load_config(_cfg(tmp_path, "blackhole_grace: 30", ", grace: 5, expect_traffic: true"))
    (c,) = cfg.critical_flows
    assert cfg.tester.blackhole_grace == 30.0 and c.grace == 5.0 and c.expect_traffic is True
    cfg = load_config(_cfg(tmp_path))
    assert cfg.tester.blackhole_grace == 0.0 and cfg.critical_flows[0].grace is None
    assert cfg.critical_flows[0].expect_traffic is False


@pytest.mark.parametrize(
    "tester, extra, key",
    [
        ("blackhole_grace: .nan", "", "tester.blackhole_grace: must be a finite number"),
        ("blackhole_grace: .inf", "", "tester.blackhole_grace: must be a finite number"),
        ("blackhole_grace: -1", "", "tester.blackhole_grace: must be at least 0"),
        ("", ", grace: -2", "critical_flows[0].grace: must be at least 0"),
        ("", ", grace: .nan", "critical_flows[0].grace: must be a finite number"),
        ("", ", timeout: .nan", "critical_flows[0].timeout: must be a finite number"),
        ("", ", expect_traffic: 1", "critical_flows[0].expect_traffic: must be true or false"),
    ],
)
def test_config_errors_name_the_key(tmp_path, tester, extra, key) -> None:
    with pytest.raises(ConfigError, match=key.replace("[", r"\[").replace("]", r"\]")):
        load_config(_cfg(tmp_path, tester, extra))


def test_ingress_samples_the_model_drops_on_purpose_are_not_lost_packets() -> None:
    """The flow's match (ipv4_dst) also covers DNS, which an ACL at s1 drops: ingress
    samples of it, with no report, are no blackhole; ingress samples of the flow's own
    packets, with no report, are (1/1: one is proof, after the batch allowances)."""
    topo, m = nat_line()
    m.add_flow(1, "table=0,priority=100,udp,nw_dst=10.0.0.2,tp_dst=53,actions=drop")
    f = flow()
    dns = dict(f.header, ip_proto=17, tp_dst=53)
    assert [d.kind for d, _ in m.trace_headers(INGRESS, dns)] != ["egress"]
    mon = BlackholeMonitor([f], now=0.0, model=m)
    at_egress = dict(f.header, ipv4_dst=INSIDE)
    for s in range(10):
        mon.on_ingress(INGRESS, f.header, float(s), 1)
        mon.on_report(EGRESS, at_egress, float(s), 1)
    for s in range(10, 30):  # only DNS enters now
        mon.on_ingress(INGRESS, dns, float(s), 1)
        assert mon.check(s + 0.5) == []
    mon.on_ingress(INGRESS, f.header, 30.0, 1)  # the flow again, and no report of it
    assert mon.check(31.4) == []  # its report may still be on its way (1 s + 0.5 s)
    (alarm,) = mon.check(31.6)
    assert alarm.since == 9.0 and alarm.ingress_samples == 1 and alarm.needed == 1
