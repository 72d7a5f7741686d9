"""ECMP routes in the update-trace importer, along random FIB update sequences.

Two routers joined by one link, each with edge interfaces, a VLAN and `self`. A random
sequence of '+'/'-' forwarding lines adds and deletes routes in any order: several next
hops for one prefix are ECMP members, added and deleted one at a time, with host bits set
at random in the lines (they do not count). After every line the incrementally updated
model must forward each sample packet as
- the evaluator of the dataset lines (tests/pazzdata/oracle.Oracle: longest-prefix match
  over the routes present, each next hop of a prefix one alternative),
- cpc.refdp's brute-force data plane of the importer's entries and groups for the routes
  present, every SELECT bucket an alternative,
- and, picking one bucket as Open vSwitch does (cpc.selecthash), the evaluator taking the
  route at the picked index (a bucket per route, in the order the routes came) and
  cpc.refdp with the same picker.
"""

from __future__ import annotations

import random
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import FlowMod, Group, Instructions
from cpc.selecthash import group_bucket, ovs_select_bucket
from pazzdata.stanford import ECMP_GROUP_BASE, GroupChange, StanfordError, apply_change, load
from tests.pazzdata.oracle import Oracle, compare_with_oracle

TOPO = ["r te1 s xe-0/0/1", "s xe-0/0/1 r te1"]
VLANS = ["r vlan5 te2 te3", "s vlan7 ge-1/0/0 ge-1/0/1"]
NEXT_HOPS = {
    "r": ["te1", "te2", "te3", "vlan5", "self"],
    "s": ["xe-0/0/1", "ge-1/0/0", "vlan7", "self"],
}
PREFIXES = [  # nested, so longest-prefix match decides
    (0, 0),
    (10 << 24, 8),
    (10 << 24 | 1 << 16, 16),
    (10 << 24 | 1 << 16 | 2 << 8, 24),
    (10 << 24 | 1 << 16 | 2 << 8 | 128, 25),
    (10 << 24 | 1 << 16 | 2 << 8 | 3, 32),
]


def dataset(d: Path, lines: list[str]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "topo.txt").write_text("".join(f"{x}\n" for x in TOPO))
    (d / "vlan.txt").write_text("".join(f"{x}\n" for x in VLANS))
    (d / "updates").write_text("".join(f"{x}\n" for x in lines))
    return d


def fib_trace(ops) -> list[str]:
    """Forwarding lines from toggles (router, prefix, next hop, host bits): a route not
    present is added, a present one deleted, so the trace is consistent in any order."""
    present = set()
    lines = []
    for router, p, hop, host in ops:
        base, plen = PREFIXES[p]
        port = NEXT_HOPS[router][hop % len(NEXT_HOPS[router])]
        addr = base | (host & ((1 << (32 - plen)) - 1))
        op = "-" if (router, p, port) in present else "+"
        present ^= {(router, p, port)}
        lines.append(f"{op} fwd {router} {addr} {plen} {port} {plen}")
    return lines


def sample_headers(seed: int) -> list[dict]:
    """TCP packets into every prefix (and anywhere), ports varied so the hash picks vary."""
    rng = random.Random(seed)
    dsts = [
        b | rng.getrandbits(32 - plen) if plen < 32 else b for b, plen in PREFIXES for _ in "ab"
    ]
    dsts += [rng.getrandbits(32) for _ in range(2)]
    return [
        {
            "eth_type": 0x0800,
            "ip_proto": 6,
            "ipv4_src": rng.getrandbits(32),
            "ipv4_dst": dst,
            "tp_src": rng.getrandbits(16),
            "tp_dst": rng.getrandbits(16),
        }
        for dst in dsts
    ]


class PickingOracle(Oracle):
    """The evaluator with one next hop per prefix: the one at the index Open vSwitch picks
    among as many buckets as the prefix has routes."""

    def run(self, router, h):
        self._h = h
        return super().run(router, h)

    def lpm(self, router, dst):
        hops = super().lpm(router, dst)
        if len(hops) < 2:
            return hops
        buckets = Group(0, 0, "select", tuple(() for _ in hops))
        return [hops[ovs_select_bucket(buckets, self._h)]]


def outcome_key(d):
    return (d.kind, d.egress, d.hops, d.verify_port, d.verify_rule, d.alternative)


def egress_names(net, outcomes) -> set:
    return {net.port_info[eg][:2] for eg in outcomes}


def check_step(net, model, d: Path, k: int, headers) -> int:
    """The model after the first k lines against the three references; returns how many
    (header, router) runs met an ECMP prefix."""
    entries, groups = net.state(net.present(k))
    every = RefDataPlane(net.topo, entries, groups)
    picking = RefDataPlane(net.topo, entries, groups, select=lambda _, g, h: group_bucket(g, h))
    compare_with_oracle(net, model, Oracle(d, upto=k), headers)
    picked = PickingOracle(d, upto=k)
    edges = sorted(net.topo.edges)
    ecmp = 0
    for h in headers:
        for router in net.routers:
            ingress = (net.dpid_of[router], net.inject[router])
            got = model.trace(ingress, h)
            want = every.send(ingress, h)
            assert Counter(map(outcome_key, got)) == Counter(map(outcome_key, want)), (k, h)
            ecmp += any(d.alternative for d in got)
            # One bucket picked: the model's expected reports against both references.
            by_model = {
                eg for eg in edges if any(e.ingress == ingress for e in model.expected(eg, h))
            }
            by_ref = {x.egress for x in picking.send(ingress, h) if x.kind == "egress"}
            by_lines = {
                path[-1][:2]
                for (kind, path), _ in picked.run(router, h).items()
                if kind == "egress"
            }
            assert egress_names(net, by_model) == egress_names(net, by_ref) == by_lines, (k, h)
    return ecmp


ops_strategy = st.lists(
    st.tuples(
        st.sampled_from(sorted(NEXT_HOPS)),
        st.integers(0, len(PREFIXES) - 1),
        st.integers(0, 4),
        st.integers(0, 2**32 - 1),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops_strategy, seed=st.integers(0, 2**16))
def test_random_fib_updates_with_ecmp_equal_the_references(ops, seed):
    lines = fib_trace(ops)
    with tempfile.TemporaryDirectory() as tmp:
        d = dataset(Path(tmp), lines)
        net = load(d, inject_ports=True)
        model = Model(net.topo)
        model.add_entries([], net.groups)
        model.select = group_bucket
        headers = sample_headers(seed)
        for k, upd in enumerate(net.updates, 1):
            for change in net.changes(upd):
                apply_change(model, change)
            check_step(net, model, d, k, headers)


def test_the_random_traces_reach_ecmp(tmp_path):
    """The property test is not vacuous: traces of its size make groups of two and three
    members, delete the first member of a group, and packets meet the groups."""
    rng = random.Random(1)
    sizes, first_deleted, met = Counter(), 0, 0
    for i in range(15):
        ops = [
            (rng.choice("rs"), rng.randrange(len(PREFIXES)), rng.randrange(5), rng.getrandbits(32))
            for _ in range(30)
        ]
        d = dataset(tmp_path / str(i), fib_trace(ops))
        net = load(d, inject_ports=True)
        model = Model(net.topo)
        model.add_entries([], net.groups)
        model.select = group_bucket
        members: dict[tuple, list] = {}
        for k, upd in enumerate(net.updates, 1):
            ms = members.setdefault(upd.rule.match_key(), [])
            if upd.op == "-" and len(ms) > 1 and ms[0].key() == upd.rule.key():
                first_deleted += 1
            members[upd.rule.match_key()] = list(upd.members)
            sizes[len(upd.members)] += 1
            for change in net.changes(upd):
                apply_change(model, change)
            if k % 10 == 0:
                met += check_step(net, model, d, k, sample_headers(k))
    assert sizes[2] > 50 and sizes[3] > 10 and first_deleted > 5 and met > 200, (
        sizes,
        first_deleted,
        met,
    )


# --- how an ECMP entry is written: the documented FlowMods and GroupMods -------------------------
def test_members_added_and_deleted_become_one_select_group(tmp_path):
    """Second route: the group, then the entry points at it; third, or deleting one of
    three: the group modified; deleting the second-last (here the first-added): the entry
    outputs to the remaining route again and the group goes; the last: the entry goes."""
    steps = ["+ te2", "+ te3", "+ self", "- te3", "- te2", "- self"]
    lines = [f"{s[0]} fwd r {10 << 24 | 77} 8 {s[2:]} 8" for s in steps]
    net = load(dataset(tmp_path, lines))
    r = net.dpid_of["r"]
    out = {hop: (("output", net.port_of[("r", hop)]),) for hop in ("te2", "te3", "self")}
    gid = ECMP_GROUP_BASE
    want = [  # (the changes, the entry's actions, the group's buckets)
        (["add"], out["te2"], None),
        (["group add", "add"], (("group", gid),), [out["te2"], out["te3"]]),
        (["group modify"], (("group", gid),), [out["te2"], out["te3"], out["self"]]),
        (["group modify"], (("group", gid),), [out["te2"], out["self"]]),
        (["add", "group delete"], out["self"], None),
        (["delete_strict"], None, None),
    ]
    model = Model(net.topo)
    model.add_entries([], net.groups)  # the VLAN groups
    for upd, (kinds, actions, buckets) in zip(net.updates, want, strict=True):
        changes = net.changes(upd)
        got = [f"group {c.command}" if isinstance(c, GroupChange) else c.command for c in changes]
        assert got == kinds, upd.source
        assert all(isinstance(c, GroupChange | FlowMod) for c in changes)
        for c in changes:
            apply_change(model, c)
        (entry,) = model.entries(r) or [None]
        assert (entry and entry.instructions) == (actions and Instructions(actions)), upd.source
        groups = [g for g in model.groups() if g.dpid == r and g.type == "select"]
        assert [list(g.buckets) for g in groups] == ([buckets] if buckets else []), upd.source
        assert all(g.type == "select" and g.group_id == gid for g in groups)
        # The same state written from scratch (Stanford.state) is the same.
        k = int(upd.source.rsplit(":", 1)[1])
        entries, static = net.state(net.present(k))
        assert [e.instructions for e in entries] == [e.instructions for e in model.entries(r)]
        assert [(g.group_id, g.buckets) for g in static if g.type == "select"] == [
            (g.group_id, g.buckets) for g in groups
        ]


def test_host_bits_do_not_name_another_route(tmp_path):
    """10.0.0.77/8 and 10.0.0.0/8 are one prefix: a delete with other host bits deletes
    the route, and Stanford.present agrees."""
    lines = [
        f"+ fwd r {10 << 24 | 77} 8 te2 8",
        f"+ fwd r {10 << 24 | 5} 8 te3 8",
        f"- fwd r {10 << 24} 8 te2 8",
        f"- fwd r {10 << 24 | 9} 8 te3 8",
    ]
    net = load(dataset(tmp_path, lines))
    assert [len(u.members) for u in net.updates] == [1, 2, 1, 0]
    assert [r.port for r in net.present(3)] == ["te3"] and net.present(4) == []


# --- contradictory input: the error names the file and the line ----------------------------------
P8 = 10 << 24
BAD = [  # the lines, part of the message (the error is at the last line)
    ([f"+ fwd r {P8} 8 te2 8", f"+ fwd r {P8} 8 te3 8", f"+ fwd r {P8 | 1} 8 te2 8"], "same route"),
    (
        [f"+ fwd r {P8} 8 te2 8", f"+ fwd r {P8} 8 te3 8", f"- fwd r {P8} 8 te3 8"]
        + [f"- fwd r {P8} 8 te3 8"],
        "deletes a rule that is not installed",
    ),
    ([f"+ fwd r {P8} 8 te2 8", f"- fwd r {P8} 8 te3 8"], "deletes a rule that is not installed"),
    ([f"+ fwd r {P8} 8 te2 8", f"- fwd s {P8} 8 te2 8"], "deletes a rule that is not installed"),
    ([f"+ fwd r {P8} 8 te2 8", f"- fwd r {P8} 16 te2 16"], "deletes a rule that is not installed"),
    ([f"+ fwd r {P8} 8 te2 8", f"+ fwd r {P8} 8 te3 9"], "priority 9 is not the prefix length 8"),
    ([f"+ fwd r {P8} 8 te2 8", f"+ fwd r {P8} 8 te3"], "a forwarding line is"),
    ([f"+ fwd r {P8} 8 te2 8", "+ fwd r 10.0.0.0 8 te3 8"], "destination"),
]


@pytest.mark.parametrize("lines,message", BAD)
def test_contradictory_lines_name_file_and_line(tmp_path, lines, message):
    d = dataset(tmp_path, ["+ fwd s 0 0 self 0", *lines, "+ fwd s 1 32 self 32"])
    with pytest.raises(StanfordError) as ei:
        load(d)
    assert str(ei.value).startswith(f"{d / 'updates'}:{len(lines) + 1}: "), str(ei.value)
    assert message in str(ei.value)
