"""The API answers the web view adds (pazzd.ui.data): `topology`, whose per-port Bloom bits
must find every port a packet entered by in the Verify_Port that the reference data plane
(cpc.refdp, its own tagging code) computes; and `coverage`, whose age bands must follow a
fake clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cpc.model import Model
from cpc.refdp import RefDataPlane
from fuzzer.engine import Fuzzer
from pazzd.ui.data import coverage_json, topology_json
from pazzdata import workloads

WL = workloads.generate("grid", 3, 150, rule_ids=True, acls=2)


def _bits(tj) -> dict[tuple[int, int], int]:
    return {(s["dpid"], p["port"]): int(p["bits"], 16) for s in tj["switches"] for p in s["ports"]}


def test_topology_names_every_port_link_and_edge():
    topo = WL.topo
    tj = topology_json(topo)
    assert [s["dpid"] for s in tj["switches"]] == sorted(topo.switches)
    for s in tj["switches"]:
        for p in s["ports"]:
            here = (s["dpid"], p["port"])
            if here in topo.links:
                assert p["peer"] == topo.port_name(topo.links[here]) and p["edge"] is None
            else:
                assert p["peer"] is None
            assert p["edge"] == topo.edges.get(here)
            assert bin(int(p["bits"], 16)).count("1") in (1, 2, 3)  # three bit positions
    assert len(tj["links"]) == len(topo.links) // 2
    assert {e["port"]: e["name"] for e in tj["edges"]} == {
        topo.port_name(p): n for p, n in topo.edges.items()
    }


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(sorted(WL.topo.edges)),
    st.one_of(st.integers(0, 2**32 - 1), st.sampled_from(sorted(WL.prefixes)).map(lambda n: n + 9)),
    st.sampled_from([6, 17]),
    st.integers(0, 65535),
)
def test_the_bits_of_every_port_entered_are_in_verify_port(ingress, dst, proto, dport):
    bits = _bits(topology_json(WL.topo))
    dp = RefDataPlane(WL.topo, WL.entries, WL.groups)
    header = {"eth_type": 0x800, "ipv4_src": 0x0A000001, "ipv4_dst": dst, "ip_proto": proto}
    header["tcp_dst" if proto == 6 else "udp_dst"] = dport
    for d in dp.send(ingress, header):
        if d.kind != "egress":  # tags are only reported where packets leave
            continue
        for h in d.hops:
            b = bits[(h.dpid, h.in_port)]
            assert d.verify_port & b == b, (d, h)


class Clock:
    t = 0.0

    def __call__(self):
        return self.t


def _fuzzer(window: float = 2.0):
    wl = workloads.generate("grid", 2, 200, rule_ids=True)
    m = Model(wl.topo)
    m.add_entries(wl.entries, wl.groups)
    clk = Clock()
    fz = Fuzzer(m, rate=1000, burst=1000, clock=clk, seed=1, subscribe=False, window_s=window)
    return wl.topo, fz, clk


def test_coverage_counts_area_ages_in_bands_of_the_window():
    topo, fz, clk = _fuzzer(window=2.0)
    assert coverage_json(None, topo)["enabled"] is False
    clk.t = 1.0
    fz.record(fz.next_probes(300))
    clk.t = 3.0  # every probed area was probed exactly 2 s ago: the window's band
    cov = coverage_json(fz, topo)
    assert cov["enabled"] and cov["window_s"] == 2.0
    assert cov["age_bounds_s"] == [0.5, 2.0, 20.0]
    assert [r["ingress"] for r in cov["ingresses"]] == ["s1:5", "s2:5", "s3:5", "s4:5"]
    for r in cov["ingresses"]:
        c = r["age_counts"]
        assert sum(c) == r["areas"] > 0
        assert c[0] == c[2] == c[3] == 0 and c[1] == r["areas_recent"] > 0
        assert c[4] == r["areas"] - r["areas_recent"]  # never probed
        assert r["oldest_s"] == pytest.approx(2.0)
        assert r["expected_detect_s"]["1/256"] == pytest.approx(256 * r["expected_detect_s"]["1"])
    clk.t = 30.0  # 29 s ago: beyond ten windows
    fz.record(fz.next_probes(4))  # one more probe per ingress, now
    for r in coverage_json(fz, topo)["ingresses"]:
        c = r["age_counts"]
        assert c[0] == 1 and c[1] == c[2] == 0 and c[3] == r["areas"] - 1 - c[4]
        assert r["oldest_s"] == pytest.approx(29.0)


def test_coverage_of_one_ingress_lists_its_areas_longest_unprobed_first():
    topo, fz, clk = _fuzzer()
    clk.t = 1.0
    fz.record(fz.next_probes(40))
    clk.t = 2.0
    fz.record(fz.next_probes(40))
    clk.t = 5.0
    (row,) = coverage_json(fz, topo, "s1:5")["ingresses"]
    ages = [a["age_s"] for a in row["area_list"]]
    assert len(ages) == row["areas"] and row["area_list_truncated"] is False
    never = [a for a in ages if a is None]
    assert ages[: len(never)] == never
    seen = ages[len(never) :]
    assert seen == sorted(seen, reverse=True) and set(seen) <= {3.0, 4.0}
    assert {a["group"] for a in row["area_list"]} <= {
        "sweep",
        "boundary",
        "region",
        "class",
        "random",
    }
    with pytest.raises(ValueError, match="s9"):
        coverage_json(fz, topo, "s9:5")
