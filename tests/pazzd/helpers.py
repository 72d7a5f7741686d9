"""Shared bits of the daemon tests: a small workload on disk and a pazzd subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

from pazzapi import ApiError, call
from pazzdata import workloads


def free_port(kind=socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_workload(d: Path) -> tuple[Path, Path]:
    wl = workloads.generate("grid", 2, 40, rule_ids=True, acls=1)
    topo, rules = d / "topology.yaml", d / "rules.jsonl"
    wl.write(topo, rules)
    return topo, rules


def base_config(d: Path, **over) -> dict:
    topo, rules = write_workload(d)
    cfg = {
        "topology": str(topo),
        "rules": str(rules),
        "sflow": {"listen": f"127.0.0.1:{free_port(socket.SOCK_DGRAM)}", "sampling_rate": 1},
        "metrics": {"listen": "127.0.0.1:0"},
        "api": {"socket": str(d / "pazzd.sock")},
        "database": str(d / "faults.db"),
    }
    cfg.update(over)
    return cfg


def write_config(path: Path, cfg: dict) -> Path:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


class Pazzd:
    """pazzd as a subprocess; stopped (and killed if need be) by stop()."""

    def __init__(self, config: Path, env: dict | None = None, prefix: list[str] = ()) -> None:
        """prefix: a command that runs pazzd (setpriv ..., say)."""
        self.config = config
        self.sock = yaml.safe_load(config.read_text())["api"]["socket"]
        self.log = open(config.parent / "pazzd.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "pazzd", "--config", str(config)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )

    def wait_ready(self, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pazzd exited {self.proc.returncode}:\n{self.log_text()}")
            with contextlib.suppress(ApiError, OSError, ValueError):
                return call(self.sock, "status", timeout=5)
            if time.monotonic() > deadline:
                raise TimeoutError(self.log_text())
            time.sleep(0.2)

    def call(self, cmd: str, **kw):
        return call(self.sock, cmd, **kw)

    def log_text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return (self.config.parent / "pazzd.log").read_text()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def wait_for(fn, timeout: float = 20.0, every: float = 0.2):
    """fn()'s first true value within timeout, else its last value."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > end:
            return v
        time.sleep(every)


def pazzctl(sock: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(
        [sys.executable, "-m", "pazzd.cli", "--socket", sock, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check and p.returncode != 0:
        raise AssertionError(f"pazzctl {args}: {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def faults(sock: str) -> list[dict]:
    """The fault rows, as `pazzctl faults --json` prints them."""
    return json.loads(pazzctl(sock, "faults", "--json").stdout)


@contextlib.contextmanager
def grid_lab(tag: str, sampling: int = 1, controller: bool = True, **bring_up_kw):
    """The lab's 2x2 grid (100 rules, 2 ACLs, sFlow 1 in `sampling`) on patched OVS, with
    pazzd and the os-ken controller app through its proxy, or the rules put on with
    ovs-ofctl (pazzlab.demo.bring_up with controller and bring_up_kw); yields (lab, run,
    workdir) and removes everything afterwards, also on failure."""
    import shutil
    import tempfile

    from pazzlab.demo import bring_up
    from pazzlab.lab import Lab
    from pazzlab.ovs import stop_processes

    prefix = lab_prefix("tcpreplay")
    workdir = Path(tempfile.mkdtemp(prefix=f"pazz-{tag}-"))
    lab = Lab(prefix, workdir / "lab", kind="grid", size=2, rules=100, acls=2, sampling=sampling)
    procs: list[subprocess.Popen] = []
    try:
        lab.start()
        yield lab, bring_up(lab, workdir, procs, controller=controller, **bring_up_kw), workdir
    finally:
        stop_processes(procs, timeout=10)
        lab.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def lab_leftovers(tag: str, run_dir: Path | None = None) -> list[str]:
    """Interfaces, namespaces and Mininet shells of the lab with this tag that still exist,
    and, given its run directory, the processes started from it and the directory itself."""
    stem = f"pz{tag}"
    out = [n for n in os.listdir("/sys/class/net") if n.startswith(stem)]
    if Path("/run/netns").exists():
        out += [f"netns {n}" for n in os.listdir("/run/netns") if n.startswith(stem)]
    shell = f"mininet:{stem}".encode()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                argv = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(a.startswith(shell) or (run_dir and str(run_dir).encode() in a) for a in argv):
                out.append(f"pid {d.name}: {b' '.join(argv)[:100]!r}")
    if run_dir is not None and run_dir.exists():
        out.append(f"run dir {run_dir}")
    return out


def lab_prefix(*tools: str) -> str:
    """The patched OVS build for a lab test (PAZZ_OVS_PREFIX), or a skip that says what is
    missing: the build, root, Mininet's mnexec or one of `tools`."""
    import shutil

    import pytest

    p = os.environ.get("PAZZ_OVS_PREFIX")
    if not p or not Path(p, "sbin/ovs-vswitchd").exists():
        pytest.skip("PAZZ_OVS_PREFIX is not set (run `make ovs`)")
    missing = [t for t in ("mnexec", *tools) if shutil.which(t) is None]
    if os.geteuid() != 0 or missing:
        pytest.skip(f"needs root and {', '.join(('mnexec', *tools))} (missing: {missing})")
    return p
