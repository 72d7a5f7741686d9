"""pazzctl trace and reach against the independent brute-force data plane."""

from __future__ import annotations

import json

from cpc.fields import parse_header
from cpc.refdp import RefDataPlane
from pazzd.cli import main
from pazzdata.workloads import generate


def test_trace_and_reach(tmp_path, capsys):
    wl = generate("grid", 3, 300, rule_ids=True, acls=2)
    topo_p, rules_p = tmp_path / "t.yaml", tmp_path / "r.jsonl"
    wl.write(topo_p, rules_p)
    net = sorted(wl.prefixes)[5]
    header = f"ipv4_dst={(net >> 24) & 255}.{(net >> 16) & 255}.{(net >> 8) & 255}.9,tcp_dst=80"
    src = wl.hosts["h1"]
    assert (
        main(
            [
                "trace",
                "--topology",
                str(topo_p),
                "--rules",
                str(rules_p),
                "--in",
                f"s{src[0]}:{src[1]}",
                "--header",
                header,
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    want = RefDataPlane(wl.topo, wl.entries, wl.groups).send(src, parse_header(header))
    got = {(o["egress"], o["verify_port"], o["verify_rule"]) for o in out["outcomes"]}
    assert got == {
        (
            wl.topo.port_name(d.egress) if d.egress else None,
            f"0x{d.verify_port:08x}",
            f"0x{d.verify_rule:04x}",
        )
        for d in want
    }
    dst = wl.hosts[wl.prefixes[net]]
    assert (
        main(
            [
                "reach",
                "--topology",
                str(topo_p),
                "--rules",
                str(rules_p),
                "--from",
                f"s{src[0]}:{src[1]}",
                "--to",
                f"s{dst[0]}:{dst[1]}",
                "--json",
            ]
        )
        == 0
    )
    reach = json.loads(capsys.readouterr().out)
    assert reach["headers"] > 0 and reach["cubes"]
    # Human output: a table per outcome.
    assert (
        main(
            [
                "trace",
                "--topology",
                str(topo_p),
                "--rules",
                str(rules_p),
                "--in",
                f"s{src[0]}:{src[1]}",
                "--header",
                header,
            ]
        )
        == 0
    )
    assert "expected Verify_Port" in capsys.readouterr().out


def test_errors_exit_2(tmp_path, capsys):
    wl = generate("grid", 2, 40)
    wl.write(tmp_path / "t.yaml", tmp_path / "r.jsonl")
    rc = main(
        [
            "trace",
            "--topology",
            str(tmp_path / "t.yaml"),
            "--rules",
            str(tmp_path / "r.jsonl"),
            "--in",
            "s9:1",
            "--header",
            "ipv4_dst=10.0.0.1",
        ]
    )
    assert rc == 2 and "unknown switch 's9'" in capsys.readouterr().err


# --- conventions -----------------------------------------------------------------------------
import argparse  # noqa: E402
import importlib.metadata  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

from pazzd import cli  # noqa: E402


@pytest.mark.parametrize("prog", ["pazzd.cli", "pazzd"])
def test_version(prog):
    p = subprocess.run(
        [sys.executable, "-m", prog, "--version"], capture_output=True, text=True, timeout=60
    )
    name = "pazzctl" if prog == "pazzd.cli" else "pazzd"
    assert p.returncode == 0
    assert p.stdout.strip() == f"{name} {importlib.metadata.version('pazz')}"


def test_every_flag_has_help_and_help_has_examples():
    p = cli.build_parser()
    assert "examples:" in p.format_help() and "pazzctl faults --open" in p.format_help()
    parsers = [p]
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            parsers += list(a.choices.values())
    assert len(parsers) > 8
    for sp in parsers:
        for a in sp._actions:
            assert a.help and a.help != argparse.SUPPRESS, (sp.prog, a.dest)


def test_global_flags_before_or_after_the_subcommand(monkeypatch):
    monkeypatch.delenv("PAZZ_SOCKET", raising=False)
    parse = lambda *a: cli.build_parser().parse_args(list(a))  # noqa: E731
    assert parse("status", "--socket", "/x").socket == "/x"
    assert parse("--socket", "/x", "status").socket == "/x"
    assert parse("--json", "status").json is True
    assert parse("status", "--json").json is True
    assert parse("status").json is False
    assert parse("faults", "--open", "--json", "--socket", "/y").socket == "/y"
    assert parse("status").socket == cli.DEFAULT_SOCKET
    monkeypatch.setenv("PAZZ_SOCKET", "")  # empty: the default, not ""
    assert parse("status").socket == cli.DEFAULT_SOCKET
    monkeypatch.setenv("PAZZ_SOCKET", "/z")
    assert parse("status").socket == "/z"


def test_usage_errors_exit_2_and_are_json_under_json(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--json", "localize"])
    assert e.value.code == 2
    err = json.loads(capsys.readouterr().err)
    assert err["status"] == 2 and "id" in err["error"]


def test_cannot_connect_exits_1_in_both_modes(tmp_path, capsys):
    sock = str(tmp_path / "none.sock")
    assert cli.main(["status", "--socket", sock]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pazzctl: cannot reach pazzd at") and "Error" not in err
    assert cli.main(["--json", "status", "--socket", sock]) == 1
    assert json.loads(capsys.readouterr().err) == {
        "error": f"cannot reach pazzd at {sock}: No such file or directory",
        "status": 1,
    }


NOTHING = {
    "fault": 3,
    "kind": "type_p_match",
    "polled": [1, 2],
    "findings": [],
    "ignored": [],
    "headers_tried": 1,
    "seconds": 0.1,
}


def test_localize_exit_status_is_the_same_with_json(monkeypatch, capsys):
    ans = {**NOTHING, "errors": {}}
    monkeypatch.setattr(cli, "_call", lambda args, cmd, **kw: ans)
    assert cli.main(["localize", "3"]) == 1
    assert cli.main(["localize", "3", "--json"]) == 1
    capsys.readouterr()


def _fault(polled):
    return {
        "id": 3,
        "kind": "type_p_match",
        "state": "open",
        "location": "dpid:1",
        "header": "ipv4_dst=10.0.1.5",
        "egress": "s2:5",
        "count": 1,
        "reopened": 0,
        "first_seen": 1.0,
        "last_seen": 2.0,
        "actual": {},
        "expected": [],
        "localization": {"candidates": [1, 2]},
        "polled": polled,
        "audit": None,
    }


def test_faults_show_says_when_every_poll_failed(monkeypatch, capsys):
    failed = {**NOTHING, "errors": {"1": "connection refused", "2": "timed out"}}
    monkeypatch.setattr(cli, "_call", lambda args, cmd, **kw: _fault(failed))
    assert cli.main(["faults", "show", "3"]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("localized")]
    assert "no difference" not in line
    assert "could not poll" in line and "dpid 1 (connection refused)" in line
    assert "dpid 2 (timed out)" in line
    # One failed of two: the difference may be on the one that failed.
    some = {**NOTHING, "errors": {"2": "timed out"}}
    monkeypatch.setattr(cli, "_call", lambda args, cmd, **kw: _fault(some))
    cli.main(["faults", "show", "3"])
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("localized")]
    assert "poll failed on dpid 2 (timed out)" in line
    monkeypatch.setattr(
        cli, "_call", lambda args, cmd, **kw: {**NOTHING, "errors": failed["errors"]}
    )
    assert cli.main(["localize", "3"]) == 1
    assert "could not poll any switch" in capsys.readouterr().out


def test_reload_verdict(monkeypatch, capsys):
    res = {"ok": False, "error": "pazzd.yaml:3: tester.settle: must be at least 0"}
    monkeypatch.setattr(cli, "_call", lambda args, cmd, **kw: res)
    assert cli.main(["reload"]) == 1
    assert "tester.settle" in capsys.readouterr().out
    res = {"ok": True, "error": None}
    assert cli.main(["reload"]) == 0
    # In force, but a switch's ifIndex map could not be read again: exit 3, the switch named.
    res["warnings"] = ["switch s2: sFlow ifIndex map not refreshed, OVSDB unix:/x: refused"]
    capsys.readouterr()
    assert cli.main(["reload"]) == 3
    assert "reloaded with warnings" in capsys.readouterr().out
    assert cli.main(["--json", "reload"]) == 3
    assert "switch s2" in capsys.readouterr().out


def test_no_traceback_on_a_closed_pipe(tmp_path):
    wl = generate("grid", 2, 40)
    wl.write(tmp_path / "t.yaml", tmp_path / "r.jsonl")
    r, w = os.pipe()
    os.close(r)  # the reader is gone before pazzctl writes (`| head` that exited)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pazzd.cli",
            "--json",
            "reach",
            "--topology",
            str(tmp_path / "t.yaml"),
            "--rules",
            str(tmp_path / "r.jsonl"),
            "--from",
            "s1:5",
            "--to",
            "s2:5",
        ],
        stdout=w,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
    )
    os.close(w)
    assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr
    assert p.returncode == 1
