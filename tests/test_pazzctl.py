"""pazzctl trace and reach against the independent brute-force data plane."""

from __future__ import annotations

import json

from cpc.fields import parse_header
from cpc.refdp import RefDataPlane
from cpc.workloads import generate
from pazzd.cli import main


def test_trace_and_reach(tmp_path, capsys):
    wl = generate("grid", 3, 300, rule_ids=True, acls=2)
    topo_p, rules_p = tmp_path / "t.yaml", tmp_path / "r.jsonl"
    wl.write(topo_p, rules_p)
    net = sorted(wl.prefixes)[5]
    header = f"ipv4_dst={(net >> 24) & 255}.{(net >> 16) & 255}.{(net >> 8) & 255}.9,tcp_dst=80"
    src = wl.hosts["h1"]
    assert main(["trace", "--topology", str(topo_p), "--rules", str(rules_p), "--in", f"s{src[0]}:{src[1]}",
                 "--header", header, "--json"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    want = RefDataPlane(wl.topo, wl.entries, wl.groups).send(src, parse_header(header))
    got = {(o["egress"], o["verify_port"], o["verify_rule"]) for o in out["outcomes"]}
    assert got == {(wl.topo.port_name(d.egress) if d.egress else None, f"0x{d.verify_port:08x}",
                    f"0x{d.verify_rule:04x}") for d in want}  # fmt: skip
    dst = wl.hosts[wl.prefixes[net]]
    assert main(["reach", "--topology", str(topo_p), "--rules", str(rules_p), "--from", f"s{src[0]}:{src[1]}",
                 "--to", f"s{dst[0]}:{dst[1]}", "--json"]) == 0  # fmt: skip
    reach = json.loads(capsys.readouterr().out)
    assert reach["headers"] > 0 and reach["cubes"]
    # Human output: a table per outcome.
    assert main(["trace", "--topology", str(topo_p), "--rules", str(rules_p), "--in", f"s{src[0]}:{src[1]}",
                 "--header", header]) == 0  # fmt: skip
    assert "expected Verify_Port" in capsys.readouterr().out


def test_errors_exit_2(tmp_path, capsys):
    wl = generate("grid", 2, 40)
    wl.write(tmp_path / "t.yaml", tmp_path / "r.jsonl")
    rc = main(["trace", "--topology", str(tmp_path / "t.yaml"), "--rules", str(tmp_path / "r.jsonl"),
               "--in", "s9:1", "--header", "ipv4_dst=10.0.0.1"])  # fmt: skip
    assert rc == 2 and "unknown switch 's9'" in capsys.readouterr().err
