"""The Stanford backbone importer and the incremental model on its update trace.

The forwarding oracle (tests/pazzdata/oracle.py) reads the dataset files itself and shares
nothing with pazzdata.stanford or the model but the header dict format.
"""

from __future__ import annotations

import dataclasses
import gc
import random
import shutil
from pathlib import Path

import pytest

from cpc.model import Model
from cpc.topology import load_topology
from pazzdata.stanford import StanfordError, acl_matches, load, parse_acl, range_to_masks
from tests.pazzdata.oracle import Oracle, answers, compare_with_oracle, replay, sample_headers

DATA = Path("/work/shared/datasets")
ACL = DATA / "stanford"
NOACL = DATA / "stanford-noacl"
pytestmark = pytest.mark.skipif(not ACL.exists(), reason="Stanford dataset not present")


# --- fixtures -----------------------------------------------------------------------------------
# The whole ACL trace is out of the model's reach (its classes multiply, docs/stanford.md), so
# the ACL tests run on a subset: a random share of the forwarding rules and the small ACLs.
SMALL_ACLS = (
    "coza_rtr_outACL",
    "goza_rtr_100",
    "goza_rtr_157",
    "gozb_rtr_100",
    "gozb_rtr_157",
    "poza_rtr_199",
    "pozb_rtr_199",
    "roza_rtr_102",
    "yoza_rtr_174",
    "yoza_rtr_175",
    "yozb_rtr_174",
    "yozb_rtr_175",
)


def thinned(net, every, seed=0, acls=SMALL_ACLS):
    """The trace restricted to about 1/every of the forwarding rules and the given ACLs."""
    keys = [u.rule.key() for u in net.updates if u.op == "+"]
    rng = random.Random(seed)
    keep = {k for k in keys if (k[1] in acls if k[0] == "acl" else rng.randrange(every) == 0)}
    return dataclasses.replace(net, updates=[u for u in net.updates if u.rule.key() in keep])


def insert_lines(net):
    return {int(u.source.rsplit(":", 1)[1]) for u in net.updates if u.op == "+"}


@pytest.fixture(scope="module")
def acl_net():
    return load(ACL, inject_ports=True)


@pytest.fixture(scope="module")
def acl_sub(acl_net):
    return thinned(acl_net, every=80, seed=2)


@pytest.fixture(scope="module")
def acl_model(acl_sub):
    model = Model(acl_sub.topo)
    model.add_entries(*acl_sub.state(acl_sub.inserted()))
    return model


@pytest.fixture(scope="module")
def noacl_net():
    return load(NOACL, inject_ports=True)


@pytest.fixture(scope="module")
def noacl_model(noacl_net):
    model = Model(noacl_net.topo)
    model.add_entries(*noacl_net.state(noacl_net.inserted()))
    return model


# --- importer -------------------------------------------------------------------------------
def test_range_expansion_is_exact_and_minimal():
    rng = random.Random(3)
    for _ in range(300):
        lo = rng.randrange(256)
        hi = rng.randrange(lo, 256)
        masks = range_to_masks(lo, hi, 8)
        covered = [v for v in range(256) if any(v & m == val for val, m in masks)]
        assert covered == list(range(lo, hi + 1))
        assert sum(1 for v in range(256) for val, m in masks if v & m == val) == hi - lo + 1
    assert range_to_masks(0, 255, 8) == [(0, 0)]
    assert len(range_to_masks(1, 65534, 16)) == 30  # the worst case: 2 * (16 - 1)
    assert range_to_masks(137, 139, 16) == [(137, 0xFFFF), (138, 0xFFFE)]


def test_acl_line_translation():
    r = parse_acl(
        [
            "cozb_rtr_inACL",
            "access-list",
            "inACL",
            "permit",
            "6",
            "6",
            "128.12.1.0",
            "0.0.0.255",
            "null",
            "null",
            "10.0.0.0",
            "0.255.0.255",
            "7000",
            "7010",
            "65534",
        ]
    )
    ms = acl_matches(r)
    assert len(ms) == 3  # 7000..7007, 7008..7009, 7010
    for m in ms:
        assert m.get("ipv4_src") == (0x800C0100, 0xFFFFFF00)
        assert m.get("ipv4_dst") == (0x0A000000, 0xFF00FF00)  # non-contiguous inverse mask
        assert m.get("ip_proto") == (6, 0xFF)
    r = parse_acl(
        [
            "x_rtr_1",
            "access-list",
            "1",
            "deny",
            "0",
            "255",
            "any",
            "null",
            "null",
            "null",
            "1.2.3.4",
            "null",
            "null",
            "null",
            "7",
        ]
    )
    (m,) = acl_matches(r)
    assert m.get("ip_proto") is None and m.get("ipv4_src") is None
    assert m.get("ipv4_dst") == (0x01020304, 0xFFFFFFFF)
    r = parse_acl(
        [
            "x_rtr_1",
            "access-list",
            "1",
            "deny",
            "6",
            "6",
            "any",
            "null",
            "null",
            "null",
            "any",
            "null",
            "27000",
            "null",
            "7",
        ]
    )
    assert r.dport == (27000, 65535)


def test_topology_ports_and_files(acl_net, tmp_path):
    net = acl_net
    assert len(net.routers) == 16
    assert sorted(net.dpid_of, key=net.dpid_of.get)[:16] == net.routers
    # A shared interface gets one port per linked device; output to it reaches all three.
    ports = net.send[("bbra_rtr", "te1/3")]
    assert len(ports) == 3
    assert {net.port_info[(1, p)][2][0] for p in ports} == {"bozb_rtr", "roza_rtr", "yozb_rtr"}
    # self is an edge port on every router.
    for r in net.routers:
        assert (net.dpid_of[r], net.port_of[(r, "self")]) in net.topo.edges
    # Port numbers are sorted names per device.
    for dpid in net.dpid_of.values():
        names = [net.topo.switches[dpid].ports[p] for p in sorted(net.topo.switches[dpid].ports)]
        assert names == sorted(names)
    t, r, p = tmp_path / "t.yaml", tmp_path / "r.jsonl", tmp_path / "p.json"
    rules = thinned(net, every=400, acls=("roza_rtr_102", "goza_rtr_157")).inserted()
    n = net.write(t, r, p, rules=rules)
    topo = load_topology(t)
    assert topo.switches[1].ports == net.topo.switches[1].ports
    assert topo.edges.keys() == net.topo.edges.keys() and topo.links == net.topo.links
    model = Model(topo)
    assert model.load_rules(r) == n == len(net.entries_of(rules)) > 10
    assert p.read_text().count('"self"') == 16


def test_acl_priorities_keep_first_match_order(tmp_path):
    d = tmp_path / "ds"
    shutil.copytree(ACL, d, ignore=shutil.ignore_patterns("acls"))
    lines = [
        "+ acl roza_rtr_102 access-list 102 permit 6 6 any null null null any null 22 22 50",
        "+ acl roza_rtr_102 access-list 102 deny 6 6 any null null null any null null null 50",
        "+ acl roza_rtr_102 access-list 102 permit 0 255 any null null null any null null null 49",
        "+ acl roza_rtr_102 access-list 102 deny 0 255 any null null null any null null null 60",
    ]
    (d / "updates").write_text("\n".join(lines) + "\n")
    net = load(d)
    prio = [net.acl_priority[u.rule.key()] for u in net.updates]
    assert prio == [50, 49, 48, 60]


@pytest.mark.parametrize(
    "file,text,message",
    [
        ("updates", "+ fwd bbra_rtr 1 8 te1/1\n", "forwarding line"),
        ("updates", "+ fwd nosuch_rtr 0 0 te1/1 0\n", "unknown device 'nosuch_rtr'"),
        (
            "updates",
            "+ acl nosuch_rtr_7 access-list 7 permit 0 255 any null null null any null null null 1\n",
            "unknown device 'nosuch_rtr_7'",
        ),
        ("updates", "+ fwd bbra_rtr 1 33 te1/1 33\n", "prefix length 33"),
        ("updates", "+ fwd bbra_rtr 1 8 vlan99999 8\n", "no vlan99999"),
        ("updates", "* fwd bbra_rtr 1 8 te1/1 8\n", "starts with '+' or '-'"),
        ("topo.txt", "bbra_rtr te1/3\n", "a link is"),
        ("vlan.txt", "nosuch_rtr vlan5 te1/1\n", "unknown device 'nosuch_rtr'"),
    ],
)
def test_errors_name_file_and_line(tmp_path, file, text, message):
    d = tmp_path / "ds"
    shutil.copytree(NOACL, d)
    path = d / file
    old = path.read_text().splitlines(keepends=True)
    path.write_text("".join(old[:5]) + text + "".join(old[5:]))
    with pytest.raises(StanfordError) as ei:
        load(d)
    assert str(ei.value).startswith(f"{path}:6: ")
    assert message in str(ei.value)


# --- the model after the inserts against the oracle ------------------------------------------------
def test_trace_after_inserts_equals_oracle_noacl(noacl_net, noacl_model):
    headers = sample_headers(noacl_net, 2500, seed=7)
    delivered, looped = compare_with_oracle(noacl_net, noacl_model, Oracle(NOACL), headers)
    assert delivered > 1000 and looped > 0  # the sample exercises both


def test_trace_after_inserts_equals_oracle_acl(acl_sub, acl_model):
    oracle = Oracle(ACL, insert_lines(acl_sub))
    headers = sample_headers(acl_sub, 2000, seed=8)
    delivered, _ = compare_with_oracle(acl_sub, acl_model, oracle, headers)
    assert delivered > 100
    # The ACLs both permit and deny some of the sample.
    denied = permitted = 0
    for h in headers:
        for acl in ("goza_rtr_157", "coza_rtr_outACL", "poza_rtr_199"):
            if oracle.acl_permits(acl, h):
                permitted += 1
            else:
                denied += 1
    assert denied and permitted


def test_loops_are_counted_by_cycle(noacl_model):
    cycles = noacl_model.loop_cycles()
    assert cycles and len(cycles) <= len(noacl_model.loops())
    for cyc in cycles:
        assert cyc[0] == min(cyc) and len(set(cyc)) == len(cyc)


# --- incremental replay -------------------------------------------------------------------------
def _check_incremental_equals_rebuilt(net, points, headers):
    model = Model(net.topo)
    model.add_entries([], net.groups)
    done = 0
    for k in sorted(points):
        replay(net, model, net.updates[done:k])
        done = k
        fresh = Model(net.topo)
        fresh.add_entries(*net.state(net.present(k)))
        assert model.rule_count() == fresh.rule_count()
        assert answers(net, model, headers) == answers(net, fresh, headers), k
    replay(net, model, net.updates[done:])
    return model


def _check_empty(net, model, headers):
    assert model.rule_count() == 0
    assert model.class_count() == 1
    assert (
        model.loops() == []
        and not model.index.walks
        or all(o.kind == "drop" for w in model.index.walks.values() for o in w.expanded())
    )
    for h in headers:
        for eg in net.topo.edge_ports():
            assert model.expected(eg, h) == []
    assert not model.index.expect
    assert len(model.index.walks) == 1  # the single class, walked to its table-miss drops
    # BDD nodes: nothing beyond a fresh model's once the encoding caches are dropped.
    fresh = Model(net.topo)
    fresh.add_entries([], net.groups)
    for m in (model, fresh):
        m.drop_caches()
        gc.collect()
    assert len(model.space.bdd) <= len(fresh.space.bdd) + 64


def test_thinned_trace_incremental_equals_rebuilt_and_ends_empty(acl_net):
    net = thinned(acl_net, every=80, seed=1)
    rng = random.Random(5)
    points = rng.sample(range(1, len(net.updates)), 10)
    headers = sample_headers(acl_net, 25, seed=11)
    model = _check_incremental_equals_rebuilt(net, points, headers)
    _check_empty(net, model, headers[:5])


@pytest.mark.slow
def test_full_trace_incremental_equals_rebuilt_and_ends_empty():
    net = load(NOACL, inject_ports=True)
    rng = random.Random(9)
    points = rng.sample(range(1, len(net.updates)), 10)
    headers = sample_headers(net, 40, seed=13)
    model = _check_incremental_equals_rebuilt(net, points, headers)
    _check_empty(net, model, headers[:5])
