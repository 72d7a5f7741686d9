"""pazzd's start and reload as a process: signals during the start, one instance per API
socket, start-up errors that name the resource, a reload that never blocks the loop."""

from __future__ import annotations

import grp
import os
import re
import signal
import socket
import stat
import time

import pytest

from pazzapi import call
from pazzd.config import ConfigError, load_config

from .helpers import Pazzd, base_config, write_config


def _wait_exit(d: Pazzd, timeout: float = 60) -> int:
    try:
        return d.proc.wait(timeout=timeout)
    finally:
        d.stop()


# From 0.1 s on: before that the interpreter itself is starting (about 30 ms here).
@pytest.mark.parametrize("delay", [0.15, 0.3, 1.0])
def test_sighup_during_start_up_does_not_kill(tmp_path, delay):
    d = Pazzd(write_config(tmp_path / "pazzd.yaml", base_config(tmp_path)))
    try:
        time.sleep(delay)
        d.proc.send_signal(signal.SIGHUP)
        st = d.wait_ready()
        assert st["model"]["rules"] > 0 and d.proc.poll() is None
        deadline = time.monotonic() + 10  # the reload asked for during the start follows
        while call(d.sock, "status")["config_reloads"] < 1:
            assert time.monotonic() < deadline, d.log_text()
            time.sleep(0.1)
    finally:
        assert d.stop() == 0, d.log_text()


def test_sigterm_during_start_up_stops_cleanly(tmp_path):
    cfg = base_config(tmp_path)
    d = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
    time.sleep(0.3)
    d.proc.send_signal(signal.SIGTERM)
    assert _wait_exit(d) == 0, d.log_text()
    assert "stopping" in d.log_text()
    assert not os.path.exists(cfg["api"]["socket"])


def test_a_second_instance_on_the_same_socket_refuses_and_leaves_it_alone(tmp_path):
    cfg = base_config(tmp_path)
    first = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
    try:
        pid = first.wait_ready()["pid"]
        inode = os.stat(cfg["api"]["socket"]).st_ino
        other = tmp_path / "other"
        other.mkdir()
        cfg2 = base_config(other)
        cfg2["api"] = cfg["api"]
        second = Pazzd(write_config(other / "pazzd.yaml", cfg2))
        assert _wait_exit(second) == 1
        log = second.log_text()
        assert f"another pazzd (pid {pid}) uses api.socket {cfg['api']['socket']}" in log, log
        assert os.stat(cfg["api"]["socket"]).st_ino == inode
        assert call(cfg["api"]["socket"], "status")["pid"] == pid
    finally:
        first.stop()
    # Stopped: the lock is free again, and a new instance starts.
    again = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
    try:
        again.wait_ready()
    finally:
        assert again.stop() == 0


@pytest.mark.parametrize("which", ["metrics", "sflow"])
def test_address_in_use_is_named(tmp_path, which):
    cfg = base_config(tmp_path)
    kind = socket.SOCK_STREAM if which == "metrics" else socket.SOCK_DGRAM
    with socket.socket(socket.AF_INET, kind) as busy:
        busy.bind(("127.0.0.1", 0))
        if kind == socket.SOCK_STREAM:
            busy.listen()
        port = busy.getsockname()[1]
        cfg[which] = {**cfg.get(which, {}), "listen": f"127.0.0.1:{port}"}
        d = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
        assert _wait_exit(d) == 1
    log = d.log_text()
    assert f"start-up failed: {which}.listen 127.0.0.1:{port}" in log, log
    assert "Address already in use" in log and "Traceback" not in log


def test_corrupt_database_is_named(tmp_path):
    cfg = base_config(tmp_path)
    (tmp_path / "faults.db").write_bytes(b"not a database " * 400)
    d = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
    assert _wait_exit(d) == 1
    log = d.log_text()
    assert f"start-up failed: database {cfg['database']}: file is not a database" in log, log
    assert "Traceback" not in log


def test_reload_does_not_block_the_event_loop(tmp_path):
    """The ifIndex map's OVSDB lookup (a slow ovs-vsctl here) runs off the loop."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vsctl = bin_dir / "ovs-vsctl"
    vsctl.write_text("#!/bin/sh\nsleep 2\necho '{}'\n")
    vsctl.chmod(0o755)
    cfg = base_config(tmp_path)
    cfg["ovs"] = {"bin_dir": str(bin_dir)}
    cfg["switches"] = [{"switch": "s1", "ovsdb": "unix:/nonexistent.sock", "agent": "127.0.0.1"}]
    d = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
    try:
        d.wait_ready()
        d.proc.send_signal(signal.SIGHUP)
        time.sleep(0.3)  # the reload is now waiting for ovs-vsctl
        t0 = time.monotonic()
        st = call(d.sock, "status", timeout=5)
        assert time.monotonic() - t0 < 1.0
        assert st["config_reloads"] == 0  # still in the reload
        deadline = time.monotonic() + 15
        while call(d.sock, "status")["config_reloads"] < 1:
            assert time.monotonic() < deadline, d.log_text()
            time.sleep(0.2)
    finally:
        assert d.stop() == 0, d.log_text()


def _malformed(st) -> None:
    host, port = st["sflow"].rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"\x00\x00\x00\x05garbage", (host, int(port)))


@pytest.mark.parametrize("journal", [True, False])
def test_log_lines_carry_syslog_priorities_under_journald(tmp_path, journal):
    cfg = write_config(tmp_path / "pazzd.yaml", base_config(tmp_path))
    log = tmp_path / "pazzd.log"
    log.touch()
    st = os.stat(log)  # the helper's log file is pazzd's stderr: journald's stream here
    stream = f"{st.st_dev}:{st.st_ino}" if journal else "1:1"
    d = Pazzd(cfg, env={"JOURNAL_STREAM": stream})
    try:
        _malformed(d.wait_ready())
        time.sleep(0.5)
    finally:
        d.stop()
    lines = d.log_text().splitlines()
    (warn,) = [ln for ln in lines if "malformed sFlow datagram dropped" in ln]
    (ready,) = [ln for ln in lines if "pazzd ready" in ln]
    if journal:
        assert warn.startswith("<4>WARNING ") and ready.startswith("<6>INFO ")
        assert all(re.match(r"<[0-7]>", ln) for ln in lines), lines
    else:  # not journald's stream (another JOURNAL_STREAM): timestamps, no prefix
        assert not warn.startswith("<") and re.match(r"\d{4}-\d\d-\d\d ", warn)


def test_api_socket_group(tmp_path):
    group = grp.getgrgid(65534) if _has_gid(65534) else grp.getgrgid(os.getgid())
    cfg = base_config(tmp_path)
    cfg["api"]["group"] = group.gr_name
    d = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
    try:
        d.wait_ready()
        st = os.stat(cfg["api"]["socket"])
        assert st.st_gid == group.gr_gid and stat.S_IMODE(st.st_mode) == 0o660
    finally:
        d.stop()
    cfg["api"]["group"] = "no-such-group-pazz"
    path = write_config(tmp_path / "bad.yaml", cfg)
    with pytest.raises(ConfigError, match=r"api.group: no group 'no-such-group-pazz'"):
        load_config(path)


def _has_gid(gid: int) -> bool:
    try:
        grp.getgrgid(gid)
    except KeyError:
        return False
    return True


def test_reload_reads_the_config_off_the_event_loop(tmp_path, monkeypatch):
    """Resolving the listen hosts (DNS) during a reload must not stall the loop."""
    import asyncio

    from pazzd.daemon import Daemon

    d = Daemon(str(write_config(tmp_path / "pazzd.yaml", base_config(tmp_path))))
    real = socket.getaddrinfo

    def slow(*a, **kw):
        time.sleep(1.5)  # a resolver that takes its time
        return real(*a, **kw)

    async def run():
        await d.start()
        try:
            monkeypatch.setattr(socket, "getaddrinfo", slow)  # the config resolves hosts
            reload = asyncio.create_task(d.reload())
            await asyncio.sleep(0.05)
            t0 = time.monotonic()
            await asyncio.sleep(0.05)
            stalled = time.monotonic() - t0
            assert not reload.done()
            assert await reload
            assert stalled < 0.5, stalled
        finally:
            await d.stop()

    asyncio.run(run())
