"""A property over generated networks (pazzdata.workloads: grids and fat-trees, ACLs at the
edge, SELECT groups): a route that one switch sends out of another link is judged, at the
switch that link leads to, as a Type-p action fault of the switch that misrouted it when
the intended network delivers that packet (also where its intended path ends at the misrouting
switch; where only other ingresses bring the header to that port: test_tester_detect),
and as Type-a when the intended network drops it. The oracle is the reference data plane:
it knows which switch's entry was changed, which arrival came over the wrong link, and
what the intended network does with the packet.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import Instructions
from pazzdata import workloads
from pazzlab.flowhash import select_bucket
from tester.detect import TYPE_A, TYPE_P_ACTION
from tester.emit import ReferenceEmitter
from tests.tester.test_tester_e2e import make_tester

NETWORKS = [("grid", 2, 100, s) for s in (1, 2, 3)] + [("grid", 3, 200, 4), ("fattree", 4, 300, 5)]


def _misroutes(wl, rng):
    """(entry, wrong port): single-output routes sent out of another link of their switch."""
    topo = wl.topo
    for e in wl.entries:
        a = e.instructions.apply
        if len(a) != 1 or a[0][0] != "output" or e.match.get("ipv4_dst") is None:
            continue
        links = [p for p in topo.ports_of(e.dpid) if (e.dpid, p) in topo.links and p != a[0][1]]
        if links:
            yield e, rng.choice(links)


def _header(rng, e, k: int) -> dict:
    v, msk = e.match.get("ipv4_dst")
    return {
        "eth_type": 0x0800,
        "ipv4_src": 0x0A000000 | rng.getrandbits(16),
        "ipv4_dst": v | (rng.getrandbits(32) & ~msk & 0xFFFFFFFF),
        "ip_proto": 6,
        "tp_src": 4000 + k,
        "tp_dst": 80,
    }


@pytest.mark.parametrize("kind,size,rules,seed", NETWORKS)
def test_misroute_onto_a_link_is_judged_at_the_next_switch(
    tmp_path, kind, size, rules, seed
) -> None:
    wl = workloads.generate(kind, size, rules, seed=seed, rule_ids=True, acls=2)
    m = Model(wl.topo)
    m.add_entries(wl.entries, wl.groups)
    m.build()
    rng = random.Random(seed)
    # A SELECT group sends each packet down the bucket the switch's hash picks, as OVS does
    # and as the model expects (one path; every bucket would branch at each hop of a loop).
    intended = RefDataPlane(wl.topo, wl.entries, wl.groups, select=select_bucket)
    seen = {"judged": 0, "dropped": 0}
    for k, (e, port) in enumerate(_misroutes(wl, rng)):
        if seen["judged"] >= 60:
            break
        peer = wl.topo.links[(e.dpid, port)]
        bad = dataclasses.replace(e, instructions=Instructions((("output", port),)))
        entries = [bad if x is e else x for x in wl.entries]
        ref = RefDataPlane(wl.topo, entries, wl.groups, select=select_bucket)
        for src, ingress in sorted(wl.hosts.items()):
            h = _header(rng, e, k)
            # The arrival over the wrong link, the packet having matched the changed entry.
            wrong = [
                a
                for a in ref.arrivals(ingress, h)[:16]
                if a[0] == peer
                and a[4][-1].dpid == e.dpid
                and a[4][-1].out_port == port
                and any(r.rule_id == e.rule_id for r in a[4][-1].rules)
            ]
            if not wrong:
                continue
            d = tmp_path / f"{k}-{src}"
            d.mkdir()
            t, store = make_tester(d, wl, m)
            em = ReferenceEmitter(ovs_marking=True)
            em.add_arrivals(wrong[:1])
            for dg in em.flush():
                t.process_datagram(dg, 1.0)
            if t.stats.hop_unjudged:
                continue  # a class the model cannot judge per hop (a rewrite makes it)
            (f,) = store.faults()
            if any(x.kind == "egress" for x in intended.send(ingress, h)):
                want = (TYPE_P_ACTION, f"dpid:{e.dpid}")
            else:  # the intended network drops it: forwarding it at all is the fault
                want = (TYPE_A, f"hop:{peer[0]}:{peer[1]}")
                seen["dropped"] += 1
            what = (hex(h["ipv4_dst"]), f"s{e.dpid} out {port}", src)
            assert (f.kind, f.location) == want, (what, f.kind, f.location)
            seen["judged"] += 1
    assert seen["judged"] >= 10 and seen["dropped"] < seen["judged"], (kind, size, seen)
