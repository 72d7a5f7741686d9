"""deploy/pazzd.service: hardened (systemd-analyze security), valid (verify), and its reload
and restart semantics; pazzd runs as an unprivileged user."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.tools import require_tool

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNIT = DEPLOY / "pazzd.service"
NETNS_DROPIN = DEPLOY / "pazzd.service.d" / "netns-inject.conf"
MAX_EXPOSURE = 2.5


def _settings(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            k, _, v = line.partition("=")
            out.setdefault(k.strip(), []).append(v.strip())
    return out


def _exposure(unit_dir: Path) -> tuple[float, str]:
    tool = require_tool("systemd-analyze", "systemd")
    r = subprocess.run(
        [tool, "security", "--offline=yes", "--no-pager", str(unit_dir / "pazzd.service")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    m = re.search(r"Overall exposure level for pazzd.service: (\d+\.\d+)", r.stdout)
    assert m, r.stdout + r.stderr
    return float(m.group(1)), r.stdout


def test_default_unit_exposure(tmp_path):
    shutil.copy(UNIT, tmp_path)  # the unit alone: the default feature set
    score, out = _exposure(tmp_path)
    assert score <= MAX_EXPOSURE, out
    assert not re.search(r"✗ CapabilityBoundingSet=~CAP_SYS_ADMIN", out), out


def test_netns_injection_dropin_adds_cap_sys_admin_and_stays_under_the_bound(tmp_path):
    shutil.copy(UNIT, tmp_path)
    (tmp_path / "pazzd.service.d").mkdir()
    shutil.copy(NETNS_DROPIN, tmp_path / "pazzd.service.d")
    score, out = _exposure(tmp_path)
    assert re.search(r"✗ CapabilityBoundingSet=~CAP_SYS_ADMIN", out), "drop-in not applied"
    assert score <= MAX_EXPOSURE, out


def _local_unit(tmp_path: Path) -> Path:
    """The unit with the install's interpreter replaced by this one (verify checks it)."""
    text = UNIT.read_text().replace("/opt/pazz/.venv/bin/python", sys.executable)
    path = tmp_path / "pazzd.service"
    path.write_text(text)
    return path


def test_systemd_analyze_verify(tmp_path):
    tool = require_tool("systemd-analyze", "systemd")
    r = subprocess.run(
        [tool, "verify", str(_local_unit(tmp_path))], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "pazzd.service" not in r.stderr, r.stderr


def test_unit_settings():
    s = _settings(UNIT.read_text())
    assert s["User"] == ["pazz"] and s["Group"] == ["pazz"]
    assert s["RestartPreventExitStatus"] == ["2"]
    assert int(s["LimitNOFILE"][0]) >= 65536
    assert s["UMask"] == ["0027"]
    assert s["CapabilityBoundingSet"] == ["CAP_NET_RAW"]
    assert s["SystemCallFilter"] == ["@system-service"]
    assert set(s["RestrictAddressFamilies"][0].split()) == {
        "AF_UNIX",
        "AF_INET",
        "AF_INET6",
        "AF_NETLINK",
        "AF_PACKET",
    }
    assert all(p.startswith("-") for p in s["ReadWritePaths"][0].split())
    # prometheus_client's process collector needs /proc/stat: no ProcSubset=pid.
    assert s.get("ProcSubset", ["all"]) == ["all"]
    sysusers = (DEPLOY / "pazz.sysusers").read_text()
    assert re.search(r"^u pazz ", sysusers, re.M)


def _exec_reload(config: Path) -> list[int]:
    """Run the unit's ExecReload= lines as systemd would (stopping at the first failure),
    with MAINPID a process of our own; returns their exit codes."""
    victim = subprocess.Popen(["sleep", "30"])
    codes = []
    try:
        for cmd in _settings(UNIT.read_text())["ExecReload"]:
            cmd = cmd.replace("/opt/pazz/.venv/bin/python", sys.executable)
            cmd = cmd.replace("/etc/pazz/pazzd.yaml", str(config))
            cmd = cmd.replace("$MAINPID", str(victim.pid)).replace("-HUP", "-CONT")
            codes.append(subprocess.run(cmd.split(), capture_output=True, timeout=60).returncode)
            if codes[-1] != 0:
                break
    finally:
        victim.kill()
        victim.wait()
    return codes


def test_exec_reload_fails_on_a_bad_config_before_signalling(tmp_path):
    from tests.pazzd.helpers import base_config, write_config

    good = write_config(tmp_path / "pazzd.yaml", base_config(tmp_path))
    assert _exec_reload(good) == [0, 0]
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text() + "tester:\n  resolve_after: soon\n")
    assert _exec_reload(bad) == [2]


@pytest.mark.skipif(sys.platform != "linux", reason="Linux only")
def test_pazzd_runs_as_an_unprivileged_user():
    """pazzd starts, answers and scrapes as nobody (no capability, no root-owned path)."""
    import os
    import pwd

    if os.geteuid() != 0:
        pytest.skip("needs root to switch to an unprivileged user")
    setpriv = require_tool("setpriv", "util-linux")
    nobody = pwd.getpwnam("nobody")
    with tempfile.TemporaryDirectory(prefix="pazz-nonroot-", dir="/tmp") as tmp:
        _run_as(Path(tmp), nobody, setpriv)


def _run_as(d: Path, user, setpriv: str) -> None:
    import os

    from tests.pazzd.helpers import Pazzd, base_config, write_config

    os.chmod(d, 0o755)
    os.chown(d, user.pw_uid, user.pw_gid)
    nobody = user
    cfg = base_config(d)
    path = write_config(d / "pazzd.yaml", cfg)
    for f in d.iterdir():
        os.chown(f, nobody.pw_uid, nobody.pw_gid)
    pz = Pazzd(
        path,
        prefix=[
            setpriv,
            f"--reuid={nobody.pw_uid}",
            f"--regid={nobody.pw_gid}",
            "--clear-groups",
            "--inh-caps=-all",
        ],
    )
    try:
        st = pz.wait_ready()
        assert st["model"]["rules"] > 0
        status = Path(f"/proc/{pz.proc.pid}/status").read_text()
        assert re.search(rf"^Uid:\s+{nobody.pw_uid}\s", status, re.M), status
        assert os.stat(cfg["api"]["socket"]).st_uid == nobody.pw_uid
        assert os.stat(cfg["database"]).st_uid == nobody.pw_uid
    finally:
        assert pz.stop() == 0, pz.log_text()


SCALEOUT_UNITS = [DEPLOY / "pazzd-collector.service", DEPLOY / "pazzd-worker@.service"]


@pytest.mark.parametrize("unit", SCALEOUT_UNITS, ids=lambda p: p.name)
def test_scaleout_units_verify_and_are_hardened(unit, tmp_path):
    """pazzd collector and pazzd worker: valid units, no capability, exposure within the
    bound of pazzd's own."""
    tool = require_tool("systemd-analyze", "systemd")
    name = unit.name.replace("@.", "@1.")  # an instance of the template
    path = tmp_path / name
    path.write_text(unit.read_text().replace("/opt/pazz/.venv/bin/python", sys.executable))
    r = subprocess.run([tool, "verify", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and name not in r.stderr, r.stderr
    r = subprocess.run(
        [tool, "security", "--offline=yes", "--no-pager", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    m = re.search(rf"Overall exposure level for {re.escape(name)}: (\d+\.\d+)", r.stdout)
    assert m, r.stdout + r.stderr
    assert float(m.group(1)) <= MAX_EXPOSURE, r.stdout
    s = _settings(unit.read_text())
    assert s["CapabilityBoundingSet"] == [""] and s["User"] == ["pazz"]
    assert s["RestartPreventExitStatus"] == ["2"]
