"""format_flow writes text that ovs-ofctl accepts and that parse_flow reads back unchanged."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings

from cpc.ofctl import format_flow, format_group, parse_flow, parse_group
from cpc.rules import FlowEntry, Instructions, Match
from tests.cpc.netgen import flowmods, groups_for, networks


@settings(max_examples=200, deadline=None)
@given(networks().flatmap(lambda t: flowmods(t, 3).map(lambda fm: fm)))
def test_round_trip(fm):
    e = fm.entry()
    back = parse_flow(format_flow(e), e.dpid).entry()
    assert (back.table, back.priority, back.cookie, back.rule_id) == (
        e.table,
        e.priority,
        e.cookie,
        e.rule_id,
    )
    assert back.match == e.match
    assert back.instructions == e.instructions


def _ovs_ofctl() -> Path | None:
    prefix = os.environ.get("PAZZ_OVS_PREFIX")
    tool = Path(prefix, "bin", "ovs-ofctl") if prefix else None
    return tool if tool and tool.exists() else None


@pytest.mark.skipif(_ovs_ofctl() is None, reason="needs the patched ovs-ofctl (PAZZ_OVS_PREFIX)")
def test_patched_ovs_ofctl_parses_every_generated_flow(tmp_path):
    from pazzdata.workloads import generate

    wl = generate("grid", 3, 300, rule_ids=True, acls=3)
    extra = [
        FlowEntry(
            1,
            0,
            5,
            wl.entries[0].match,
            Instructions((("set_field", "ipv4_dst", 0x0A000001), ("output", 2))),
        ),
        # pop_vlan needs a match that guarantees a VLAN tag (OpenFlow 1.3 consistency).
        FlowEntry(
            1,
            0,
            6,
            Match.build({"vlan_vid": (0x1000, 0x1000)}),
            Instructions((("pop_vlan",),), (("output", 3),), True, 1),
        ),
        FlowEntry(1, 1, 6, wl.entries[0].match, Instructions((), (), False, None), rule_id=9),
    ]
    flows = [format_flow(e) for e in wl.entries + extra]
    path = tmp_path / "flows.txt"
    path.write_text("\n".join(flows) + "\n")
    out = subprocess.run(
        [str(_ovs_ofctl()), "-O", "OpenFlow13", "parse-flows", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("OFPT_FLOW_MOD") == len(flows)


@settings(max_examples=200, deadline=None)
@given(networks().flatmap(groups_for))
def test_group_round_trip(groups):
    """format_group writes what parse_group reads back, and write_rules what read_rules
    reads (one place for the rule file's syntax)."""
    for g in groups:
        back = parse_group(format_group(g), g.dpid)
        assert _group_fields(back) == _group_fields(g)


def _group_fields(g) -> tuple:  # Group compares by identity
    return (g.dpid, g.group_id, g.type, g.buckets)


def test_rule_file_round_trip(tmp_path):
    from cpc.ofctl import read_rules, write_rules
    from pazzdata.workloads import generate

    wl = generate("grid", 2, 200, seed=3, rule_ids=True)
    assert wl.groups  # the grid's ECMP groups
    path = tmp_path / "rules.jsonl"
    write_rules(path, wl.entries, wl.groups)
    back = list(read_rules(path))
    groups, entries = back[: len(wl.groups)], back[len(wl.groups) :]
    assert [_group_fields(g) for g in groups] == [_group_fields(g) for g in wl.groups]
    fields = lambda e: (e.dpid, e.table, e.priority, e.match, e.instructions, e.cookie, e.rule_id)  # noqa: E731
    assert [fields(e) for e in entries] == [fields(e) for e in wl.entries]
