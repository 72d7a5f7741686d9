"""`python -m pazzlab.lab --topology FILE --rules FILE`: the lab of any network, here the
example in examples/rehearsal-*. Unit tests check the file errors (file, line, field); the
ovs tests start the lab on real patched OVS, ping between hosts across the transit switch
(addresses from the topology, static ARP, the rules), look at the installed rules, and check
that nothing of the lab is left after SIGTERM, and after a failed start."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pazzlab import lab as labmod
from pazzlab.lab import Lab, LabError, load_network

from .helpers import lab_leftovers, lab_prefix

ROOT = Path(__file__).resolve().parents[2]
NET = ROOT / "examples" / "rehearsal-net.yaml"
RULES = ROOT / "examples" / "rehearsal-rules.jsonl"


@pytest.fixture
def prefix():
    return lab_prefix("ping")


# --- the files ---------------------------------------------------------------------------------
def test_the_example_network_loads_with_addresses_from_the_topology():
    wl, addrs = load_network(NET, RULES)
    assert wl.hosts == {"a": (1, 1), "b": (3, 2), "c": (3, 3)}
    assert not any(p[0] == 2 for p in wl.hosts.values())  # core: a transit switch
    assert {h: a.cidr for h, a in addrs.items()} == {
        "a": "10.1.0.2/24",
        "b": "10.2.0.2/24",
        "c": "10.2.0.66/26",
    }
    assert addrs["a"].mac == "02:00:00:00:01:02"
    assert len(wl.entries) == 8 and any(e.priority == 1000 for e in wl.entries)


def test_hosts_without_host_key_get_derived_addresses(tmp_path):
    topo = tmp_path / "t.yaml"
    topo.write_text("switches:\n  - {name: s1, dpid: 1, ports: [1, 2]}\nedge: [s1:2, s1:1]\n")
    rules = tmp_path / "r.jsonl"
    rules.write_text('{"dpid": 1, "flow": "priority=1,ip,actions=output:2"}\n')
    wl, addrs = load_network(topo, rules)
    assert wl.hosts == {"h1": (1, 1), "h2": (1, 2)}
    assert addrs["h1"].cidr == "10.0.0.1/8" and addrs["h2"].cidr == "10.0.1.1/8"
    assert addrs["h2"].mac == "02:00:00:00:00:02"


@pytest.mark.parametrize(
    ("topo_text", "rules_text", "expect"),
    [
        (
            "switches:\n  - {name: s1, dpid: 1, ports: [1, 2]}\nedge:\n"
            "  - {port: s1:1, host: {ip: 10.0.0.300/24}}\n",
            "",
            r"t\.yaml:4: edge\.host\.ip: '10\.0\.0\.300/24' is not an IPv4",
        ),
        (
            "switches:\n  - {name: s1, dpid: 1, ports: [1, 2]}\nedge:\n"
            "  - {port: s1:1, host: {ip: 10.0.0.2}}\n",
            "",
            r"t\.yaml:4: edge\.host\.ip: .*LEN",
        ),
        (
            "switches:\n  - {name: s1, dpid: 1, ports: [1, 2]}\nedge:\n"
            "  - {port: s1:1, host: {ip: 10.0.0.2/24, mac: 'zz'}}\n",
            "",
            r"t\.yaml:4: edge\.host\.mac",
        ),
        (
            "switches:\n  - {name: s1, dpid: 1, ports: [1, 2]}\nedge:\n"
            "  - {port: s1:1, host: {ip: 10.0.0.2/24, gw: 10.0.0.1}}\n",
            "",
            r"t\.yaml:4: edge\.host:",
        ),
        (
            "switches:\n  - {name: s1, dpid: 1, ports: [1, 2]}\nedge:\n"
            "  - {port: s1:1, host: {ip: 10.0.0.2/24}}\n  - {port: s1:2, host: {ip: 10.0.0.2/8}}\n",
            "",
            r"t\.yaml:5: edge\.host\.ip: 10\.0\.0\.2 is also host h1's",
        ),
        (
            "switches:\n  - {name: s1, dpid: 1, ports: [1, 2]}\nlinks:\n  - [s1:1, s9:1]\n",
            "",
            r"t\.yaml:4: .*unknown switch 's9'",
        ),
        (
            "switches:\n  - {name: s1, dpid: 1, ports: [1, 2]}\nedge: [s1:1]\n",
            '{"dpid": 1, "flow": "priority=1,ip,actions=output:2"}\n'
            '{"dpid": 1, "flow": "priority=1,ip,nw_dst=10.0.0.0/8,actions=output:7"}\n',
            r"r\.jsonl:2: output: s1 has no port 7",
        ),
        (
            "switches:\n  - {name: s1, dpid: 1, ports: [1, 2]}\nedge: [s1:1]\n",
            '{"dpid": 5, "flow": "priority=1,ip,actions=output:2"}\n',
            r"r\.jsonl:1: dpid: switch 5 is not in",
        ),
        (
            "switches:\n  - {name: s1, dpid: 1, ports: [1, 2]}\nedge: [s1:1]\n",
            '{"dpid": 1, "flow": "priority=1,ip,actions=group:3"}\n',
            r"r\.jsonl:1: group: s1 has no group 3",
        ),
        (
            "switches:\n  - {name: s1, dpid: 1, ports: [1, 2]}\nedge: [s1:1]\n",
            '{"dpid": 1, "flow": "priority=1,ip,nw_dst=1.2.3.4.5,actions=output:2"}\n',
            r"r\.jsonl:1: .*ipv4_dst",
        ),
    ],
)
def test_bad_files_name_the_file_line_and_field(tmp_path, topo_text, rules_text, expect):
    (tmp_path / "t.yaml").write_text(topo_text)
    (tmp_path / "r.jsonl").write_text(rules_text)
    with pytest.raises(LabError, match=expect):
        load_network(tmp_path / "t.yaml", tmp_path / "r.jsonl")


def test_the_cli_reports_a_bad_file_before_building_anything(tmp_path, capsys):
    (tmp_path / "r.jsonl").write_text('{"dpid": 9, "flow": "priority=1,ip,actions=output:1"}\n')
    assert (
        labmod.main(
            ["--topology", str(NET), "--rules", str(tmp_path / "r.jsonl"), "--dir", str(tmp_path)]
        )
        == 2
    )
    assert "r.jsonl:1: dpid: switch 9 is not in" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl"]


# --- on patched OVS ----------------------------------------------------------------------------
class _Lines:
    """A process's output lines, read in a thread (no blocking reads in the test)."""

    def __init__(self, p: subprocess.Popen) -> None:
        self.p, self.lines, self.q = p, [], queue.Queue()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))
            self.q.put(line)
        self.q.put(None)

    def until_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.q.get(timeout=1.0)
            except queue.Empty:
                continue
            if line is None:
                break
            if line.startswith("lab: ready"):
                return
        raise AssertionError("the lab did not get ready:\n" + "\n".join(self.lines))

    def text(self) -> str:
        self.thread.join(timeout=10)
        return "\n".join(self.lines)


@pytest.mark.ovs
def test_the_lab_runs_the_example_network_until_sigterm(prefix, tmp_path):
    env = dict(os.environ, PAZZ_OVS_PREFIX=prefix)
    cmd = [
        sys.executable,
        "-m",
        "pazzlab.lab",
        "--topology",
        str(NET),
        "--rules",
        str(RULES),
        "--dir",
        str(tmp_path),
    ]
    p = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lab_out = _Lines(p)
    run_dir = None
    info: dict = {}
    try:
        lab_out.until_ready(timeout=400)  # it may wait for another lab's ovs-vswitchd
        run_dir = Path(next(ln for ln in lab_out.lines if "run directory" in ln).split()[3])
        info = json.loads((run_dir / "lab.json").read_text())
        hosts = info["hosts"]
        assert {h: hosts[h]["cidr"] for h in hosts} == {
            "a": "10.1.0.2/24",
            "b": "10.2.0.2/24",
            "c": "10.2.0.66/26",
        }

        def ns(h, *cmd, check=True):
            return subprocess.run(
                ["ip", "netns", "exec", hosts[h]["netns"], *cmd],
                capture_output=True,
                text=True,
                timeout=30,
                check=check,
            )

        assert {h: hosts[h]["netns"] for h in hosts} == {
            h: f"pz{info['tag']}-{h}" for h in ("a", "b", "c")
        }
        for h in hosts:
            addr = ns(h, "ip", "-o", "-4", "addr", "show", "dev", "eth0").stdout
            assert f"inet {hosts[h]['cidr']}" in addr
            assert ns(h, "cat", "/sys/class/net/eth0/address").stdout.strip() == hosts[h]["mac"]
            neigh = ns(h, "ip", "neigh", "show", "dev", "eth0").stdout
            for o in hosts:
                if o != h:
                    assert f"{hosts[o]['ip']} lladdr {hosts[o]['mac']} PERMANENT" in neigh
        # a -> b and a -> c cross the transit switch core (a /8 route on edge1 and core, the
        # /24 and its /26 inside on edge2), and the replies come back on core's /16.
        for src, dst in (("a", "b"), ("a", "c"), ("c", "a"), ("b", "c")):
            r = ns(src, "ping", "-c", "3", "-i", "0.2", "-W", "2", hosts[dst]["ip"], check=False)
            assert r.returncode == 0 and " 0% packet loss" in r.stdout, (src, dst, r.stdout)
        # The rules are on the switches: the file's entries, bridge by bridge.
        ofctl = [f"{info['ovs_bin']}/ovs-ofctl", "-O", "OpenFlow13"]
        want = {1: 2, 2: 2, 3: 4}
        for name, sw in info["switches"].items():
            out = subprocess.run(
                [*ofctl, "dump-flows", "--no-stats", sw["mgmt"]],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            flows = [ln for ln in out.splitlines() if "actions=" in ln]
            assert len(flows) == want[sw["dpid"]], (name, out)
        edge2 = info["switches"]["edge2"]
        assert any(
            "priority=1000" in ln and "tp_dst=22" in ln and "actions=drop" in ln
            for ln in subprocess.run(
                [*ofctl, "dump-flows", "--no-stats", edge2["mgmt"]], capture_output=True, text=True
            ).stdout.splitlines()
        )

        def trace(flow: str) -> str:
            return subprocess.run(
                [
                    f"{info['ovs_bin']}/ovs-appctl",
                    "-t",
                    f"{info['ovs_rundir']}/ovs-vswitchd.ctl",
                    "ofproto/trace",
                    edge2["bridge"],
                    flow,
                ],
                capture_output=True,
                text=True,
                check=True,
            ).stdout

        acl = trace("in_port=1,tcp,nw_dst=10.2.0.2,tp_dst=22")
        assert "priority 1000" in acl and "drop" in acl, acl
        assert "output:2" in trace("in_port=1,tcp,nw_dst=10.2.0.2,tp_dst=80")
        assert "output:3" in trace("in_port=1,tcp,nw_dst=10.2.0.66,tp_dst=80")  # the /26
        assert p.poll() is None
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    text = lab_out.text()
    assert p.returncode == 0, text
    assert "SIGTERM: removing the lab" in text and "lab: removed:" in text
    assert info and run_dir is not None
    assert lab_leftovers(info["tag"], run_dir) == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.ovs
def test_a_failure_after_start_removes_everything(prefix, tmp_path, monkeypatch, capsys):
    made: list[Lab] = []

    def fail(self):
        made.append(self)
        assert lab_leftovers(self.tag, self.workdir)  # bridges, hosts, OVS are up by now
        raise RuntimeError("injected")

    monkeypatch.setattr(Lab, "install_rules", fail)
    monkeypatch.setenv("PAZZ_OVS_PREFIX", prefix)
    rc = labmod.main(["--topology", str(NET), "--rules", str(RULES), "--dir", str(tmp_path)])
    assert rc == 1
    assert "lab: failed: injected" in capsys.readouterr().err
    assert len(made) == 1
    assert lab_leftovers(made[0].tag, made[0].workdir) == []
    assert list(tmp_path.iterdir()) == []
