"""The callout's difference between the entry on a switch and the intended one
(pazzd.ui.entrydiff): the field that differs is named with both values, what both share
leads, and the set_verify_rule the proxy adds is not a difference."""

from __future__ import annotations

from pazzd.ui.entrydiff import entry_difference

DUMPED = (
    " cookie=0x10, duration=3.2s, table=0, n_packets=4, n_bytes=400, "
    "priority=24,ip,nw_dst=10.0.1.0/24 actions=set_verify_rule:7,output:3"
)
INTENDED = (
    "table=0,priority=24,cookie=0x10,ip,nw_dst=10.0.1.0/24,actions=set_verify_rule:7,output:4"
)


def test_a_changed_output_names_the_port_and_the_intended_one():
    d = entry_difference(DUMPED, INTENDED)
    assert d["text"] == "nw_dst=10.0.1.0/24: output:3 (intended 4)"
    assert d["parts"] == ["output:3 (intended 4)"]


def test_a_changed_match_priority_and_action_kind():
    got = "table=0,priority=30,cookie=0x99,tcp,nw_dst=10.0.1.0/25,tp_dst=80,actions=group:2"
    d = entry_difference(got, INTENDED)
    assert "priority=30 (intended 24)" in d["parts"]
    assert "cookie=0x99 (intended 0x10)" in d["parts"]
    assert "nw_dst=10.0.1.0/25 (intended 10.0.1.0/24)" in d["parts"]
    assert "tcp_dst=80 (intended any)" in d["parts"]
    assert "tcp (intended ip)" in d["parts"]
    assert "group:2 (intended output:4)" in d["parts"]
    assert not any("set_verify_rule" in p for p in d["parts"])


def test_missing_and_hidden_entries():
    d = entry_difference(None, INTENDED)
    assert d["text"] == "nw_dst=10.0.1.0/24: missing (intended output:4)"
    d = entry_difference("priority=40,ip,nw_dst=10.0.1.9 actions=drop", None)
    assert d["text"] == "nw_dst=10.0.1.9: drop (no intended entry)"
    assert entry_difference(None, None) is None


def test_groups_show_the_differing_buckets():
    d = entry_difference(
        "group_id=1,type=select,bucket=output:2,bucket=output:5",
        "group_id=1,type=select,bucket=output:2,bucket=output:3",
    )
    assert d["text"] == "group_id=1: bucket=output:5 (intended bucket=output:3)"
