"""The importer and the model on random networks in the update-trace format.

pazzdata.tracegen writes a dataset with the names of real dumps (interfaces and ACLs with
`_`, `-`, `.`, `/`, routers ending in `_in`, shared interfaces, one-way links, ACL chains);
the oracle (tests/pazzdata/oracle.py) evaluates its lines, given the ground truth of which
ACL each element applies, and the model must agree at points along the trace.
"""

from __future__ import annotations

import itertools
import random
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpc.model import Model
from cpc.rules import Instructions
from pazzdata.stanford import StanfordError, load
from pazzdata.tracegen import generate
from tests.pazzdata.oracle import Oracle, answers, compare_with_oracle, replay, sample_headers


def check_along_the_trace(g, d: Path, rnd: random.Random, n_headers: int, n_points: int):
    """At the end of the inserts and at random points: the incremental model equals the
    oracle and a model rebuilt from the rules present; after the trace the model is empty."""
    net = load(d, inject_ports=True)
    assert net.element_acl == g.element_acl  # the importer reads the names right
    # The oracle reads them from acls/*_usage (it also has the ACLs without lines).
    assert Oracle(d).element_acl == {e: a or _acl(e, g) for e, a in g.element_acl.items()}
    headers = sample_headers(net, n_headers, seed=rnd.randrange(1 << 30))
    inserts = len(net.updates) // 2
    points = sorted({inserts, *rnd.sample(range(1, len(net.updates)), n_points)})
    model = Model(net.topo)
    model.add_entries([], net.groups)
    done, seen = 0, [0, 0]
    for k in points:
        replay(net, model, net.updates[done:k])
        done = k
        oracle = Oracle(d, upto=k)
        for i, n in enumerate(compare_with_oracle(net, model, oracle, headers)):
            seen[i] += n
        fresh = Model(net.topo)
        fresh.add_entries(*net.state(net.present(k)))
        assert model.rule_count() == fresh.rule_count()
        assert answers(net, model, headers) == answers(net, fresh, headers), k
    replay(net, model, net.updates[done:])
    assert model.rule_count() == 0 and model.class_count() == 1
    return seen


def _acl(element, g):
    """The ACL of an element of an ACL without lines, from the generator's usage files."""
    for name, lines in g.acl_files.items():
        if name.endswith("_usage"):
            r = name[: -len("_usage")]
            for line in lines:
                port, direction, *acls = line.split()
                for acl in acls:
                    if element == f"{r}_{acl}_{port}_{direction}":
                        return f"{r}_{acl}"
    raise AssertionError(element)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    routers=st.integers(2, 8),
    acls=st.integers(0, 7),
)
def test_random_networks_equal_the_oracle_along_the_trace(seed, routers, acls):
    rnd = random.Random(seed)  # the generator draws thousands of choices: shrink the seed
    g = generate(rnd, routers=routers, acls=acls, prefixes=10, acl_lines=6)
    with tempfile.TemporaryDirectory() as tmp:
        check_along_the_trace(g, g.write(tmp), rnd, n_headers=30, n_points=4)


def test_the_generated_networks_have_the_hard_cases(tmp_path):
    """Over a few seeds: the cases the generator is for occur, and the comparison sees
    deliveries, loops and both ACL outcomes (so the property test is not vacuous)."""
    found = set()
    totals = [0, 0]
    permit = deny = 0
    for seed in range(6):
        g = generate(random.Random(seed), routers=6, acls=5, prefixes=10, acl_lines=6)
        d = g.write(tmp_path / str(seed))
        routers = set(g.routers)
        peers: dict[tuple[str, str], set] = {}
        links = set()
        for line in g.topo:
            a, pa, b, pb = line.split()
            peers.setdefault((a, pa), set()).add(b)
            links.add((a, pa, b, pb))
        ins = [u for u in g.updates if u.startswith("+")]
        net = load(d, inject_ports=True)
        checks = {
            "router ending in _in/_out": any(r.endswith(("_in", "_out")) for r in routers),
            "router without _rtr": any("_rtr" not in r for r in routers),
            "interface with _ in an element": any(
                el.count("_") > (acl or "").count("_") + 1 for el, acl in g.element_acl.items()
            ),
            "interface with - . /": any(re.search(r"[-./]", p) for (_, p) in peers),
            "shared interface": any(len(v) > 1 for (dev, _), v in peers.items() if dev in routers),
            "one-way link": any((b, pb, a, pa) not in links for a, pa, b, pb in links),
            "ACL chain": any(a not in routers and b not in routers for a, _, b, _ in links),
            "ACL without lines": None in g.element_acl.values(),
            "non-contiguous wildcard": any(
                w in u for u in ins for w in ("0.255.0.255", "15.15.15.15", "0.0.255.0")
            ),
            "port range": any(re.search(r" (\d+) (?!\1 )(\d+|null|any) \d+$", u) for u in ins),
            "vlan output": any(re.search(r" vlan\d+ \d+$", u) for u in ins),
            "self output": any(" self " in u for u in ins),
            "ECMP (several routes to a prefix)": any(len(u.members) > 1 for u in net.updates),
            "ECMP group with 3 routes": any(len(u.members) > 2 for u in net.updates),
            "ECMP down to one route": any(
                u.op == "-" and len(u.members) == 1 and len(prev.members) == 2
                for prev, u in itertools.pairwise(net.updates)
                if prev.rule.match_key() == u.rule.match_key()
            ),
        }
        found |= {k for k, v in checks.items() if v}
        seen = check_along_the_trace(g, d, random.Random(seed), n_headers=20, n_points=1)
        totals = [a + b for a, b in zip(totals, seen, strict=True)]
        oracle = Oracle(d, upto=len(g.updates) // 2)
        for h in sample_headers(net, 50, seed=seed):
            for acl in {a for a in g.element_acl.values() if a}:
                if oracle.acl_permits(acl, h):
                    permit += 1
                else:
                    deny += 1
    assert found == set(checks), set(checks) - found
    assert totals[0] > 100 and totals[1] > 0 and permit > 20 and deny > 20, (totals, permit, deny)


# --- malformed variants of a generated dataset: the error names the file and the line ---------
def _dataset(tmp_path):
    g = generate(random.Random(4), routers=4, acls=3, prefixes=6, acl_lines=3)
    d = g.write(tmp_path / "ds")
    acl_line = next(u for u in g.updates if u.startswith("+ acl"))
    acl, name = acl_line.split()[2], acl_line.split()[4]
    return g, d, acl, name


ANY = "0 255 any null null null any null null null"
BAD = [  # (file, line to insert at: 0 = append, the text, part of the message)
    ("topo.txt", 0, "{r} te1/1 {r2}", "a link is 'DEVICE PORT DEVICE PORT'"),
    ("topo.txt", 0, "{r} te1/1 {r} te1/1", "a link from a port to itself"),
    ("topo.txt", 0, "{r} self {r2} te1/1", "'self' is the router itself"),
    ("topo.txt", 0, "{r} ge-0/0/9 {el} xe-0/0/0", "is an ACL element (ports inport and permit)"),
    ("topo.txt", 0, "{r} te7/7 {r}_x_te7/7_inbound inport", "is not named <router>_<acl>_<port>"),
    ("vlan.txt", 0, "{r} vlan33", "a VLAN line is"),
    ("vlan.txt", 0, "{r} vlan4095 te1/1\n{r} vlan04095 te1/2", "has the number of line"),
    ("vlan.txt", 0, "{r} vlan4095 self", "VLAN member 'self' is not an interface"),
    ("updates", 2, "{first}", "updates:1 installed the same"),
    # ECMP: a second next hop is a route of its own; the same one twice is not
    ("updates", 1, "+ fwd {r} 167772160 8 self 8\n+ fwd {r} 167772161 8 self 8", "same route"),
    ("updates", 1, "+ fwd {r} 167772160 8 self 8\n- fwd {r} 167772160 8 te9/9 8", "not installed"),
    ("updates", 0, "- fwd {r} 0 0 self 0", "deletes a rule that is not installed"),
    ("updates", 1, "+ fwd {r} 167772160 8 self 9", "priority 9 is not the prefix length 8"),
    ("updates", 1, "+ fwd {r} 167772160 8 vlan 8", "unknown device"),
    ("updates", 1, "+ acl {r}_x access-list y permit {any} 5", "it does not end so"),
    ("updates", 1, "+ acl {r}_nope access-list nope permit {any} 5", "no ACL element in topo"),
    ("updates", 0, "+ acl {acl} access-list other permit {any} 5", "is access-list other here"),
    (
        "updates",
        1,
        "+ acl {acl} access-list {name} permit 0 255 any null 1 2 any null null null 5",
        "transport ports need protocol 6 or 17",
    ),
    (
        "updates",
        1,
        "+ acl {acl} access-list {name} deny 6 6 10.0.0.1 0.0.x.255 null null any null 9 8 5",
        "source 10.0.0.1 0.0.x.255 is not an address and wildcard",
    ),
    (
        "updates",
        1,
        "+ acl {acl} access-list {name} deny 6 6 any null null null any null 9 8 5",
        "destination port range 9..8 is empty",
    ),
]


@pytest.mark.parametrize("file,at,text,message", BAD)
def test_malformed_lines_name_file_and_line(tmp_path, file, at, text, message):
    g, d, acl, name = _dataset(tmp_path)
    el = next(iter(g.element_acl))
    r, r2 = g.routers[:2]
    if file == "updates" and "vlan 8" in text:  # 'vlan' alone is an interface, r not a router
        r = el
    first = g.updates[0]
    path = d / file
    old = path.read_text().splitlines(keepends=True)
    new = text.format(r=r, r2=r2, el=el, acl=acl, name=name, first=first, any=ANY) + "\n"
    at = at or len(old) + 1
    path.write_text("".join(old[: at - 1]) + new + "".join(old[at - 1 :]))
    line = at + new.count("\n") - 1  # the last line inserted
    with pytest.raises(StanfordError) as ei:
        load(d)
    assert str(ei.value).startswith(f"{path}:{line}: "), str(ei.value)
    assert message in str(ei.value)


def _mini(tmp_path, topo, updates):
    d = tmp_path / "mini"
    d.mkdir()
    (d / "topo.txt").write_text("\n".join(topo) + "\n")
    (d / "updates").write_text("\n".join(updates) + "\n")
    return d


def test_element_names_read_with_the_routers_interfaces(tmp_path):
    """`r_a_b_c_in`: ACL r_a on port b_c, or ACL r_a_b on port c. The router's interfaces
    decide; when both are interfaces of r the name is ambiguous and an error."""
    topo = [
        "s te1/1 r c",
        "s te2/2 r_a_b_c_in inport",
        "r_a_b_c_in permit r c",
        "r b_c s te3/3",
    ]
    lines = [f"+ acl r_a_b access-list a_b permit {ANY} 9", f"+ acl r_a access-list a deny {ANY} 9"]
    with pytest.raises(StanfordError) as ei:
        load(_mini(tmp_path, topo, lines))
    msg = str(ei.value)
    assert msg.startswith(f"{tmp_path / 'mini' / 'topo.txt'}:2: ") and "ambiguous" in msg
    assert "ACL r_a on r b_c or ACL r_a_b on r c" in msg
    # Without interface b_c the only reading is ACL r_a_b on port c; then r_a has no element.
    (tmp_path / "mini" / "topo.txt").write_text("\n".join(topo[:3]) + "\n")
    with pytest.raises(StanfordError, match=r"updates:2: unknown device 'r_a' \(no ACL elem"):
        load(tmp_path / "mini")
    (tmp_path / "mini" / "updates").write_text(lines[0] + "\n")
    net = load(tmp_path / "mini")
    assert net.element_acl == {"r_a_b_c_in": "r_a_b"} and net.routers == ["r", "s"]


def test_vlan_named_outputs_and_interfaces(tmp_path):
    """`vlanN` out: the VLAN of vlan.txt, or an interface of that name in topo.txt; a
    name that is both is an error."""
    d = _mini(tmp_path, ["r vlan5 s te1", "s te1 r vlan5"], ["+ fwd r 0 0 vlan5 0"])
    net = load(d)
    (e,) = net.entries(net.updates[0].rule)
    assert e.instructions == Instructions((("output", net.port_of[("r", "vlan5")]),))
    (d / "vlan.txt").write_text("r vlan7 te2\nr vlan5 te9\n")
    with pytest.raises(StanfordError, match=r"vlan.txt:2: r vlan5 is also an interface"):
        load(d)
    (d / "vlan.txt").write_text("r vlan7 te2\n")
    (d / "updates").write_text("+ fwd r 0 0 vlan7 0\n+ fwd r 1 32 vlan8 32\n")
    with pytest.raises(StanfordError, match=r"updates:2: r has no vlan8 in vlan.txt \(nor an"):
        load(d)


def test_cli_writes_a_dataset_the_bench_replays(tmp_path, capsys):
    from bench.stanford import main as bench_main
    from pazzdata.tracegen import main

    d = tmp_path / "net"
    main([str(d), "--routers", "4", "--acls", "3", "--prefixes", "8", "--seed", "3"])
    lines = (d / "updates").read_text().splitlines()
    out = bench_main(["--dataset", str(d), "--json"])
    assert out["complete"] and out["updates"] == len(lines)
    assert out["classes_after_delete"] == 1 and out["classes_build"] == out["classes_after_insert"]
    assert sorted(p.name for p in d.iterdir()) == ["acls", "topo.txt", "updates", "vlan.txt"]
