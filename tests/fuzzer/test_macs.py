"""Probes that real hardware forwards: an individual (unicast) source MAC on every fuzz
probe, the host's own where the fuzzer knows it, and the drawn one wherever a rule
matches eth_src (checked with Match.contains and the reference data plane, not BDDs)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpc.model import Model
from cpc.ofctl import parse_flow
from cpc.refdp import RefDataPlane
from fuzzer.craft import Crafter
from fuzzer.engine import Fuzzer
from fuzzer.hspace import canonicalize, local_mac, parse_mac
from pazzdata.workloads import generate

SRC_RULE_MAC = 0x02AA00000001
# On the exit switch only: headers to 192.168/16 from one source MAC leave by port 5.
SRC_RULE = "priority=50,ip,dl_src=02:aa:00:00:00:01,nw_dst=192.168.0.0/16,actions=output:5"
FUZZ_AREAS = ("sweep", "boundary", "region", "class", "random", "delivered")


@pytest.fixture(scope="module")
def plain():
    wl = generate("grid", 2, 300, rule_ids=True, seed=4)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    assert not any(f == "eth_src" for e in wl.entries for f, _, _ in e.match.fields)
    return wl, model


@pytest.fixture(scope="module")
def src_rule():
    wl = generate("grid", 2, 300, rule_ids=True, seed=4)
    entries = wl.entries + [parse_flow(SRC_RULE, 4, "add").entry()]
    model = Model(wl.topo)
    model.add_entries(entries, wl.groups)
    return wl, model, RefDataPlane(wl.topo, entries, wl.groups), entries


unicast = st.integers(0, (1 << 48) - 1).map(lambda m: m & ~(1 << 40))


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**16),
    macs=st.lists(unicast, min_size=8, max_size=8),
    known=st.integers(0, 255),
)
def test_source_macs_are_individual_and_the_hosts_own(plain, seed, macs, known):
    wl, model = plain
    edges = model.topo.edge_ports()
    table = {p: macs[k] for k, p in enumerate(edges) if known >> k & 1}
    fz = Fuzzer(
        model,
        seed=seed,
        subscribe=False,
        host_macs=table,
        shares={"delivered": 0.1, **{g: 0.15 for g in FUZZ_AREAS[:-1]}},
    )
    crafter = Crafter(pretag=True)
    n = 0
    for _ in range(8):
        probes = fz.next_probes(64)
        fz.record(probes)
        for pr in probes:
            frame = crafter.frame(pr.header, pr.seq)
            assert not frame[6] & 1, (pr.area, frame[6:12].hex())  # I/G bit of the source
            # No rule of this network matches eth_src: every probe carries the host's MAC,
            # or the ingress's locally administered one.
            want = table.get(pr.ingress, local_mac(pr.ingress))
            assert int.from_bytes(frame[6:12], "big") == want, pr.area
            n += 1
    assert n >= 8 * 64 * 0.9


def test_a_rule_on_eth_src_is_still_probed_with_its_source(src_rule):
    """The exit switch's rule on dl_src makes the sweep towards its port: those probes
    keep the rule's source MAC (the reference data plane and the entries' own match say
    where the exit switch sends them), however the host MAC table reads."""
    wl, model, ref, entries = src_rule
    edges = model.topo.edge_ports()
    table = {p: 0x0A0000000000 | k for k, p in enumerate(edges)}
    fz = Fuzzer(model, seed=5, subscribe=False, host_macs=table)
    rule = parse_flow(SRC_RULE, 4, "add").entry()
    in_rule = 0
    for _ in range(60):
        probes = fz.next_probes(64)
        fz.record(probes)
        for pr in probes:
            assert not pr.header["eth_src"] & 1 << 40
            if pr.area == "sweep" and pr.pair[1] == (4, 5) and rule.match.contains(pr.header, 1):
                assert pr.header["eth_src"] == SRC_RULE_MAC
                outs = ref.send(pr.ingress, pr.header)
                assert (4, 5) not in {d.egress for d in outs if d.kind == "egress"}
                in_rule += 1
    assert in_rule >= 3


def test_canonical_headers_never_carry_a_group_source():
    h = canonicalize({"eth_src": 0xFFFFFFFFFFFF, "eth_dst": 0x01005E000001, "eth_type": 0x0800})
    assert not h["eth_src"] & 1 << 40
    assert h["eth_dst"] == 0x01005E000001  # a multicast destination is a real frame
    assert parse_mac("02:aa:00:00:00:01") == SRC_RULE_MAC
    with pytest.raises(ValueError, match="not a MAC"):
        parse_mac("02:aa:00:00:01")
    with pytest.raises(ValueError, match="group"):
        Fuzzer(Model(generate("grid", 2, 50).topo), host_macs={(1, 1): "01:00:5e:00:00:01"})
