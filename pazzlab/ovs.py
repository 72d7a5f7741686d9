"""The lab's ground floor: processes, network namespaces, veth pairs and a private patched
Open vSwitch (OvsInstance: its own ovsdb-server and userspace ovs-vswitchd under a work
directory; the system's OVS is never used). The single-bridge OVS tests use these directly;
pazzlab.lab builds whole networks on them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

LINK_MTU = 1508
AGENT = "127.0.0.1"  # sFlow agent=lo


def run(*cmd, check: bool = True, timeout: float = 30, env=None) -> str:
    p = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=env
    )
    if check and p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, p.args, p.stdout, p.stderr)
    return p.stdout


def stop_processes(procs, timeout: float = 5.0) -> None:
    """Terminate the still-running processes, newest first; kill any that do not exit."""
    for p in reversed(procs):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=timeout)


def unique_name(stem: str = "t") -> str:
    """'pz<stem><6 hex>', at most 15 characters (a Linux interface name)."""
    return f"pz{stem[:5]}{secrets.token_hex(3)}"


def free_udp_port(host: str = AGENT) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def free_tcp_port(host: str = AGENT) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


CONTROLLER_APP = Path(__file__).resolve().parent.parent / "examples" / "controller_app.py"


def start_controller(
    rules_file, port: int, log_path, *, updates=None, timeout: float = 60.0, apps=None
) -> subprocess.Popen:
    """The example os-ken controller app (examples/controller_app.py) on 127.0.0.1:port,
    installing the routes, ACLs and groups of `rules_file` on every switch that connects
    (and, with `updates`, the FlowMods of each line appended to that file). Returns once
    it accepts connections; the caller stops the process.

    apps: instead, the example apps (examples/apps: "router,acl,lb") in one process;
    `updates` is then the file the lb app follows. A dict {"apps": ..., "lb_cookie": ...}
    also sets the cookie of lb's FlowMods."""
    cmd = [sys.executable, str(CONTROLLER_APP), "--port", str(port), "--rules", str(rules_file)]
    if updates is not None:
        cmd += ["--updates", str(updates)]
    if apps is not None:
        spec = apps if isinstance(apps, dict) else {"apps": apps}
        cmd = [sys.executable, "-m", "examples.apps.run", "--port", str(port)]
        cmd += ["--apps", spec["apps"], "--rules", str(rules_file)]
        if updates is not None:
            cmd += ["--lb-rules", str(updates)]
        if spec.get("lb_cookie") is not None:
            cmd += ["--lb-cookie", str(spec["lb_cookie"])]
    with open(log_path, "w") as log:
        p = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=CONTROLLER_APP.parent.parent,
        )
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError), socket.create_connection((AGENT, port), timeout=1):
            return p
        if p.poll() is not None or time.monotonic() > deadline:
            if p.poll() is None:
                p.kill()
                p.wait()
            tail = "\n".join(Path(log_path).read_text(errors="replace").splitlines()[-20:])
            raise RuntimeError(f"controller app did not listen on {AGENT}:{port}:\n{tail}")
        time.sleep(0.2)


# The userspace datapath is one per machine (see wait_for_datapath_free): every
# OvsInstance holds this lock from start() to stop(), so two labs or tests started at once
# take turns instead of colliding on ovs-netdev. The file says who holds it.
DATAPATH_LOCK = Path(os.environ.get("PAZZ_DATAPATH_LOCK", "/run/lock/pazz-ovs-netdev.lock"))


class DatapathLock:
    """A machine-wide flock on DATAPATH_LOCK, re-entrant within a process (a process that
    holds it and starts a second instance must not wait for itself)."""

    _fd: int | None = None
    _depth = 0

    @classmethod
    def acquire(
        cls, who: str, timeout: float = 600.0, say: Callable[[str], None] | None = None
    ) -> bool:
        """Wait for the lock; True when this call took it (False: this process has it)."""
        if cls._depth:
            cls._depth += 1
            return False
        DATAPATH_LOCK.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(DATAPATH_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        start = time.monotonic()
        told = False
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    holder = os.pread(fd, 4096, 0).decode(errors="replace").strip()
                    # The holder writes who it is just after it locks: wait a moment for it.
                    waited = time.monotonic() - start
                    if not told and (holder or waited > 1.0):
                        msg = f"waiting for the userspace datapath, held by {holder or 'another process'}"
                        (say or (lambda m: print(m, file=sys.stderr, flush=True)))(msg)
                        told = True
                    if waited > timeout:
                        raise RuntimeError(
                            f"the userspace datapath is still held after {timeout:.0f} s by "
                            f"{holder or 'another process'} ({DATAPATH_LOCK})"
                        ) from None
                    time.sleep(0.2)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} ({who})\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        cls._fd, cls._depth = fd, 1
        return True

    @classmethod
    def release(cls) -> None:
        if not cls._depth:
            return
        cls._depth -= 1
        if not cls._depth:
            fd, cls._fd = cls._fd, None
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the descriptor releases the flock


def wait_for_datapath_free(timeout: float = 120.0, say: Callable[[str], None] | None = None):
    """The userspace datapath owns one tap device, ovs-netdev, in the root namespace; a
    second ovs-vswitchd cannot create netdev bridges while another one holds it."""
    deadline = time.monotonic() + timeout
    told = False
    # A device left by an ovs-vswitchd that died is reused by the next one: wait only
    # while some ovs-vswitchd runs.
    while Path("/sys/class/net/ovs-netdev").exists() and _vswitchd_running():
        if not told and say is not None:
            say("waiting for another userspace ovs-vswitchd to release ovs-netdev ...")
            told = True
        if time.monotonic() > deadline:
            raise RuntimeError("another userspace ovs-vswitchd holds the ovs-netdev device")
        time.sleep(0.5)


def _vswitchd_running() -> bool:
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                if (d / "comm").read_text().strip() == "ovs-vswitchd":
                    return True
    return False


class Cleanup:
    """LIFO stack of cleanup callbacks; errors are swallowed so that every step runs."""

    def __init__(self) -> None:
        self._stack: list[tuple[Callable, tuple]] = []

    def push(self, fn: Callable, *args) -> None:
        self._stack.append((fn, args))

    def run(self) -> None:
        while self._stack:
            fn, args = self._stack.pop()
            with contextlib.suppress(Exception):
                fn(*args)


def _offloads_off(ifname: str, ns: str | None = None) -> None:
    if shutil.which("ethtool") is None:
        return
    cmd = [
        "ethtool",
        "-K",
        ifname,
        "tx",
        "off",
        "rx",
        "off",
        "tso",
        "off",
        "gso",
        "off",
        "gro",
        "off",
    ]
    if ns:
        cmd = ["ip", "netns", "exec", ns, *cmd]
    run(*cmd, check=False)


class Netns:
    """A Linux network namespace, deleted by delete() or at the end of a with block.
    With `pid`, a name for that process's namespace (`ip netns attach`, e.g. a Mininet
    host's): `ip netns exec NAME` and /run/netns/NAME then reach it like any other."""

    def __init__(self, name: str | None = None, *, pid: int | None = None) -> None:
        self.name = name or unique_name("ns")
        if pid is not None:
            run("ip", "netns", "attach", self.name, pid)
            return
        run("ip", "netns", "add", self.name)
        self.run("ip", "link", "set", "lo", "up")

    def run(self, *cmd: str, check: bool = True, timeout: float = 30) -> str:
        return run("ip", "netns", "exec", self.name, *cmd, check=check, timeout=timeout)

    def popen(self, *cmd: str, **kw) -> subprocess.Popen:
        return subprocess.Popen(["ip", "netns", "exec", self.name, *map(str, cmd)], **kw)

    def delete(self) -> None:
        # Kill anything left running inside, then remove the namespace.
        pids = run("ip", "netns", "pids", self.name, check=False).split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        run("ip", "netns", "delete", self.name, check=False)

    def __enter__(self) -> Netns:
        return self

    def __exit__(self, *exc) -> None:
        self.delete()


class VethPair:
    """A veth pair a <-> b, each end optionally moved into a namespace."""

    def __init__(self, a: str, b: str, ns_a: Netns | None = None, ns_b: Netns | None = None):
        self.a, self.b, self.ns_a, self.ns_b = a, b, ns_a, ns_b
        run("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        for end, ns in ((a, ns_a), (b, ns_b)):
            if ns is not None:
                run("ip", "link", "set", end, "netns", ns.name)
                ns.run("ip", "link", "set", end, "up")
            else:
                run("ip", "link", "set", end, "up")
            _offloads_off(end, ns.name if ns else None)

    @property
    def outer(self) -> str:
        return self.b

    @classmethod
    def host(cls, ns: Netns, ifname: str, cidr: str, mac: str | None = None) -> VethPair:
        outer = unique_name("v")
        tmp = unique_name("i")
        pair = cls(tmp, outer)
        run("ip", "link", "set", tmp, "netns", ns.name)
        ns.run("ip", "link", "set", tmp, "name", ifname)
        pair.a, pair.ns_a = ifname, ns
        if mac:
            ns.run("ip", "link", "set", ifname, "address", mac)
        ns.run("ip", "addr", "add", cidr, "dev", ifname)
        ns.run("ip", "link", "set", ifname, "up")
        _offloads_off(ifname, ns.name)
        # No IPv6 chatter (router solicitations, DAD) on test links.
        ns.run("sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1", check=False)
        run("sysctl", "-qw", f"net.ipv6.conf.{outer}.disable_ipv6=1", check=False)
        return pair

    def delete(self) -> None:
        # Deleting either end removes both; the root-namespace end is always reachable.
        if self.ns_b is None:
            run("ip", "link", "del", self.b, check=False)
        elif self.ns_a is None:
            run("ip", "link", "del", self.a, check=False)
        else:
            self.ns_a.run("ip", "link", "del", self.a, check=False)


class OvsInstance:
    """A private ovsdb-server + ovs-vswitchd (userspace datapath) in 'rundir'."""

    def __init__(self, prefix: str | os.PathLike, rundir: str | os.PathLike, *, name="ovs"):
        self.prefix = Path(prefix)
        self.rundir = Path(rundir)
        self.name = name
        self.rundir.mkdir(parents=True, exist_ok=True)
        self._procs: list[subprocess.Popen] = []
        self._locked = False  # holds DatapathLock (start() to stop())
        self.bin = {}
        for tool in ("ovsdb-server", "ovs-vswitchd", "ovsdb-tool"):
            self.bin[tool] = self._find(tool, ("sbin", "bin"))
        for tool in ("ovs-vsctl", "ovs-ofctl", "ovs-appctl"):
            self.bin[tool] = self._find(tool, ("bin", "sbin"))
        self.schema = self._find_schema()
        self.db = self.rundir / "conf.db"
        self.db_sock = self.rundir / "db.sock"
        self.env = dict(
            os.environ,
            OVS_RUNDIR=str(self.rundir),
            OVS_DBDIR=str(self.rundir),
            OVS_LOGDIR=str(self.rundir),
            OVS_SYSCONFDIR=str(self.rundir),
            OVS_PKGDATADIR=str(self.schema.parent),
        )

    def _find(self, tool: str, subdirs) -> str:
        for sub in subdirs:
            p = self.prefix / sub / tool
            if p.exists():
                return str(p)
        raise FileNotFoundError(f"{tool} not found under {self.prefix}")

    def _find_schema(self) -> Path:
        for p in (
            self.prefix / "share/openvswitch/vswitch.ovsschema",
            Path("/usr/share/openvswitch/vswitch.ovsschema"),
        ):
            if p.exists():
                return p
        raise FileNotFoundError("vswitch.ovsschema not found")

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, say: Callable[[str], None] | None = None) -> OvsInstance:
        first = DatapathLock.acquire(f"{self.name} in {self.rundir}", say=say)
        self._locked = True
        try:
            if first:  # an ovs-vswitchd that takes no lock (the system's, say)
                wait_for_datapath_free(say=say)
            run(self.bin["ovsdb-tool"], "create", self.db, self.schema, env=self.env)
            self._spawn(
                self.bin["ovsdb-server"],
                self.db,
                f"--remote=punix:{self.db_sock}",
                f"--pidfile={self.rundir / 'ovsdb-server.pid'}",
                f"--unixctl={self.rundir / 'ovsdb-server.ctl'}",
                f"--log-file={self.rundir / 'ovsdb-server.log'}",
                "-vconsole:off",
            )
            self._wait_for(self.db_sock)
            self.vsctl("--no-wait", "init")
            self._spawn(
                self.bin["ovs-vswitchd"],
                f"unix:{self.db_sock}",
                f"--pidfile={self.rundir / 'ovs-vswitchd.pid'}",
                f"--unixctl={self.rundir / 'ovs-vswitchd.ctl'}",
                f"--log-file={self.rundir / 'ovs-vswitchd.log'}",
                "-vconsole:off",
                "--disable-system",
            )
            self._wait_for(self.rundir / "ovs-vswitchd.ctl")
            # A vsctl that waits for ovs-vswitchd to apply it: the switch is up once it returns.
            self.vsctl("--timeout=20", "set", "Open_vSwitch", ".", "external_ids:pazz=1")
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, *cmd) -> None:
        p = subprocess.Popen(
            [str(c) for c in cmd],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(self.rundir / f"{Path(str(cmd[0])).name}.stderr", "w"),  # noqa: SIM115
            start_new_session=True,
        )
        self._procs.append(p)

    def _wait_for(self, path: Path, timeout: float = 15) -> None:
        deadline = time.monotonic() + timeout
        while not path.exists():
            for p in self._procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited early:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} did not appear:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Delete the bridges, then stop ovs-vswitchd and ovsdb-server (by pid), even if
        start() failed half-way. A netdev bridge is a persistent tap device in the root
        namespace: ovs-vswitchd removes it on del-br, not when it exits."""
        if len(self._procs) == 2 and all(p.poll() is None for p in self._procs):
            with contextlib.suppress(Exception):
                bridges = self.vsctl("--timeout=5", "list-br", timeout=10).split()
                dels = [a for br in bridges for a in ("--", "--if-exists", "del-br", br)]
                if dels:
                    self.vsctl("--timeout=10", *dels, timeout=15)
        stop_processes(self._procs)
        self._procs.clear()
        if self._locked:
            self._locked = False
            DatapathLock.release()

    def __enter__(self) -> OvsInstance:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_tail(self, n: int = 30) -> str:
        out = []
        for f in sorted(self.rundir.glob("*.log")) + sorted(self.rundir.glob("*.stderr")):
            lines = f.read_text(errors="replace").splitlines()[-n:]
            out.append(f"== {f.name}\n" + "\n".join(lines))
        return "\n".join(out)

    # -- tools ---------------------------------------------------------------------------
    def vsctl(self, *args: str, timeout: float = 30) -> str:
        return run(
            self.bin["ovs-vsctl"],
            f"--db=unix:{self.db_sock}",
            *args,
            timeout=timeout,
            env=self.env,
        )

    def ofctl(self, *args: str, version: str | None = "OpenFlow13", timeout: float = 30) -> str:
        opts = ["-O", version] if version else []
        return run(self.bin["ovs-ofctl"], *opts, *args, timeout=timeout, env=self.env)

    def appctl(self, *args: str, target: str = "ovs-vswitchd", timeout: float = 30) -> str:
        ctl = self.rundir / f"{target}.ctl"
        return run(self.bin["ovs-appctl"], "-t", ctl, *args, timeout=timeout, env=self.env)

    # -- conveniences --------------------------------------------------------------------
    def add_bridge(
        self,
        name: str,
        dpid: int | None = None,
        fail_mode: str = "secure",
        other_config: dict[str, str] | None = None,
    ) -> None:
        cmd = ["add-br", name, "--", "set", "bridge", name, "datapath_type=netdev"]
        if fail_mode:
            cmd.append(f"fail_mode={fail_mode}")
        if dpid is not None:
            cmd.append(f"other_config:datapath-id={dpid:016x}")
        for k, v in (other_config or {}).items():
            cmd.append(f"other_config:{k}={v}")
        self.vsctl(*cmd)

    def add_port(
        self,
        bridge: str,
        port: str,
        ofport: int | None = None,
        iface_other_config: dict[str, str] | None = None,
    ) -> None:
        cmd = ["add-port", bridge, port]
        sets = []
        if ofport is not None:
            sets.append(f"ofport_request={ofport}")
        for k, v in (iface_other_config or {}).items():
            sets.append(f"other_config:{k}={v}")
        if sets:
            cmd += ["--", "set", "interface", port, *sets]
        self.vsctl(*cmd)

    def dump_flows(self, bridge: str, *args: str) -> str:
        return self.ofctl("dump-flows", bridge, *args)

    def port_stats(self, bridge: str) -> dict[int, dict[str, int]]:
        """{ofport: {"rx_packets": n, "tx_packets": n, "rx_dropped": n, "tx_dropped": n}}."""
        out = self.ofctl("--no-names", "dump-ports", bridge)
        stats: dict[int, dict[str, int]] = {}
        cur = None
        for line in out.splitlines():
            m = re.match(r"\s*port\s+\"?([\w-]+)\"?:\s*rx pkts=(\d+).*?drop=(\d+)", line)
            if m:
                name = m.group(1)
                cur = {"rx_packets": int(m.group(2)), "rx_dropped": int(m.group(3))}
                key = int(name) if name.isdigit() else (0xFFFE if name == "LOCAL" else -1)
                stats[key] = cur
                continue
            m = re.match(r"\s*tx pkts=(\d+).*?drop=(\d+)", line)
            if m and cur is not None:
                cur["tx_packets"] = int(m.group(1))
                cur["tx_dropped"] = int(m.group(2))
        return stats


def wire_links(ovs: OvsInstance, topo, bridge: Callable[[int], str], cleanup: Cleanup) -> dict:
    """One veth pair per topology link between the bridges (MTU LINK_MTU for the Verify
    header, no IPv6 chatter), each end on its OpenFlow port. Returns (dpid, port) -> ifname."""
    ports, done = {}, set()
    for (a, pa), (b, pb) in sorted(topo.links.items()):
        if (b, pb) in done:
            continue
        done.add((a, pa))
        ea, eb = unique_name(f"l{a}"), unique_name(f"l{b}")
        pair = VethPair(ea, eb)
        cleanup.push(pair.delete)
        for end, dpid, port in ((ea, a, pa), (eb, b, pb)):
            run("ip", "link", "set", end, "mtu", str(LINK_MTU))
            run("sysctl", "-qw", f"net.ipv6.conf.{end}.disable_ipv6=1", check=False)
            ovs.vsctl(
                "add-port",
                bridge(dpid),
                end,
                "--",
                "set",
                "interface",
                end,
                f"ofport_request={port}",
                f"mtu_request={LINK_MTU}",
            )
            ports[(dpid, port)] = end
    return ports
