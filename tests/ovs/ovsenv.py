"""Private Open vSwitch instances and network namespaces for integration tests.

Everything here runs as root and cleans up after itself, also when a test fails.

    from tests.ovs.ovsenv import OvsInstance, Netns, VethPair, unique_name

    with OvsInstance(prefix, rundir) as ovs:           # ovsdb-server + ovs-vswitchd
        ovs.add_bridge("br1", dpid=1)                   # netdev, fail_mode=secure
        with Netns(unique_name("h")) as h1:
            link = VethPair.host(h1, "eth0", "10.0.0.1/24", mac="02:00:00:00:00:01")
            ovs.add_port("br1", link.outer, ofport=1)
            ovs.ofctl("add-flow", "br1", "priority=10,ip,actions=output:2")
            h1.run("ping", "-c1", "10.0.0.2", check=False)

API
---
``OvsInstance(prefix, rundir, *, name="ovs")``
    ``prefix``: an OVS install prefix (``$PAZZ_OVS_PREFIX``, or ``/usr`` for the stock Debian
    build); ``rundir``: an empty private directory (holds db, sockets, pid files and logs).
    ``.start()`` / ``.stop()`` (also via ``with``). ``.vsctl(*args)``, ``.ofctl(*args,
    version="OpenFlow13")`` (pass ``version=None`` for none), ``.appctl(*args, target=
    "ovs-vswitchd")`` run the prefix's tools against this instance and return stdout (raise
    ``subprocess.CalledProcessError`` with stderr on failure). ``.add_bridge(name, dpid=,
    fail_mode="secure", other_config=None)``, ``.add_port(bridge, port, ofport=None,
    iface_other_config=None)``, ``.dump_flows(bridge)``, ``.port_stats(bridge)`` ->
    ``{ofport: {"rx_packets", "tx_packets", ...}}``, ``.env`` (the OVS_* environment), and
    ``.log_tail()``. Every process started is tracked by pid and killed in ``stop()``.
``Netns(name)``
    A network namespace (``ip netns add``); ``.run(*cmd, check=True, timeout=30)``,
    ``.popen(*cmd, **kw)``, ``.delete()`` (also via ``with``). Deleting removes its links.
``VethPair(a, b, ns_a=None, ns_b=None)``
    A veth pair; ``.delete()``. ``VethPair.host(ns, ifname, cidr, mac=None)`` makes a pair
    whose inner end ``ifname`` lives in ``ns`` with the address ``cidr`` and whose outer
    end (``.outer``) stays in the root namespace for OVS. Offloads are turned off on both
    ends so that captures and checksums stay exact.
``Cleanup``
    A LIFO stack of cleanup callbacks (``.push(fn, *args)``, ``.run()``); used by the fixtures.
``unique_name(stem)``
    ``pz<stem><6 hex>`` short names, unique per call (Linux interface names are <= 15 chars).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["Cleanup", "Netns", "OvsInstance", "VethPair", "run", "unique_name"]


def run(*cmd: str, check: bool = True, timeout: float = 30, env=None) -> str:
    """Run a command, return stdout; on failure raise CalledProcessError with stderr."""
    p = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, env=env
    )
    if check and p.returncode != 0:
        raise subprocess.CalledProcessError(p.returncode, p.args, p.stdout, p.stderr)
    return p.stdout


def unique_name(stem: str = "t") -> str:
    """A short unique interface/namespace name: 'pz<stem><6 hex>' (<= 15 chars)."""
    return f"pz{stem[:5]}{secrets.token_hex(3)}"


class Cleanup:
    """LIFO stack of cleanup callbacks; errors are collected, never raised mid-way."""

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
    cmd = ["ethtool", "-K", ifname, "tx", "off", "rx", "off", "tso", "off", "gso", "off"]
    cmd += ["gro", "off"]
    if shutil.which("ethtool") is None:
        return
    if ns:
        cmd = ["ip", "netns", "exec", ns, *cmd]
    run(*cmd, check=False)


class Netns:
    """A Linux network namespace, deleted by delete() or at the end of a with block."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name or unique_name("ns")
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
        self._bin = {}
        for tool in ("ovsdb-server", "ovs-vswitchd", "ovsdb-tool"):
            self._bin[tool] = self._find(tool, ("sbin", "bin"))
        for tool in ("ovs-vsctl", "ovs-ofctl", "ovs-appctl"):
            self._bin[tool] = self._find(tool, ("bin", "sbin"))
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
    def start(self) -> OvsInstance:
        try:
            run(self._bin["ovsdb-tool"], "create", self.db, self.schema, env=self.env)
            self._spawn(
                self._bin["ovsdb-server"],
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
                self._bin["ovs-vswitchd"],
                f"unix:{self.db_sock}",
                f"--pidfile={self.rundir / 'ovs-vswitchd.pid'}",
                f"--unixctl={self.rundir / 'ovs-vswitchd.ctl'}",
                f"--log-file={self.rundir / 'ovs-vswitchd.log'}",
                "-vconsole:off",
                "--disable-system",
            )
            self._wait_for(self.rundir / "ovs-vswitchd.ctl")
            self.vsctl("--timeout=20", "set", "Open_vSwitch", ".", "external_ids:pazz-test=1")
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
        """Stop ovs-vswitchd and ovsdb-server (by pid), even if start() failed half-way."""
        for p in reversed(self._procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=5)
        self._procs.clear()

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
            self._bin["ovs-vsctl"],
            f"--db=unix:{self.db_sock}",
            *args,
            timeout=timeout,
            env=self.env,
        )

    def ofctl(self, *args: str, version: str | None = "OpenFlow13", timeout: float = 30) -> str:
        opts = ["-O", version] if version else []
        return run(self._bin["ovs-ofctl"], *opts, *args, timeout=timeout, env=self.env)

    def appctl(self, *args: str, target: str = "ovs-vswitchd", timeout: float = 30) -> str:
        ctl = self.rundir / f"{target}.ctl"
        return run(self._bin["ovs-appctl"], "-t", ctl, *args, timeout=timeout, env=self.env)

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
        import re

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
