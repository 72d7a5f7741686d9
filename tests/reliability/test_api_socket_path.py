"""What lies at api.socket when pazzd starts: a stale socket of an earlier run is
replaced; a regular file and another program's live socket are left alone, and the start
fails with one line that names the path and says why."""

from __future__ import annotations

import socket
import subprocess
import sys

from tests.pazzd.helpers import Pazzd, base_config, write_config


def _start(cfg_path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pazzd", "--config", str(cfg_path)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_regular_file_and_a_live_foreign_socket_survive(tmp_path):
    cfg = base_config(tmp_path)
    path = tmp_path / "pazzd.sock"
    conf = write_config(tmp_path / "pazzd.yaml", cfg)

    path.write_text("an operator's notes\n")
    p = _start(conf)
    assert p.returncode != 0
    err = [ln for ln in (p.stderr + p.stdout).splitlines() if str(path) in ln]
    assert err and "other than a socket" in err[-1] and "left alone" in err[-1], p.stderr
    assert path.read_text() == "an operator's notes\n"
    path.unlink()

    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(str(path))
    other.listen(4)
    try:
        p = _start(conf)
        assert p.returncode != 0
        err = [ln for ln in (p.stderr + p.stdout).splitlines() if str(path) in ln]
        assert err and "live socket of another program" in err[-1], p.stderr
        assert path.is_socket()
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(str(path))  # still the other program's: it accepts
        conn, _ = other.accept()
        conn.close()
        c.close()
    finally:
        other.close()

    # Now nothing listens there: a stale socket, replaced by pazzd's own.
    d = Pazzd(conf)
    try:
        d.wait_ready()
        assert path.is_socket()
    finally:
        d.stop()
    assert not path.exists()  # pazzd removes the socket it made
