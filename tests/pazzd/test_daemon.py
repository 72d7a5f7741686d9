"""pazzd as a process: sd_notify, the API socket, metrics, SIGHUP reload, pazzctl."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import time

import pytest

from pazzapi import ApiError
from pazzlab.demo import metrics_of as scrape
from tester.sflow import encode_datagram  # noqa: F401  (the tester's encoder is importable)

from .helpers import Pazzd, base_config, pazzctl, write_config

METRIC_NAMES = [
    "pazz_faults_open",
    "pazz_faults_detected_total",
    "pazz_detection_latency_seconds_bucket",
    "pazz_reports_total",
    "pazz_sflow_datagrams_received_total",
    "pazz_sflow_datagrams_lost_total",
    "pazz_model_rules",
    "pazz_model_classes",
    "pazz_model_update_seconds_bucket",
    "pazz_fuzz_probes_sent_total",
    "pazz_config_load_error",
    "pazz_config_reloads_total",
    "pazz_build_info",
    "pazz_config_hash_info",
    "process_cpu_seconds_total",
    "python_info",
]


@pytest.fixture
def notify_sock(tmp_path):
    path = str(tmp_path / "notify.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0.2)
    yield s, path
    s.close()


def _messages(s, seconds: float) -> list[str]:
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        with contextlib.suppress(TimeoutError):
            out += s.recv(4096).decode().split("\n")
    return out


@pytest.fixture
def daemon(tmp_path, notify_sock):
    s, path = notify_sock
    cfg = write_config(tmp_path / "pazzd.yaml", base_config(tmp_path))
    d = Pazzd(cfg, env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"})
    try:
        st = d.wait_ready()
        yield d, st, s
    finally:
        d.stop()


def test_ready_watchdog_socket_mode_and_metrics(daemon):
    d, st, ns = daemon
    msgs = _messages(ns, 1.2)
    assert "READY=1" in msgs
    assert msgs.count("WATCHDOG=1") >= 3  # every 0.2 s: half of WATCHDOG_USEC
    mode = stat.S_IMODE(os.stat(d.sock).st_mode)
    assert stat.S_ISSOCK(os.stat(d.sock).st_mode) and mode == 0o660, oct(mode)
    assert st["model"]["rules"] > 0 and st["model"]["switches"] == 4
    m = scrape(st["metrics"])
    names = {k.split("{")[0] for k in m}
    for n in METRIC_NAMES:
        assert n in names, n
    assert m["pazz_config_load_error"] == 0
    assert m["pazz_model_rules"] == st["model"]["rules"]
    assert m['pazz_faults_open{class="type_a"}'] == 0
    assert 'pazz_reports_total{result="consistent"}' in m
    assert 'pazz_sflow_datagrams_received_total{result="malformed"}' in m
    assert "pazz_controller_connected" not in m  # no proxy: no OpenFlow session to report


def test_malformed_datagrams_are_counted(daemon):
    d, st, _ = daemon
    host, port = st["sflow"].rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _ in range(3):
            s.sendto(b"\x00\x00\x00\x05garbage", (host, int(port)))
    time.sleep(0.5)
    m = scrape(st["metrics"])
    assert m['pazz_sflow_datagrams_received_total{result="malformed"}'] == 3
    assert m['pazz_sflow_datagrams_received_total{result="decoded"}'] == 0


def test_sighup_keeps_last_good_config(daemon, tmp_path):
    d, st, ns = daemon
    good = d.config.read_text()
    d.config.write_text(good + "tester:\n  resolve_after: soon\n")
    d.proc.send_signal(signal.SIGHUP)
    time.sleep(0.8)
    assert d.proc.poll() is None
    m = scrape(st["metrics"])
    assert m["pazz_config_load_error"] == 1
    assert m['pazz_config_reloads_total{result="error"}'] == 1
    s2 = d.call("status")
    assert "tester.resolve_after" in s2["config_error"] and f"{d.config}:" in s2["config_error"]
    assert "config reload failed" in d.log_text() and "tester.resolve_after" in d.log_text()
    # Still serving on the last good config.
    assert s2["model"]["rules"] == st["model"]["rules"]
    d.config.write_text(good + "tester:\n  resolve_after: 5\n")
    _messages(ns, 0.1)  # drain what the daemon sent before this reload
    d.proc.send_signal(signal.SIGHUP)
    msgs = _messages(ns, 0.8)
    # sd_notify(7): a reload is announced with RELOADING=1 and ended with READY=1.
    assert "RELOADING=1" in msgs and "READY=1" in msgs[msgs.index("RELOADING=1") :], msgs
    m = scrape(st["metrics"])
    assert m["pazz_config_load_error"] == 0
    assert m['pazz_config_reloads_total{result="ok"}'] == 1
    assert d.call("status")["config_error"] is None


def test_pazzctl_live_and_file_forms(daemon, tmp_path):
    d, st, _ = daemon
    p = pazzctl(d.sock, "status")
    assert "model" in p.stdout and "rules" in p.stdout
    assert json.loads(pazzctl(d.sock, "status", "--json").stdout)["pid"] == d.proc.pid
    assert pazzctl(d.sock, "faults").stdout.strip() == "no faults"
    assert json.loads(pazzctl(d.sock, "faults", "--open", "--json").stdout) == []
    live = json.loads(
        pazzctl(
            d.sock, "trace", "--in", "s1:5", "--header", "ipv4_dst=10.0.1.9,tcp_dst=80", "--json"
        ).stdout
    )
    topo, rules = tmp_path / "topology.yaml", tmp_path / "rules.jsonl"
    filed = json.loads(
        pazzctl(
            d.sock,
            "trace",
            "--topology",
            str(topo),
            "--rules",
            str(rules),
            "--in",
            "s1:5",
            "--header",
            "ipv4_dst=10.0.1.9,tcp_dst=80",
            "--json",
        ).stdout
    )
    assert live == filed and live["outcomes"][0]["egress"] == "s2:5"
    human = pazzctl(d.sock, "trace", "--in", "s1:5", "--header", "ipv4_dst=10.0.1.9").stdout
    assert "outcome 1: egress at s2:5" in human
    r = json.loads(pazzctl(d.sock, "reach", "--from", "s1:5", "--to", "s2:5", "--json").stdout)
    assert r["headers"] > 0
    fm = json.loads(
        pazzctl(
            d.sock, "flowmod", "s1", "priority=99,ip,nw_dst=10.0.1.9,actions=output:3", "--json"
        ).stdout
    )
    assert fm["version"] > st["model"]["version"]
    # An ID pazzd does not know is an input error: exit 2, as in file mode; a socket
    # nobody listens on exits 1. The same status with --json, whose error is a JSON
    # object on stderr.
    p = pazzctl(d.sock, "faults", "show", "42", check=False)
    assert p.returncode == 2 and "no fault with id 42" in p.stderr
    p = pazzctl(d.sock, "faults", "show", "42", "--json", check=False)
    assert p.returncode == 2 and "no fault with id 42" in json.loads(p.stderr)["error"]
    for extra in ((), ("--json",)):
        p = pazzctl(str(tmp_path / "nope.sock"), "status", *extra, check=False)
        assert p.returncode == 1 and "cannot reach pazzd" in p.stderr, p.stderr
    # Usage errors exit 2.
    p = pazzctl(d.sock, "faults", "show", "x", check=False)
    assert p.returncode == 2 and "invalid int value" in p.stderr


def test_user_errors_are_sentences_without_a_traceback(daemon):
    d, _, _ = daemon
    for args, want in (
        ({}, "the fault request needs the argument 'id'"),
        ({"id": "x"}, "id must be an integer, not 'x'"),
    ):
        with pytest.raises(ApiError) as e:
            d.call("fault", **args)
        assert str(e.value).startswith(want), str(e.value)
    with pytest.raises(ApiError, match="^the trace request needs the argument 'header'$"):
        d.call("trace", ingress="s1:5")
    time.sleep(0.2)
    assert "Traceback" not in d.log_text() and "KeyError" not in d.log_text()


def test_pazzctl_reload_returns_the_verdict(daemon):
    d, _, _ = daemon
    p = pazzctl(d.sock, "reload")
    assert p.returncode == 0 and "config reloaded" in p.stdout
    good = d.config.read_text()
    d.config.write_text(good + "tester:\n  resolve_after: soon\n")
    p = pazzctl(d.sock, "reload", check=False)
    assert p.returncode == 1 and "tester.resolve_after" in p.stdout, p.stdout + p.stderr
    p = pazzctl(d.sock, "--json", "reload", check=False)
    assert p.returncode == 1 and json.loads(p.stdout)["ok"] is False
    d.config.write_text(good)
    assert pazzctl(d.sock, "reload").returncode == 0


def test_bad_config_at_start_exits_2(tmp_path):
    cfg = base_config(tmp_path)
    cfg["metrics"] = {"listen": "nowhere"}
    d = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
    try:
        assert d.proc.wait(timeout=30) == 2
        assert "metrics.listen: must be HOST:PORT" in d.log_text()
    finally:
        d.stop()
