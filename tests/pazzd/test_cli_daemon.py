"""pazzctl against a running pazzd: the same answers and exit status as in file mode,
faults shown with names, dates and paths, `faults --since` and `--follow`, and exit 1
only for pazzd's own failure."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cpc.fields import format_header
from cpc.topology import load_topology
from pazzapi import InputError
from pazzd import cli
from pazzd.api import ApiServer
from tester.store import FaultStore

from .helpers import Pazzd, base_config, pazzctl, wait_for, write_config

T0 = datetime.datetime(2026, 11, 28, 5, 13, 7, tzinfo=datetime.UTC).timestamp()
HDR = {"ipv4_dst": 0x0A000109, "eth_type": 0x0800, "ip_proto": 6, "tp_dst": 80}
# One fault's expected path: in at s1:5, over the s1:2 -- s2:4 link, out at s2:5.
EXPECTED = [{"ingress": [1, 5], "verify_port": 3, "verify_rule": 7, "path": [[1, 5, 2], [2, 4, 5]]}]


def _record(store: FaultStore, key: str, t: float, location: str = "dpid:2") -> int:
    fid, _ = store.record(
        "type_p_match",
        location,
        key,
        t,
        b"",
        {**HDR, "text": format_header(HDR)},
        (2, 5),
        EXPECTED,
        {"verify_port": 5, "verify_rule": 9},
        {"candidates": [1, 2]},
    )
    return fid


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """pazzd on the 2x2 grid with three faults in its database (ids 1..3)."""
    d = tmp_path_factory.mktemp("pazzd")
    cfg = base_config(d, tester={"resolve_after": 3600})
    store = FaultStore(cfg["database"])
    for i in range(3):
        _record(store, f"class{i}", T0 + i)
    pz = Pazzd(write_config(d / "pazzd.yaml", cfg))
    try:
        pz.wait_ready()
        yield pz, store, d
    finally:
        pz.stop()
        store.close()


def _ctl(sock: str, *args: str) -> subprocess.CompletedProcess:
    return pazzctl(sock, *args, check=False)


# --- exit status, in both modes -----------------------------------------------------------------
BAD = [
    ("trace", "--in", "s1:5", "--header", "bogus=1"),
    ("trace", "--in", "s1:5", "--header", "tcp,udp_dst=53"),
    ("trace", "--in", "s1:5", "--header", "ipv6"),
    ("trace", "--in", "h77", "--header", "ip"),
    ("trace", "--in", "s9:1", "--header", "ip"),
    ("reach", "--from", "s1:5", "--to", "nowhere"),
    ("reach", "--from", "s1:5", "--to", "s2:5", "--limit", "-1"),
    ("trace", "--in", "s1:5", "--bogus"),
]


def test_input_errors_exit_2_against_pazzd_and_on_files(daemon):
    pz, _, d = daemon
    files = ["--topology", str(d / "topology.yaml"), "--rules", str(d / "rules.jsonl")]
    for argv in BAD:
        for extra in ((), ("--json",)):
            live = _ctl(pz.sock, *argv, *extra)
            filed = _ctl(pz.sock, argv[0], *files, *argv[1:], *extra)
            assert live.returncode == 2, (argv, live.stderr)
            assert filed.returncode == 2, (argv, filed.stderr)
            assert "Traceback" not in live.stderr + filed.stderr
            if argv[-1] != "--bogus" and "--limit" not in argv:
                # Named by the option in both modes, with the same reason.
                assert live.stderr == filed.stderr, (live.stderr, filed.stderr)
    for argv in (("faults", "show", "99"), ("findings", "show", "99"), ("localize", "99")):
        p = _ctl(pz.sock, *argv)
        assert p.returncode == 2 and "99" in p.stderr, (argv, p.stderr)
        p = _ctl(pz.sock, *argv, "--json")
        assert p.returncode == 2 and json.loads(p.stderr)["status"] == 2
    gone = _ctl(str(d / "nobody.sock"), "trace", "--in", "s1:5", "--header", "ip")
    assert gone.returncode == 1 and "cannot reach pazzd" in gone.stderr


def test_the_live_answers_are_the_files_answers(daemon):
    """Host names and ofctl headers against pazzd; the text is file mode's, entries and all."""
    pz, _, d = daemon
    files = ["--topology", str(d / "topology.yaml"), "--rules", str(d / "rules.jsonl")]
    for argv in (
        ("trace", "--in", "h1", "--header", "tcp,nw_dst=10.0.1.9,tp_dst=80"),
        ("trace", "--in", "h3", "--header", "udp,nw_dst=10.0.0.9,nw_src=10.0.2.9,udp_dst=53"),
        ("reach", "--from", "h1", "--to", "h2", "--verbose"),
    ):
        live, filed = _ctl(pz.sock, *argv), _ctl(pz.sock, argv[0], *files, *argv[1:])
        assert live.returncode == filed.returncode == 0, live.stderr + filed.stderr
        assert live.stdout == filed.stdout
    out = _ctl(pz.sock, "trace", "--in", "h1", "--header", "tcp,nw_dst=10.0.1.9,tp_dst=80").stdout
    assert "in_port=5 (h1)" in out and "-> output:5 (h2)" in out and ", priority " in out


# --- faults ------------------------------------------------------------------------------------
def test_faults_show_is_readable_and_json_keeps_the_structure(daemon):
    pz, _, d = daemon
    env = {**os.environ, "TZ": "UTC"}
    p = subprocess.run(
        [sys.executable, "-m", "pazzd.cli", "--socket", pz.sock, "faults", "show", "2"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    lines = dict(ln.split(None, 1) for ln in p.stdout.splitlines() if ln[:1].strip())
    topo = load_topology(d / "topology.yaml")
    host = {p: n for p, n in topo.edges.items()}
    assert lines["egress"] == f"s2:5 ({host[(2, 5)]})"
    # The path: the port it enters by, the link's far end, the port it leaves by.
    assert topo.links[(1, 2)] == (2, 4)
    assert f"s1:5 ({host[(1, 5)]}) -> s2:4 -> s2:5 ({host[(2, 5)]})" in lines["expected"]
    assert lines["header"] == "tcp,nw_dst=10.0.1.9,tcp_dst=80"
    first = datetime.datetime.fromtimestamp(T0 + 1, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
    assert lines["first"] == f"seen   {first} UTC"
    assert "[1, 5" not in p.stdout and "[[" not in p.stdout
    raw = json.loads(_ctl(pz.sock, "faults", "show", "2", "--json").stdout)
    assert raw["egress"] == [2, 5] and raw["expected"] == EXPECTED


def test_faults_since(daemon):
    pz, _, _ = daemon
    ids = [f["id"] for f in json.loads(_ctl(pz.sock, "faults", "--since", "1", "--json").stdout)]
    assert ids and min(ids) == 2 and 1 not in ids
    table = _ctl(pz.sock, "faults", "--since", "2").stdout.splitlines()
    assert [row.split()[0] for row in table[1:]] == [str(i) for i in ids if i > 2]


def test_faults_follow_streams_opened_and_resolved(daemon):
    pz, store, _ = daemon
    last = max(f["id"] for f in json.loads(_ctl(pz.sock, "faults", "--json").stdout))
    cmd = [sys.executable, "-m", "pazzd.cli", "--socket", pz.sock, "faults", "--follow"]
    lines: list[str] = []
    with subprocess.Popen(
        [*cmd, "--since", str(last)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as f:
        try:
            reader = threading.Thread(target=lambda: lines.extend(f.stdout), daemon=True)
            reader.start()
            # Opened before or after the follower's first request: printed once either way.
            new = _record(store, "followed", time.time(), location="egress:2:5")
            assert wait_for(lambda: len(lines) >= 1, timeout=30), (lines, f.poll())
            store.resolve(new, time.time())
            assert wait_for(lambda: len(lines) >= 2, timeout=30), (lines, f.poll())
            time.sleep(1.5)  # another poll or so: nothing more to tell
            f.send_signal(signal.SIGINT)
            assert f.wait(timeout=30) == 0
            err = f.stderr.read()
            reader.join(5)
        finally:  # a failed assertion must not leave the follower (and the test) waiting
            if f.poll() is None:
                f.kill()
    assert "Traceback" not in err
    assert [(ln.split()[3], ln.split()[4]) for ln in lines] == [
        ("opened", str(new)),
        ("resolved", str(new)),
    ]
    assert "egress s2:5 (h2)" in lines[0] and "tcp,nw_dst=10.0.1.9" in lines[0]


def test_follow_asks_once_a_second_and_tells_each_change(monkeypatch, capsys):
    """Against a scripted pazzd: each poll after a one-second sleep; opened, resolved and
    reopened each printed once."""
    base = {"kind": "type_p_match", "location": "dpid:1", "header": "ipv4_dst=10.0.1.9",
            "first_seen": T0, "last_seen": T0, "resolved_at": None, "polled": None, "audit": None,
            "count": 1, "reopened": 0}  # fmt: skip
    polls = [
        [{**base, "id": 1, "state": "open"}],  # there before: not printed
        [{**base, "id": 2, "state": "open", "last_seen": T0 + 1}],
        [{**base, "id": 1, "state": "resolved", "resolved_at": T0 + 2, "last_seen": T0 + 2}],
        [
            {**base, "id": 1, "state": "open", "reopened": 1, "last_seen": T0 + 3},
            {**base, "id": 2, "state": "open", "last_seen": T0 + 3},
        ],  # fmt: skip
    ]
    log: list = []

    def call(args, cmd, **kw):
        log.append(("call", cmd, kw.get("changed_since")))
        return {} if cmd == "topology" else polls.pop(0)

    def sleep(s):
        log.append(("sleep", s))
        if not polls:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_call", call)
    args = cli.build_parser().parse_args(["faults", "--follow"])
    assert cli.follow_faults(args, sleep=sleep) == 0
    out = capsys.readouterr().out.splitlines()
    assert [(ln.split()[3], ln.split()[4]) for ln in out] == [
        ("opened", "2"),
        ("resolved", "1"),
        ("reopened", "1"),
    ]
    faults_calls = [i for i, x in enumerate(log) if x[:2] == ("call", "faults")]
    for a, b in zip(faults_calls, faults_calls[1:], strict=False):
        assert ("sleep", 1.0) in log[a:b]  # never two requests without a second between
    assert [x[2] for x in log if x[:2] == ("call", "faults")][1:] == [T0, T0 + 1, T0 + 2]


# --- pazzd's failure ---------------------------------------------------------------------------
@contextlib.contextmanager
def _api_server(path: str, handler):
    loop = asyncio.new_event_loop()
    server = ApiServer(path, handler)
    loop.run_until_complete(server.start())
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        yield
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)
        loop.run_until_complete(server.close())
        loop.close()


def test_pazzd_failure_exits_1_and_its_input_error_2(tmp_path, capsys):
    async def handler(req):
        if req["cmd"] == "status":
            raise RuntimeError("a bug")  # pazzd's own failure
        if req["cmd"] == "fault":
            raise InputError(f"no fault with id {req['id']}")
        return req["nosuch"]  # KeyError: a request without an argument it needs

    sock = str(Path(tmp_path) / "api.sock")
    with _api_server(sock, handler):
        assert cli.main(["--socket", sock, "status"]) == 1
        assert "internal error in status" in capsys.readouterr().err
        assert cli.main(["--socket", sock, "faults", "show", "5"]) == 2
        assert "no fault with id 5" in capsys.readouterr().err
        assert cli.main(["--socket", sock, "--json", "localize", "5"]) == 2
        assert json.loads(capsys.readouterr().err)["status"] == 2
