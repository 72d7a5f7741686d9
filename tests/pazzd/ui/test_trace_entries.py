"""The trace answer's per-hop match and actions (pazzd.answers.trace): for every hop, the
entry named is the one the reference data plane's plain linear scan (cpc.refdp's table
order: highest priority first) finds for the header there; with and without rule IDs (the
routes of one switch then share table, priority and cookie, and only the header tells
them apart)."""

from __future__ import annotations

import random

import pytest

from cpc.model import Model
from cpc.ofctl import format_actions, format_match
from cpc.refdp import RefDataPlane
from pazzd import answers
from pazzdata import workloads


@pytest.mark.parametrize("rule_ids", [True, False])
def test_each_hop_names_the_entry_the_header_matched(rule_ids):
    wl = workloads.generate("grid", 3, 150, rule_ids=rule_ids, acls=2)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    model.build()
    tables = RefDataPlane(wl.topo, wl.entries, wl.groups).tables
    rng = random.Random(5)
    nets = sorted(wl.prefixes)
    hops = 0
    for _ in range(40):
        src = rng.choice(sorted(wl.hosts))
        dst = rng.choice(nets) + rng.randrange(1, 250)
        text = (
            f"ipv4_src=10.9.0.1,ipv4_dst={dst >> 24}.{dst >> 16 & 255}.{dst >> 8 & 255}.{dst & 255}"
        )
        text += f",tcp_dst={rng.choice([22, 80, 445])}"
        ans = answers.trace(wl.topo, model, wl.topo.port_name(wl.hosts[src]), text)
        hdr = answers.header_arg(text)
        for o in ans["outcomes"]:
            for h in o["hops"]:
                for r in h["rules"]:
                    want = next(
                        e
                        for e in tables[(h["dpid"], r["table"])]
                        if e.match.contains(hdr, h["in_port"])
                    )
                    assert r["match"] == (format_match(want.match) or "any")
                    assert r["actions"] == format_actions(want.instructions, want.rule_id)
                    hops += 1
    assert hops > 40
