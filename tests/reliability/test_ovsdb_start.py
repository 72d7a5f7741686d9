"""OVSDBs that accept and never answer do not add up at start: the ifIndex map asks every
switch's OVSDB at once, so three silent ones cost one ovs-vsctl timeout (5 s), not three."""

from __future__ import annotations

import shutil
import socket
import threading
import time

import pytest

from tests.pazzd.helpers import Pazzd, base_config, write_config

TIMEOUT = 5.0  # tester.ifmap.IfMap.load_ovsdb's, per ovs-vsctl
N = 3


class SilentOvsdb:
    """A unix socket that accepts connections and never says a word; it notes when."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(8)
        self.accepted: list[float] = []
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(time.monotonic())
            self.conns.append(c)

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()


def test_silent_ovsdbs_cost_one_timeout_at_start(tmp_path):
    vsctl = shutil.which("ovs-vsctl")
    if vsctl is None:
        pytest.skip("needs ovs-vsctl")
    dbs = [SilentOvsdb(str(tmp_path / f"db{i}.sock")) for i in range(N)]
    cfg = base_config(tmp_path)
    cfg["ovs"] = {"bin_dir": str(tmp_path / "no-ovs-here")}  # ovs-vsctl from PATH
    cfg["switches"] = [
        {"switch": f"s{i + 1}", "ovsdb": f"unix:{db.path}", "agent": f"127.0.0.{i + 1}"}
        for i, db in enumerate(dbs)
    ]
    try:
        t0 = time.monotonic()
        d = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
        try:
            d.wait_ready(timeout=60)
            ready = time.monotonic() - t0
            log = d.log_text()
        finally:
            assert d.stop() == 0, d.log_text()
    finally:
        for db in dbs:
            db.close()
    # Every OVSDB was asked, and waited for: each lookup ended in its timeout.
    assert all(db.accepted for db in dbs), [len(db.accepted) for db in dbs]
    for db in dbs:
        assert f"OVSDB unix:{db.path} (agent" in log, log
    firsts = sorted(db.accepted[0] for db in dbs)
    print(f"ready after {ready:.1f} s; the OVSDBs asked within {firsts[-1] - firsts[0]:.2f} s")
    assert firsts[-1] - firsts[0] < TIMEOUT / 2  # all at once, not one after the other
    assert TIMEOUT <= ready < 2 * TIMEOUT, log
