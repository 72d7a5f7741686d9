"""pazzctl in ovs-ofctl's terms, in file mode: ofctl shorthands in headers, host names for
ports, trace's matched entries against a brute-force scan of the rules file, reach's
summary against the reference data plane, and exit status 2 for every input error."""

from __future__ import annotations

import ipaddress
import json
import math
import random
import re

import pytest

from cpc.ofctl import parse_flow, read_rules
from cpc.refdp import RefDataPlane
from cpc.rules import FlowEntry
from cpc.spacesummary import count_text
from pazzd import cli
from pazzdata.workloads import generate

ETH_IP, TCP, UDP, ICMP = 0x0800, 6, 17, 1


@pytest.fixture(scope="module", params=[True, False], ids=["rule_ids", "no_rule_ids"])
def files(request, tmp_path_factory):
    """A 3x3 grid with ACLs on disk; without rule IDs many routes share one RuleRef."""
    d = tmp_path_factory.mktemp("wl")
    wl = generate("grid", 3, 300, rule_ids=request.param, acls=2)
    wl.write(d / "t.yaml", d / "r.jsonl")
    return wl, ["--topology", str(d / "t.yaml"), "--rules", str(d / "r.jsonl")], d / "r.jsonl"


def _run(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def _port(wl, host: str) -> str:
    d, p = wl.hosts[host]
    return f"s{d}:{p}"


def _deliveries(wl, ingress, header: dict) -> set:
    full = dict.fromkeys(
        ("ipv4_dst", "ipv4_src", "ip_proto", "tp_dst", "tp_src", "eth_type", "vlan_vid"), 0
    )
    full.update(eth_dst=0, eth_src=0, **header)
    ref = RefDataPlane(wl.topo, wl.entries, wl.groups)
    return {
        (wl.topo.port_name(d.egress) if d.egress else None, d.verify_port, d.verify_rule)
        for d in ref.send(ingress, full)
    }


def test_ofctl_shorthands_are_headers(files, capsys):
    """tcp, udp, icmp, ip and arp stand for their eth_type and ip_proto, as in ovs-ofctl;
    the outcomes are the reference data plane's for the header spelled out by hand."""
    wl, model, _ = files
    net = sorted(wl.prefixes)[4]
    dst = str(ipaddress.IPv4Address(net + 9))
    cases = [
        (f"tcp,nw_dst={dst},tp_dst=80", {"ipv4_dst": net + 9, "eth_type": ETH_IP, "ip_proto": TCP, "tp_dst": 80}),
        (f"udp,nw_dst={dst},udp_dst=53", {"ipv4_dst": net + 9, "eth_type": ETH_IP, "ip_proto": UDP, "tp_dst": 53}),
        (f"icmp,nw_dst={dst}", {"ipv4_dst": net + 9, "eth_type": ETH_IP, "ip_proto": ICMP}),
        (f"ip,nw_dst={dst},nw_src=10.0.0.9", {"ipv4_dst": net + 9, "ipv4_src": _ip("10.0.0.9"), "eth_type": ETH_IP}),
        ("arp", {"eth_type": 0x0806}),
    ]  # fmt: skip
    src = wl.hosts["h1"]
    for text, header in cases:
        rc, out, err = _run(capsys, "trace", *model, "--in", "h1", "--header", text, "--json")
        assert rc == 0, err
        got = {
            (o["egress"], int(o["verify_port"], 16), int(o["verify_rule"], 16))
            for o in json.loads(out)["outcomes"]
        }
        assert got == _deliveries(wl, src, header), text


def test_host_names_are_ports(files, capsys):
    wl, model, _ = files
    header = f"tcp,nw_dst={ipaddress.IPv4Address(sorted(wl.prefixes)[7] + 9)},tp_dst=80"
    for host in ("h1", "h5", "h9"):
        by_name = _run(capsys, "trace", *model, "--in", host, "--header", header, "--json")
        by_port = _run(
            capsys, "trace", *model, "--in", _port(wl, host), "--header", header, "--json"
        )
        dpid = str(wl.hosts[host][0])
        by_dpid = _run(capsys, "trace", *model, "--in", f"{dpid}:{wl.hosts[host][1]}", "--header", header, "--json")  # fmt: skip
        assert by_name[0] == by_port[0] == by_dpid[0] == 0
        assert json.loads(by_name[1]) == json.loads(by_port[1]) == json.loads(by_dpid[1])
    a = _run(capsys, "reach", *model, "--from", "h1", "--to", "h9", "--json")
    b = _run(capsys, "reach", *model, "--from", _port(wl, "h1"), "--to", _port(wl, "h9"), "--json")
    assert a[0] == b[0] == 0 and json.loads(a[1]) == json.loads(b[1])
    # The human views name the host next to its port.
    rc, out, _ = _run(capsys, "trace", *model, "--in", "h1", "--header", header)
    assert rc == 0 and f"in_port={wl.hosts['h1'][1]} (h1)" in out


# --- trace: each hop's entries -----------------------------------------------------------------
def _winners(entries: list[FlowEntry], dpid: int, in_port: int, header: dict) -> list[FlowEntry]:
    """The oracle: scan the switch's entries of the rules file by priority, table 0 along
    goto_table (the highest priority that matches; the workload has no ties)."""
    out, table = [], 0
    while table is not None:
        best = None
        for e in entries:
            if e.dpid != dpid or e.table != table:
                continue
            if e.match.in_port is not None and e.match.in_port != in_port:
                continue
            hit = all((header.get(f, 0) & m) == v for f, v, m in e.match.fields)
            if hit and (best is None or e.priority > best.priority):
                best = e
        if best is None:
            break
        out.append(best)
        table = best.instructions.goto
    return out


HOP = re.compile(r"^  (\S+): in_port=(\d+)")
ENTRY = re.compile(r"^    (\d+)\. (?:(.*), )?priority (\d+), cookie (0x[0-9a-f]+)$")


def _printed_hops(text: str) -> list[list[tuple]]:
    """Per outcome, per hop: (switch, in_port, [(table, priority, cookie, match, actions)])."""
    outcomes, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("outcome "):
            outcomes.append([])
        elif m := HOP.match(line):
            outcomes[-1].append((m[1], int(m[2]), []))
        elif m := ENTRY.match(line):
            actions = lines[i + 1].strip()
            outcomes[-1][-1][2].append((int(m[1]), int(m[3]), m[4], m[2] or "", actions))
    return outcomes


OVS_NAME = {"ipv4_dst": "nw_dst", "ipv4_src": "nw_src", "ip_proto": "nw_proto",
            "tp_dst": "tp_dst", "tp_src": "tp_src", "eth_type": "dl_type"}  # fmt: skip


def _text(header: dict) -> str:
    """A header in ovs-ofctl's own field names, written by hand."""
    out = []
    for f, v in header.items():
        value = str(ipaddress.IPv4Address(v)) if f.startswith("ipv4") else str(v)
        out.append(f"{OVS_NAME[f]}={value}")
    return ",".join(out)


def _key(e: FlowEntry) -> tuple:
    return (e.table, e.priority, e.cookie, e.match, e.instructions, e.rule_id)


def _headers(entries: list[FlowEntry], wl) -> list[dict]:
    """Headers that meet the ACLs (each ACL's match with host addresses) and plain routes."""
    out = []
    for e in entries:
        if e.priority == 1000:  # the workload's ACLs
            h = {f: v for f, v, _ in e.match.fields}
            h["ipv4_dst"] = h.get("ipv4_dst", 0) + 9
            h["ipv4_src"] = h.get("ipv4_src", 0) + 9
            out.append(h)
    rnd = random.Random(7)
    for net in rnd.sample(sorted(wl.prefixes), 6):
        out.append({"ipv4_dst": net + 9, "ipv4_src": _ip("10.0.0.9"), "eth_type": ETH_IP,
                    "ip_proto": TCP, "tp_dst": 80})  # fmt: skip
    return out


def test_trace_prints_the_entries_a_scan_of_the_rules_file_finds(files, capsys):
    """Each hop's printed entries (read back with the ofctl parser) are the ones a
    brute-force scan of the rules file picks, at the hops the reference data plane takes."""
    wl, model, rules = files
    entries = [e for e in read_rules(rules) if isinstance(e, FlowEntry)]
    ref = RefDataPlane(wl.topo, wl.entries, wl.groups)
    names = {d: sw.name for d, sw in wl.topo.switches.items()}
    checked = 0
    for header in _headers(entries, wl)[:10]:
        full = {f: header.get(f, 0) for f in ("ipv4_dst", "ipv4_src", "ip_proto", "tp_dst", "tp_src", "eth_type", "vlan_vid", "eth_dst", "eth_src")}  # fmt: skip
        text = _text(header)
        for host in ("h1", "h5"):
            rc, out, err = _run(capsys, "trace", *model, "--in", host, "--header", text)
            assert rc == 0, err
            want = sorted(
                [
                    (names[h.dpid], h.in_port, [_key(e) for e in _winners(entries, h.dpid, h.in_port, full)])
                    for h in d.hops
                ]
                for d in ref.send(wl.hosts[host], full)
            )  # fmt: skip
            got = sorted(
                [
                    (sw, in_port, [
                        _key(parse_flow(f"table={t},priority={p},cookie={c},{m},actions={a}", 0).entry())
                        for t, p, c, m, a in es
                    ])
                    for sw, in_port, es in hops
                ]
                for hops in _printed_hops(out)
            )  # fmt: skip
            assert got == want, out
            checked += sum(len(es) for o in got for _, _, es in o)
    assert checked > 20


# --- reach: the summary --------------------------------------------------------------------------
def _group_prefixes(text: str) -> list[ipaddress.IPv4Network] | None:
    if "except" in text or "more" in text or text == "any":
        return None
    return [ipaddress.IPv4Network(x) for x in text.split(", ")]


def _inside(match: str) -> dict:
    """One header of an ofctl match (its unmasked bits 0, its host bits 9)."""
    fm = parse_flow(f"{match},actions=drop" if match != "any" else "actions=drop", 0)
    h = {f: v for f, v, _ in fm.match.fields}
    for f in ("ipv4_dst", "ipv4_src"):
        m = fm.match.get(f)
        if m is not None and m[1] != 0xFFFFFFFF:
            h[f] = m[0] + 9
    return h


def test_reach_summary_holds_what_the_data_plane_delivers(files, capsys):
    wl, model, _ = files
    src, dst = "h1", "h2"
    rc, out, err = _run(capsys, "reach", *model, "--from", src, "--to", dst, "--json")
    assert rc == 0, err
    res = json.loads(out)
    sm = res["summary"]
    assert sm["complete"] and not sm["more_groups"]
    assert sum(g["headers"] for g in sm["groups"]) == res["headers"]
    egress = wl.topo.port_name(wl.hosts[dst])
    delivered = lambda h: any(e == egress for e, _, _ in _deliveries(wl, wl.hosts[src], h))  # noqa: E731
    seen_except = 0
    for g in sm["groups"]:
        nets = _group_prefixes(g["nw_dst"])
        assert nets, g
        for net in nets:
            # A header of the group's match outside its exceptions arrives; one of each
            # exception does not.
            h = {**_inside(g["match"]), "ipv4_dst": int(net.network_address) + 9,
                 "ipv4_src": _ip("10.0.99.9"), "ip_proto": TCP, "tp_dst": 80}  # fmt: skip
            assert delivered(h), (g, net)
            for ex in g["except"]:
                h = {"ipv4_dst": int(net.network_address) + 9, **_inside(ex)}
                assert not delivered(h), (g, ex)
                seen_except += 1
    assert seen_except >= 1


def test_reach_prints_a_summary_not_a_58_digit_number(files, capsys):
    wl, model, _ = files
    rc, out, _ = _run(capsys, "reach", *model, "--from", "h1", "--to", "h2")
    assert rc == 0
    first = out.splitlines()[0]
    assert first.startswith("s1:5 (h1) -> s2:5 (h2): ") and "2^" in first, out
    assert not re.search(r"\d{13,}", out), out
    assert "nw_dst" in out.splitlines()[1]
    assert "ip,nw_dst=" not in out  # the matches themselves only under --verbose
    rc, verbose, _ = _run(capsys, "reach", *model, "--from", "h1", "--to", "h2", "--verbose")
    assert rc == 0 and verbose.startswith(out.splitlines()[0]) and "ip,nw_dst=" in verbose


def test_count_text():
    assert count_text(0) == "0" and count_text(9999) == "9999"
    assert count_text(2**24) == "2^24" and count_text(2**205) == "2^205"
    assert count_text(10**6) == f"≈2^{math.log2(10**6):.1f}"


# --- exit status -------------------------------------------------------------------------------
BAD = [
    ("trace", "--in", "s1:5", "--header", "bogus=1"),
    ("trace", "--in", "s1:5", "--header", "tcp,udp_dst=53"),
    ("trace", "--in", "s1:5", "--header", "ipv6,nw_dst=10.0.0.1"),
    ("trace", "--in", "s1:5", "--header", "ip,nw_dst=10.0.0.0/8"),
    ("trace", "--in", "h77", "--header", "ip"),
    ("trace", "--in", "s99:1", "--header", "ip"),
    ("trace", "--in", "s1:x", "--header", "ip"),
    ("reach", "--from", "s1:5", "--to", "nowhere"),
    ("reach", "--from", "s1:5", "--to", "s2:5", "--limit", "-1"),
    ("trace", "--in", "s1:5"),
    ("trace", "--in", "s1:5", "--header", "ip", "--bogus"),
]


@pytest.mark.parametrize("argv", BAD, ids=[" ".join(a[1:]) for a in BAD])
def test_input_errors_exit_2_on_files(files, capsys, argv):
    _, model, _ = files
    for extra in ((), ("--json",)):
        try:
            rc = cli.main([argv[0], *model, *argv[1:], *extra])
        except SystemExit as e:  # argparse's own usage errors
            rc = e.code
        err = capsys.readouterr().err
        assert rc == 2, (argv, err)
        if extra and not err.startswith("usage"):
            assert json.loads(err)["status"] == 2


# --- findings show, and headers written back ----------------------------------------------------
def test_findings_show_is_readable(files, monkeypatch, capsys):
    import datetime

    from cpc.fields import parse_header
    from pazzd.records import IntentFinding
    from pazzd.ui.data import topology_json

    wl, model, _ = files
    t = datetime.datetime(2026, 11, 28, 5, 13, 7, tzinfo=datetime.UTC).timestamp()
    witness = (
        "ipv4_dst=10.0.1.9,ipv4_src=10.0.0.9,ip_proto=6,tp_dst=80,tp_src=49152,eth_type=0x0800"
    )
    f = IntentFinding(
        id=4, name="web", summary="web: blocked", first_seen=t, last_seen=t, policy="web",
        check="reachable", ingress=_port(wl, "h1"), witness=witness,
    ).to_json()  # fmt: skip
    topo = topology_json(wl.topo)
    monkeypatch.setattr(cli, "_call", lambda args, cmd, **kw: topo if cmd == "topology" else f)
    monkeypatch.setenv("TZ", "UTC")
    import time

    time.tzset()
    try:
        for argv in (["findings", "show", "4"], ["intents", "show", "4"]):
            rc, out, _ = _run(capsys, *argv)
            assert rc == 0
            lines = {
                ln.split(None, 1)[0]: ln.split(None, 1)[1]
                for ln in out.splitlines()
                if ln[:1].strip()
            }
            assert (
                lines["first"]
                == "seen   2026-11-28 05:13:07 UTC   last seen 2026-11-28 05:13:07 UTC"
            )
            shown, src = lines["witness"].split("  (from ")
            assert shown.startswith("tcp,") and "ipv4_" not in shown
            assert parse_header(shown) == parse_header(witness)
            assert src == f"{_port(wl, 'h1')} (h1))"
        rc, out, _ = _run(capsys, "findings", "show", "4", "--json")
        assert rc == 0 and json.loads(out)["detail"]["witness"] == witness
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_headers_written_as_ofctl_read_back():
    """pazzctl writes headers as ofctl matches (cpc.ofctl.format_header): read back, each
    is the header it was."""
    from cpc.fields import FIELDS, parse_header
    from cpc.ofctl import format_header

    rnd = random.Random(3)
    for _ in range(300):
        h = {f: rnd.choice([0, rnd.getrandbits(w)]) for f, w in FIELDS}
        h["eth_type"] = rnd.choice([0x0800, 0x0806, 0x86DD, 0])
        if h["eth_type"] != 0x0800:  # IPv4 fields only under IPv4, as a packet has them
            h.update(ipv4_dst=0, ipv4_src=0, ip_proto=0, tp_dst=0, tp_src=0)
        elif rnd.random() < 0.7:
            h["ip_proto"] = rnd.choice([1, 6, 17, 47])
        if h["ip_proto"] not in (6, 17):
            h.update(tp_dst=0, tp_src=0)
        if h["vlan_vid"]:
            h["vlan_vid"] |= 0x1000
        text = format_header(h)
        assert "ipv4_" not in text and "eth_type" not in text
        assert parse_header(text) == h, text
