"""The incremental intent checks against a brute force over the reference data plane.

After every FlowMod of a random sequence, for every policy and sampled header, the set of
violations the checker holds for that header (the details under which it is a violating
header) equals what sending the header through cpc.refdp, one packet at a time, says.
"""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpc.intents import IntentChecker, Policy, blackhole_reason, cycle_of, reply_header
from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.results import Delivery, Hop
from cpc.rules import FlowMod, Instructions, Match, ModelError
from tests.cpc.netgen import DSTS, flowmods, groups_for, matches, networks
from tests.cpc.test_model_vs_bruteforce import unique_priorities


@st.composite
def policies(draw, topo):
    edges = topo.edge_ports()
    out = [Policy("loops", "loop_free"), Policy("holes", "blackhole_free")]
    for kind in ("reach", "isolate", "waypoint", "reply"):
        a, b = draw(st.sampled_from(edges)), draw(st.sampled_from(edges))
        m = draw(matches([1])) if draw(st.booleans()) else None
        via = frozenset({draw(st.sampled_from(sorted(topo.switches)))})
        out.append(
            Policy(
                kind,
                kind,
                src=(a,),
                dst=b,
                match=m.fields if m is not None else (),
                via=via if kind == "waypoint" else frozenset(),
            )
        )
    if draw(st.booleans()):  # a scoped one: some ingresses, some headers
        scope = tuple(draw(st.lists(st.sampled_from(edges), min_size=1, max_size=2, unique=True)))
        m = draw(matches([1]))
        out.append(Policy("scoped", "blackhole_free", src=scope, match=m.fields))
    return out


def routes(topo, dst: int, egress) -> list[FlowMod]:
    """Shortest-path routes to dst, leaving at egress: every switch that can reach it."""
    nxt = {egress[0]: egress[1]}
    frontier = [egress[0]]
    while frontier:
        later = []
        for d in frontier:
            for (a, pa), (b, _) in sorted(topo.links.items()):
                if b == d and a not in nxt:
                    nxt[a] = pa
                    later.append(a)
        frontier = later
    m = Match.build({"eth_type": (0x0800, 0xFFFF), "ipv4_dst": (dst, 0xFFFFFFFF)})
    return [
        FlowMod("add", d, 0, 10, m, Instructions((("output", port),), (), False, None))
        for d, port in nxt.items()
    ]


@st.composite
def routed_scenarios(draw):
    """A network that delivers most destinations, then random FlowMods that break some:
    loops, blackholes, detours and rewrites."""
    topo = draw(networks())
    groups = draw(groups_for(topo))
    edges = topo.edge_ports()
    fms = []
    for dst in DSTS:
        fms += routes(topo, dst, draw(st.sampled_from(edges)))
    fms += draw(st.lists(flowmods(topo, 2), min_size=1, max_size=12))
    return topo, groups, fms


@st.composite
def full_headers(draw):
    h = {
        "eth_type": 0x0800,
        "ipv4_dst": draw(st.sampled_from(DSTS + [0x0B000001])),
        "ipv4_src": draw(st.sampled_from(DSTS[:3] + [0x0B000001])),
        "ip_proto": 0,
        "tp_dst": 0,
        "tp_src": 0,
        "vlan_vid": 0,
        "eth_dst": 0,
        "eth_src": 0,
    }
    if draw(st.booleans()):
        h["ip_proto"] = 6
        h["tp_dst"] = draw(st.sampled_from([22, 80, 443]))
        h["tp_src"] = draw(st.sampled_from([22, 80, 40000]))
    return h


def brute(topo, ref: RefDataPlane, p: Policy, h: dict) -> set[str]:
    """The details under which header h violates policy p, one packet at a time."""
    name = topo.port_name
    fields_ok = all(h.get(f, 0) & m == v for f, v, m in p.match)
    if not fields_ok:
        return set()
    out = set()
    for ing in p.src or topo.edge_ports():
        ds = ref.send_with_headers(ing, h)
        if p.kind == "loop_free":
            out |= {
                "loop " + " > ".join(name(x) for x in cycle_of(d))
                for d, _ in ds
                if d.kind == "loop"
            }
        elif p.kind == "blackhole_free":
            out |= {
                f"{topo.switches[d.hops[-1].dpid].name}: {d.reason}"
                for d, _ in ds
                if d.kind == "drop" and blackhole_reason(d.reason)
            }
        else:
            leave = [(d, f) for d, f in ds if d.kind == "egress" and d.egress == p.dst]
            if p.kind == "reach":
                bad = not leave
            elif p.kind == "isolate":
                bad = bool(leave)
            elif p.kind == "waypoint":
                bad = any(not any(hop.dpid in p.via for hop in d.hops) for d, _ in leave)
            else:  # reply
                bad = any(
                    not any(
                        r.kind == "egress" and r.egress == ing
                        for r in ref.send(p.dst, reply_header(f))
                    )
                    for _, f in leave
                )
            if bad:
                out.add(name(ing))
    return out


def held(checker: IntentChecker, p: Policy, h: dict) -> set[str]:
    space = checker.space
    out = set()
    for v in checker.open.values():
        if v.policy.name == p.name and space.contains(checker.violating(p.name, v.detail), h):
            out.add(v.detail)
    return out


def applied(data, after=lambda model, checker, fm: None):
    """A random routed network with policies, a checker following the model, and the
    FlowMods applied one at a time (after(model, checker, fm) runs after each)."""
    topo, groups, fms = data.draw(routed_scenarios())
    pols = data.draw(policies(topo))
    model = Model(topo)
    model.add_entries([], groups)
    checker = IntentChecker(model, pols)
    checker.check_all()
    model.subscribe(checker.on_update, weak=True)  # no cycle: the model goes with each example
    for fm in fms:
        if fm.command == "add" and not unique_priorities(model, fm):
            continue
        with contextlib.suppress(ModelError):
            model.apply(fm)
        after(model, checker, fm)
    return topo, pols, model, checker


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_incremental_checks_equal_bruteforce(data):
    hs = data.draw(st.lists(full_headers(), min_size=4, max_size=8))

    def compare(model, checker, fm):
        topo = model.topo
        ref = RefDataPlane(topo, model.entries(), model.groups())
        for p in checker.policies:
            for h in hs:
                assert held(checker, p, h) == brute(topo, ref, p, h), (p, h, fm)

    topo, pols, model, checker = applied(data, compare)
    # Every open violation's witness violates it, by the brute force too.
    ref = RefDataPlane(topo, model.entries(), model.groups())
    for v in checker.open.values():
        assert v.detail in brute(topo, ref, v.policy, v.witness), v


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_incremental_equals_from_scratch(data):
    """The open violations after a sequence equal those of a fresh check of the end state."""
    topo, pols, model, checker = applied(data)
    fresh = IntentChecker(model, pols)
    fresh.check_all()
    assert {k: v.classes for k, v in checker.open.items()} == {
        k: v.classes for k, v in fresh.open.items()
    }


def test_a_loop_is_named_by_its_first_repeated_port():
    """The model's walk may pass a port again before it calls the path a loop (an ALL
    group's copy is a walk state of its own): s2:2 > s5:2 > s2:2 > s5:3 > s2:2 loops from
    the first repeat on, as one packet at a time sees it."""
    at = [(1, 4), (2, 2), (5, 2), (2, 2), (5, 3), (2, 2)]
    hops = tuple(Hop(d, p, (), None) for d, p in at)
    d = Delivery((1, 4), "loop", None, hops, 0, 0, "loop back to s2:2")
    assert cycle_of(d) == ((2, 2), (5, 2))
    plain = Delivery((1, 4), "loop", None, hops[:4], 0, 0, "loop back to s2:2")
    assert cycle_of(plain) == ((2, 2), (5, 2))  # a walk that stops at the first repeat
