"""A table cuts a header set with one destination address from its prefix index
(cpc.tables.Identities._split_by_dst), so that traces never build the label that every
later update would then keep up to date. Checked against the label's cut on random
networks and FlowMods, and HeaderSpace.one_dst against plain BDD algebra."""

from __future__ import annotations

import contextlib
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import ModelError
from cpc.space import HeaderSpace
from pazzdata.workloads import generate
from tests.cpc.netgen import scenarios


def test_one_dst_is_the_destination_every_header_shares():
    sp = HeaderSpace()
    rng = random.Random(3)
    for _ in range(2000):
        d = rng.getrandbits(32)
        one = sp.header_bdd({"ipv4_dst": d})
        u = rng.choice(
            [
                one & sp.field_bdd("tp_dst", rng.getrandbits(16), 0xFFFF),
                one & ~sp.field_bdd("tp_dst", 80, 0xFFFF),
                one | sp.header_bdd({"ipv4_dst": d ^ (1 << rng.randrange(32))}),
                sp.field_bdd("ipv4_dst", d, 0xFFFFFF00),
                one & sp.field_bdd("ip_proto", 6, 0xFF) & ~sp.field_bdd("ip_proto", 6, 0xFF),
            ]
        )
        # The oracle: u is not empty and holds no header with another destination.
        single = u != sp.false and u & ~one == sp.false
        assert sp.one_dst(u) == (d if single else None)
    assert sp.one_dst(sp.true) is None and sp.one_dst(sp.false) is None


def _cut(pieces) -> set:
    return {(None if b is None else b.ur, int(part)) for b, part in pieces}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.data())
def test_split_by_dst_equals_the_labels_cut(sc, data):
    topo, groups, fms, headers = sc
    model = Model(topo)
    model.add_entries([], groups)
    for fm in fms:
        with contextlib.suppress(ModelError):
            model.apply(fm)
    sp = model.space
    checked = 0
    for el in model._elem_list:
        ident = el.ident
        for h in headers:
            hdr = sp.header_bdd(h)
            if data.draw(st.booleans()):  # a set of headers, not just one
                hdr = hdr | sp.header_bdd({**h, "tp_dst": (h.get("tp_dst", 0) + 1) & 0xFFFF})
            by_dst = ident._split_by_dst(hdr)
            if by_dst is None:
                continue
            checked += 1
            assert _cut(by_dst) == _cut(ident._split_by_label(hdr))


def test_traces_build_no_label_and_agree_with_the_reference():
    """3,000 traces on a routing network: no table builds its label (so later updates
    keep their cost), and every trace says what the reference data plane does."""
    wl = generate("fattree", 4, 3000, seed=2, rule_ids=True)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    ref = RefDataPlane(wl.topo, wl.entries, wl.groups)
    rng = random.Random(2)
    nets, ingresses = sorted(wl.prefixes), wl.topo.edge_ports()
    for _ in range(3000):
        ing = rng.choice(ingresses)
        h = {
            "eth_type": 0x0800,
            "ipv4_dst": rng.choice(nets) | rng.randrange(1, 255),
            "ipv4_src": 7,
            "ip_proto": 6,
            "tp_src": 1234,
            "tp_dst": rng.choice((22, 80)),
        }
        got = sorted((d.kind, d.egress, d.verify_port, d.verify_rule) for d in model.trace(ing, h))
        want = sorted((d.kind, d.egress, d.verify_port, d.verify_rule) for d in ref.send(ing, h))
        assert got == want, h
    assert [el for el in model._elem_list if not el.ident._label_stale] == []
