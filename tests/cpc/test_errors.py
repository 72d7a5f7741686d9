"""Bad topology and rule files give errors that name the file, the line and the field."""

from __future__ import annotations

import pytest

from cpc.model import Model
from cpc.rules import ModelError
from cpc.topology import TopologyError, load_topology

GOOD_TOPO = """\
switches:
  - {name: s1, dpid: 1, ports: [1, 2]}
  - {name: s2, dpid: 2, ports: [1, 2]}
links:
  - [s1:1, s2:1]
edge:
  - s1:2
  - s2:2
"""


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    "text, line, words",
    [
        (GOOD_TOPO.replace("dpid: 2,", "dpid: x2,"), 3, "dpid"),
        (GOOD_TOPO.replace("[s1:1, s2:1]", "[s1:1, s9:1]"), 5, "unknown switch 's9'"),
        (GOOD_TOPO.replace("  - s2:2", "  - s1:1"), 8, "used twice"),
        (
            GOOD_TOPO.replace("ports: [1, 2]}\n  - {name: s2", "ports: [1, -2]}\n  - {name: s2"),
            2,
            "port -2",
        ),
        (GOOD_TOPO + "hosts: []\n", 9, "unknown key 'hosts'"),
        (GOOD_TOPO.replace("links:", "links: [\n"), 6, "expected"),
        (GOOD_TOPO.replace("dpid: 2,", "dpid: 1,"), 3, "twice"),
    ],
)
def test_topology_errors_name_the_line(tmp_path, text, line, words):
    p = write(tmp_path, "t.yaml", text)
    with pytest.raises(TopologyError) as e:
        load_topology(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:{line}:"), msg
    assert words in msg


@pytest.mark.parametrize(
    "rules, line, words",
    [
        (
            '{"dpid": 1, "flow": "priority=1,ip,nw_dst=10.0.0.0/8,actions=output:1"}\n{"dpid": 1, "flow": "priority=1,nw_dst=300.0.0.1,actions=output:1"}\n',
            2,
            "ipv4_dst",
        ),
        (
            '{"dpid": 1, "flow": "priority=1,actions=output:1"}\n{"dpid": 1 "flow": 3}\n',
            2,
            "not valid JSON",
        ),
        ('{"dpid": 7, "flow": "priority=1,actions=output:1"}\n', 1, "unknown switch dpid 7"),
        (
            '{"dpid": 1, "flow": "priority=1,actions=output:1"}\n{"dpid": 7, "flow": "priority=1,actions=output:1"}\n',
            2,
            "unknown switch dpid 7",
        ),
        (
            '{"dpid": 1, "flow": "priority=1,actions=output:1"}\n{"dpid": 1, "flow": "table=1,priority=1,actions=goto_table:1"}\n',
            2,
            "goto_table",
        ),
        ('{"dpid": 1, "flow": "priority=1,ip,nw_tos=4,actions=output:1"}\n', 1, "nw_tos"),
        ('{"dpid": 1, "flow": "priority=1,actions=resubmit(,1)"}\n', 1, "not modelled"),
        ('{"dpid": 1, "flow": "priority=1,tp_dst=80,actions=output:1"}\n', 1, "ip_proto"),
        ('{"dpid": 1, "group": "group_id=1,type=ff,bucket=output:1"}\n', 1, "group type"),
        (
            "## dpid=1\n cookie=0x0, table=0, priority=5,ip actions=output:1\n priority=5,ip,in_port=eth0 actions=output:1\n",
            3,
            "--no-names",
        ),
        (" priority=5,ip actions=output:1\n", 1, "dpid"),
    ],
)
def test_rule_errors_name_the_line(tmp_path, rules, line, words):
    topo = load_topology(write(tmp_path, "t.yaml", GOOD_TOPO))
    p = write(tmp_path, "r.rules", rules)
    model = Model(topo)
    with pytest.raises(ModelError) as e:
        model.load_rules(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:{line}:"), msg
    assert words in msg
    assert model.rule_count() == 0, "a bad file is not half-applied"


def test_dump_flows_text_loads(tmp_path):
    topo = load_topology(write(tmp_path, "t.yaml", GOOD_TOPO))
    text = """## dpid=1
OFPST_FLOW reply (OF1.3) (xid=0x2):
 cookie=0x5, duration=12.3s, table=0, n_packets=3, n_bytes=180, priority=10,tcp,nw_dst=10.0.0.0/24,tp_dst=80 actions=set_verify_rule:9,output:1
 cookie=0x0, duration=12.3s, table=0, n_packets=0, n_bytes=0, priority=0 actions=drop
## dpid=2
 cookie=0x0, duration=1s, table=0, n_packets=0, n_bytes=0, priority=1,ip actions=output:2
"""
    model = Model(topo)
    assert model.load_rules(write(tmp_path, "d.txt", text)) == 3
    e = next(e for e in model.entries(1) if e.priority == 10)
    assert (e.cookie, e.rule_id, e.match.get("tp_dst")) == (5, 9, (80, 0xFFFF))
