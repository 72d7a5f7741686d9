"""Signals from pazzd's first instruction on: SIGHUP early is a reload once started, never
death; SIGTERM early exits 0 at once, SIGTERM during the start ends it at its next step.

Before the interpreter runs any of pazzd's code the kernel's default action applies, as to
every program: that is the interpreter's own start, 15 ms after exec with a plain install
and up to 50 ms with this tree's editable one under load. A launcher that must signal
that early blocks the signals across exec, and pazzd takes them over pending: the cases
here are started that way (tests/pazzd/test_startup.py signals a plain start from 150 ms
on, where even a loaded machine has the interpreter running pazzd's code)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pazzapi import ApiError, call
from tests.pazzd.helpers import base_config, wait_for, write_config
from tests.reliability.test_ovsdb_start import SilentOvsdb

SIGNALS = (signal.SIGHUP, signal.SIGTERM, signal.SIGINT)
# (delay after Popen, whether the launcher blocks the signals across exec)
WHEN = [(0.0, True), (0.01, True), (0.05, True), (0.1, True)]
IDS = ["0ms", "10ms", "50ms", "100ms"]


def _launch(cfg_path: Path, blocked: bool) -> tuple[subprocess.Popen, float]:
    log = open(cfg_path.parent / "pazzd.log", "w")  # noqa: SIM115
    p = subprocess.Popen(
        [sys.executable, "-m", "pazzd", "--config", str(cfg_path)],
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=(lambda: signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)) if blocked else None,
    )
    return p, time.monotonic()


def _sleep_until(t: float) -> None:
    left = t - time.monotonic()
    if left > 0:
        time.sleep(left)


def _status(sock: str) -> dict | None:
    try:
        return call(sock, "status", timeout=5)
    except (ApiError, OSError, ValueError):
        return None


def _log(cfg_path: Path) -> str:
    return (cfg_path.parent / "pazzd.log").read_text()


@pytest.mark.parametrize("delay, blocked", WHEN, ids=IDS)
def test_early_sighup_is_a_reload_not_death(tmp_path, delay, blocked):
    cfg = base_config(tmp_path)
    path = write_config(tmp_path / "pazzd.yaml", cfg)
    p, t0 = _launch(path, blocked)
    try:
        _sleep_until(t0 + delay)
        p.send_signal(signal.SIGHUP)
        sock = cfg["api"]["socket"]
        assert wait_for(lambda: p.poll() is not None or os.path.exists(sock), 60), _log(path)
        assert p.poll() is None, _log(path)  # alive, and serving:
        assert wait_for(lambda: _status(sock), 30), _log(path)
        deadline = time.monotonic() + 10  # the reload asked for before the start follows
        while _status(sock)["config_reloads"] < 1:
            assert p.poll() is None and time.monotonic() < deadline, _log(path)
            time.sleep(0.1)
        assert "SIGHUP during start-up" in _log(path)
    finally:
        if p.poll() is None:
            p.terminate()
        assert p.wait(timeout=10) == 0, _log(path)


@pytest.mark.parametrize("delay, blocked", WHEN, ids=IDS)
def test_early_sigterm_exits_0_having_started_nothing(tmp_path, delay, blocked):
    cfg = base_config(tmp_path)
    path = write_config(tmp_path / "pazzd.yaml", cfg)
    p, t0 = _launch(path, blocked)
    _sleep_until(t0 + delay)
    sent = time.monotonic()
    p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise AssertionError(f"still running 5 s after SIGTERM:\n{_log(path)}") from None
    took = time.monotonic() - sent
    print(f"exit {rc} {took:.2f} s after SIGTERM at {delay * 1e3:.0f} ms")
    assert rc == 0 and took < 1.0, _log(path)
    assert "SIGTERM before the start: stopping, nothing started" in _log(path)
    assert not Path(cfg["api"]["socket"]).exists() and not Path(cfg["database"]).exists()


def test_sigterm_during_the_start_ends_it_at_once(tmp_path):
    """The start waits for a silent OVSDB (5 s); SIGTERM then ends it within a second."""
    db = SilentOvsdb(str(tmp_path / "db.sock"))
    cfg = base_config(tmp_path)
    cfg["ovs"] = {"bin_dir": str(tmp_path / "no-ovs-here")}
    cfg["switches"] = [{"switch": "s1", "ovsdb": f"unix:{db.path}", "agent": "127.0.0.1"}]
    path = write_config(tmp_path / "pazzd.yaml", cfg)
    p, _ = _launch(path, False)
    try:
        deadline = time.monotonic() + 30
        while not db.accepted:  # the start is now waiting for the OVSDB
            assert p.poll() is None and time.monotonic() < deadline, _log(path)
            time.sleep(0.01)
        sent = time.monotonic()
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=10)
        took = time.monotonic() - sent
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        db.close()
    print(f"exit {rc} {took:.2f} s after SIGTERM")
    assert rc == 0 and took < 1.0, _log(path)
    assert "stopping during start-up" in _log(path)
    assert not Path(cfg["api"]["socket"]).exists()
