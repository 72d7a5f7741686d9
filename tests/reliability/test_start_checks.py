"""check-config and the start agree: a config that check-config passes starts, one that the
start refuses check-config refuses, with the same one line naming the file, the line and
the key. The cases are what the start needs of the machine: the API socket's path (a unix
socket path has at most 107 bytes, the kernel's own limit is the oracle), its directory
(not writable by every user), the database's place (no file in the way) and the TLS
files as the proxy loads them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pazzd.helpers import Pazzd, base_config, write_config


def _path_of_length(d: Path, n: int, suffix: str = ".sock") -> str:
    p = str(d / "s") + suffix
    p = str(d / ("s" * (n - len(p) + 1))) + suffix
    assert len(p) == n
    return p


def _kernel_binds(path: str) -> bool:
    """The oracle: can a unix socket be bound at path?"""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.bind(path)
        except OSError:
            return False
    os.unlink(path)
    return True


def _check_config(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pazzd.cli", "check-config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _start(path: Path) -> tuple[int, str, float]:
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "pazzd", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


def _line_of(text: str, needle: str) -> int:
    return [i for i, ln in enumerate(text.splitlines(), 1) if needle in ln][-1]


def _case(d: Path, name: str) -> tuple[dict, str, str]:
    """(config overrides, the key named, the text that must be on the key's line)."""
    afile = d / "afile"
    afile.write_text("an operator's notes\n")
    if name == "socket 120 bytes":
        return {"api": {"socket": _path_of_length(d, 120)}}, "api.socket", "socket:"
    if name == "socket 108 bytes":
        return {"api": {"socket": _path_of_length(d, 108)}}, "api.socket", "socket:"
    if name == "model socket too long":  # the tester workers' socket, API socket 107 bytes
        over = {"api": {"socket": _path_of_length(d, 107)}, "tester": {"workers": 2}}
        return over, "api.socket", "socket:"
    if name == "database under a file":
        return {"database": str(afile / "faults.db")}, "database", "database:"
    if name == "database dir under a file":
        return {"database": str(afile / "state" / "faults.db")}, "database", "database:"
    if name == "socket dir world-writable":
        (d / "ww").mkdir(mode=0o777)
        os.chmod(d / "ww", 0o777)
        return {"api": {"socket": str(d / "ww" / "pazzd.sock")}}, "api.socket", "socket:"
    if name == "socket dir world-writable, sticky":
        (d / "ws").mkdir()
        os.chmod(d / "ws", 0o1777)
        return {"api": {"socket": str(d / "ws" / "pazzd.sock")}}, "api.socket", "socket:"
    if name == "socket dir to be made in a world-writable one":
        (d / "ww").mkdir()
        os.chmod(d / "ww", 0o777)
        return {"api": {"socket": str(d / "ww/new/pazzd.sock")}}, "api.socket", "socket:"
    if name == "tls files that are not PEM":
        (d / "switch.crt").write_text("not a certificate\n")
        (d / "switch.key").write_text("not a key\n")
        tls = {"cert": str(d / "switch.crt"), "key": str(d / "switch.key")}
        over = {"controller": {"enabled": True, "listen": "127.0.0.1:0", "tls": tls}}
        return over, "controller.tls", "tls:"
    raise AssertionError(name)


CASES = [
    "socket 120 bytes",
    "socket 108 bytes",
    "model socket too long",
    "database under a file",
    "database dir under a file",
    "socket dir world-writable",
    "socket dir world-writable, sticky",
    "socket dir to be made in a world-writable one",
    "tls files that are not PEM",
]


@pytest.mark.parametrize("name", CASES)
def test_check_config_refuses_what_the_start_refuses(tmp_path, name):
    over, key, needle = _case(tmp_path, name)
    cfg = base_config(tmp_path, **over)
    path = write_config(tmp_path / "pazzd.yaml", cfg)
    line = _line_of(path.read_text(), needle)
    if "bytes" in name:
        assert not _kernel_binds(cfg["api"]["socket"])  # the kernel agrees: too long
    p = _check_config(path)
    err = p.stderr.strip()
    assert p.returncode == 2 and len(err.splitlines()) == 1, (p.stdout, err)
    assert err.startswith(f"pazzctl: {path}:{line}: {key}: "), err
    rc, out, took = _start(path)
    assert rc == 2 and took < 20, (rc, out)
    assert "Traceback" not in out
    said = [ln for ln in out.splitlines() if f"{path}:{line}: {key}: " in ln]
    assert len(said) == 1 and said[0].endswith(err.removeprefix("pazzctl: ")), out
    assert (tmp_path / "afile").read_text() == "an operator's notes\n"


def test_the_longest_socket_path_passes_both(tmp_path):
    """107 bytes: the kernel binds it, check-config passes it, and pazzd serves on it."""
    sock = _path_of_length(tmp_path, 107)
    assert _kernel_binds(sock)
    path = write_config(tmp_path / "pazzd.yaml", base_config(tmp_path, api={"socket": sock}))
    p = _check_config(path)
    assert p.returncode == 0, p.stderr
    d = Pazzd(path)
    try:
        assert d.wait_ready()["config"] == str(path)
    finally:
        assert d.stop() == 0, d.log_text()


def test_a_private_directory_and_one_made_by_pazzd_pass(tmp_path):
    """Not writable by others (0755, 0750, and one pazzd makes itself): accepted."""
    for mode in (0o755, 0o750):
        d = tmp_path / f"run{mode:o}"
        d.mkdir()
        os.chmod(d, mode)
        cfg = base_config(tmp_path, api={"socket": str(d / "pazzd.sock")})
        assert _check_config(write_config(tmp_path / "pazzd.yaml", cfg)).returncode == 0
    cfg = base_config(tmp_path, api={"socket": str(tmp_path / "new/pazzd.sock")})
    cfg["database"] = str(tmp_path / "state/new/faults.db")
    path = write_config(tmp_path / "pazzd.yaml", cfg)
    assert _check_config(path).returncode == 0
    d = Pazzd(path)
    try:
        d.wait_ready()
        assert Path(cfg["database"]).is_file()
        assert not os.stat(tmp_path / "new").st_mode & 0o002
    finally:
        assert d.stop() == 0, d.log_text()
