"""The exact edges of covered blocks: a hidden /28 or /32 at either end of an ACL's /24
(the intended ACL drops the /24, the hidden entry lets its first or last addresses through)
is probed within the bound that the plan's allocation gives, checked with Match.contains
on the hidden entry's match."""

from __future__ import annotations

import pytest

from cpc.model import Model
from cpc.rules import Match
from cpc.witness import representative
from fuzzer.hspace import valid_headers
from fuzzer.plan import EDGE_EVERY, default_shares
from fuzzer.region import BlockEdges, field_intervals
from pazzdata.workloads import ACL_PRIORITY, generate
from tests.fuzzer.plans import plan_for


@pytest.fixture(scope="module")
def net():
    wl = generate("grid", 2, 300, rule_ids=True, seed=6)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    acls = [e for e in wl.entries if e.priority == ACL_PRIORITY]
    assert acls
    return wl, model, acls


def _hidden(acl, side: str, plen: int) -> Match:
    """The ACL's match with its /24 cut to the first or last /plen."""
    fields = {f: (v, m) for f, v, m in acl.match.fields}
    v, m = fields["ipv4_dst"]
    assert m == 0xFFFFFF00
    mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
    fields["ipv4_dst"] = (v if side == "low" else v | (0xFF & mask), mask)
    return Match.build(fields)


@pytest.mark.parametrize(
    ("plen", "sampling", "acls_tried", "ingresses"),
    # a /28 at either end, at the dense and the sparse shares; a /32 at the exact edge
    # (the walk alone would take about 256 visits per block of the cell for it)
    [(28, 1, 4, 2), (28, 100, 4, 2), (32, 1, 2, 1)],
)
@pytest.mark.parametrize("side", ["low", "high"])
def test_a_hidden_prefix_at_an_acl_edge_is_probed_within_the_bound(
    net, side, plen, sampling, acls_tried, ingresses
):
    wl, model, acls = net
    sp = model.space
    edges = model.topo.edge_ports()
    checked = 0
    for acl in acls[:acls_tried]:
        hidden = _hidden(acl, side, plen)
        for ingress in [p for p in edges if p[0] != acl.dpid][:ingresses]:
            plan = plan_for(model, ingress, 7, shares=default_shares(sampling))
            # the cell of the ACL's dropped headers from this ingress, and its blocks
            h0 = representative(sp, sp.match_bdd(acl.match.fields) & valid_headers(sp))
            cls = model.classify(h0)
            if not sp.contains(plan._residual, h0):
                continue  # production traffic from here reaches the ACL's /24 otherwise
            cell = sp.bdd.exist(sp.id_names, model.part.bdd_of[cls] & plan._residual)
            blocks = field_intervals(sp, cell, "ipv4_dst", limit=BlockEdges.MAX_BLOCKS)
            assert blocks and len(blocks) <= BlockEdges.MAX_BLOCKS
            lo, hi = next((a, b) for a, b in blocks if a <= h0["ipv4_dst"] <= b)
            if (lo, hi) != (h0["ipv4_dst"] & 0xFFFFFF00, h0["ipv4_dst"] | 0xFF):
                continue  # the /24 is not a block of its own in this cell
            # the exact edge of one side of one of B blocks: within 4B of the cell's edge
            # draws, one in EDGE_EVERY of its draws
            bound = plan.probes_bound("class", EDGE_EVERY * 4 * len(blocks))
            for _ in range(bound):
                pr = plan.next_probe()
                if hidden.contains(pr.header, ingress[1]):
                    break
            else:
                pytest.fail(f"{side} /28 of {acl.match} from {ingress}: none in {bound} probes")
            checked += 1
    assert checked >= min(2, acls_tried * ingresses)
