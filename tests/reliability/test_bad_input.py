"""A broken database, a config that is not UTF-8, a device or directory
as topology or rules: pazzd stops with one line that names the file, never a traceback
or a hang; relative paths in the config are relative to the config file."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3

import pytest

from pazzd.config import ConfigError, load_config
from pazzd.daemon import Daemon
from pazzd.main import _amain
from tests.pazzd.helpers import base_config, write_config


def _start(path, caplog) -> tuple[int, list]:
    with caplog.at_level(logging.ERROR):
        rc = asyncio.run(asyncio.wait_for(_amain(Daemon(str(path))), 20))
    return rc, [r for r in caplog.records if r.levelno >= logging.ERROR]


def _db_cases(d):
    rand = d / "random.db"
    rand.write_bytes(os.urandom(8192))
    good = d / "good.db"
    with sqlite3.connect(good) as c:
        c.execute("CREATE TABLE t (x)")
        c.executemany("INSERT INTO t VALUES (?)", [(os.urandom(200),) for _ in range(200)])
    trunc = d / "truncated.db"
    data = good.read_bytes()
    trunc.write_bytes(data[:100] + os.urandom(len(data) // 2))
    directory = d / "dir.db"
    directory.mkdir()
    return {"random": rand, "truncated": trunc, "directory": directory}


@pytest.mark.parametrize("case", ["random", "truncated", "directory"])
def test_broken_database_is_one_line(tmp_path, caplog, case):
    db = _db_cases(tmp_path)[case]
    cfg = write_config(tmp_path / "pazzd.yaml", base_config(tmp_path, database=str(db)))
    rc, errors = _start(cfg, caplog)
    # A directory is found when the config is read (check-config finds it too): exit 2.
    assert rc == (2 if case == "directory" else 1)
    assert len(errors) == 1 and not errors[0].exc_info
    assert str(db) in errors[0].getMessage()


@pytest.mark.parametrize("what", ["topology", "rules"])
@pytest.mark.parametrize("bad", ["/dev/zero", "dir"])
def test_device_or_directory_as_input_is_one_line(tmp_path, caplog, what, bad):
    target = str(tmp_path) if bad == "dir" else bad
    cfg = write_config(tmp_path / "pazzd.yaml", base_config(tmp_path, **{what: target}))
    if what == "topology":
        with pytest.raises(ConfigError, match="not a regular file|Is a directory"):
            load_config(cfg)
    rc, errors = _start(cfg, caplog)
    assert rc in (1, 2)
    assert len(errors) == 1 and not errors[0].exc_info
    msg = errors[0].getMessage()
    assert "not a regular file" in msg or "Is a directory" in msg, msg


def test_config_that_is_not_utf8(tmp_path, caplog):
    p = tmp_path / "pazzd.yaml"
    p.write_bytes(b"# ok\ntopology: \xff\xfe\n")
    with pytest.raises(ConfigError, match=r"pazzd\.yaml:2: not UTF-8"):
        load_config(p)
    rc, errors = _start(p, caplog)
    assert rc == 2 and len(errors) == 1 and not errors[0].exc_info


def test_relative_paths_are_relative_to_the_config_file(tmp_path, monkeypatch):
    cfg = base_config(tmp_path, database="state/faults.db")
    cfg["api"] = {"socket": "run/pazzd.sock"}
    p = write_config(tmp_path / "pazzd.yaml", cfg)
    monkeypatch.chdir("/")
    c = load_config(p)
    assert c.database == str(tmp_path / "state/faults.db")
    assert c.api.socket == str(tmp_path / "run/pazzd.sock")
    assert load_config(write_config(p, {**cfg, "database": ":memory:"})).database == ":memory:"


def test_read_only_database_is_one_line(tmp_path, caplog):
    """Read-only for root too: the immutable attribute (chattr +i); skipped without it."""
    import shutil
    import subprocess

    db = tmp_path / "faults.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE t (x)")
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(db)], capture_output=True).returncode:
        pytest.skip("cannot make a file immutable here")
    try:
        cfg = write_config(tmp_path / "pazzd.yaml", base_config(tmp_path, database=str(db)))
        rc, errors = _start(cfg, caplog)
        assert rc == 2  # found when the config is read, as check-config finds it
        assert len(errors) == 1 and not errors[0].exc_info
        assert str(db) in errors[0].getMessage()
    finally:
        subprocess.run([chattr, "-i", str(db)], capture_output=True)
