"""Two labs started at the same moment take turns on the machine's one userspace datapath
(pazzlab.ovs.DatapathLock): the second waits, says which process holds it, and comes up
once the first is gone, 5 times in a row. The ready file carries lab.json, whose OVSDB
socket and ovs-appctl target answer, and whose host namespaces carry the host names. With
--controller the pazzd.yaml written for the lab has the proxy listening where the bridges
connect."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from .helpers import lab_leftovers, lab_prefix
from .test_lab_files import ROOT, _Lines

pytestmark = pytest.mark.ovs


def _start(prefix: str, tmp: Path, name: str, *extra: str) -> tuple[subprocess.Popen, _Lines]:
    cmd = [sys.executable, "-m", "pazzlab.lab", "--topology", "grid4", "--dir", str(tmp)]
    cmd += ["--ready-file", str(tmp / f"{name}.json"), *extra]
    p = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=dict(os.environ, PAZZ_OVS_PREFIX=prefix),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    return p, _Lines(p)


def _wait_file(path: Path, procs, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while not path.exists():
        for p, out in procs:
            assert p.poll() is None, out.text()
        assert time.monotonic() < deadline, f"{path.name} did not appear"
        time.sleep(0.1)
    return json.loads(path.read_text())


def _stop(p: subprocess.Popen, out: _Lines) -> str:
    if p.poll() is None:
        os.kill(p.pid, signal.SIGTERM)
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    text = out.text()
    assert p.returncode == 0, text
    return text


def _check_lab(info: dict, name: str, bin_dir: Path) -> None:
    """What lab.json gives answers, as an operator would use it."""
    bridge = info["switches"]["s1"]["bridge"]
    vsctl = [str(bin_dir / "ovs-vsctl"), f"--db={info['ovsdb']}", "br-exists", bridge]
    subprocess.run(vsctl, check=True, timeout=30)
    appctl = [str(bin_dir / "ovs-appctl"), "-t", info["appctl"], "version"]
    assert (
        "ovs-vswitchd"
        in subprocess.run(appctl, capture_output=True, text=True, check=True, timeout=30).stdout
    )
    assert {h: v["netns"] for h, v in info["hosts"].items()} == {
        h: f"pz{info['tag']}-{h}" for h in ("h1", "h2", "h3", "h4")
    }
    assert all(Path("/run/netns", v["netns"]).exists() for v in info["hosts"].values())
    cfg = yaml.safe_load(Path(info["config"]).read_text())
    if name == "b":  # --controller: the proxy listens where the bridges connect
        assert cfg["controller"] == {
            "enabled": True,
            "listen": "127.0.0.1:16653",
            "address": "127.0.0.1:6633",
        }
        assert "rules" not in cfg  # the model comes from the proxy's FlowMods
    else:
        assert cfg["controller"] == {"enabled": False} and cfg["rules"]


def test_two_labs_at_once_take_turns(tmp_path):
    prefix = lab_prefix()
    bin_dir = Path(prefix, "bin")
    for round_ in range(5):
        tmp = tmp_path / f"r{round_}"
        tmp.mkdir()
        procs = {
            "a": _start(prefix, tmp, "a"),
            "b": _start(prefix, tmp, "b", "--controller", "tcp:127.0.0.1:16653"),
        }
        try:
            deadline = time.monotonic() + 300
            while not any((tmp / f"{n}.json").exists() for n in procs):
                for p, out in procs.values():
                    assert p.poll() is None, out.text()
                assert time.monotonic() < deadline, "neither lab came up"
                time.sleep(0.1)
            first = "a" if (tmp / "a.json").exists() else "b"
            second = "b" if first == "a" else "a"
            info = json.loads((tmp / f"{first}.json").read_text())
            assert info["pid"] == procs[first][0].pid
            _check_lab(info, first, bin_dir)
            # The other waits for the datapath and says who holds it.
            time.sleep(1.0)
            assert not (tmp / f"{second}.json").exists()
            assert f"held by pid {info['pid']}" in "\n".join(procs[second][1].lines)
            _stop(*procs[first])
            assert not (tmp / f"{first}.json").exists()  # the ready file goes with the lab
            assert lab_leftovers(info["tag"]) == []
            info2 = _wait_file(tmp / f"{second}.json", [procs[second]], 300)
            _check_lab(info2, second, bin_dir)
            _stop(*procs[second])
            assert lab_leftovers(info2["tag"]) == []
        finally:
            for p, out in procs.values():
                if p.poll() is None:
                    _stop(p, out)
