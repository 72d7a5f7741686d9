"""The lab's network as a Mininet network (pazzlab.lab builds it with these pieces).

Mininet makes the hosts (each a shell in its own network namespace, `mnexec`), the veth
links and the switch objects; the switches are patched OVS bridges of the lab's private
ovs-vswitchd (`pazzlab.ovs.OvsInstance`, userspace datapath), never the system's OVS:

- `OvsBridge`, an OVSSwitch whose every ovs-vsctl and ovs-ofctl call goes to the private
  instance's database and tools. All bridges and their ports are created in one ovs-vsctl
  transaction (Mininet's batch start-up): `datapath_type=netdev`, `fail_mode=secure`, the
  given dpid, `other_config:verify-tagging=true`, each port on its OpenFlow number
  (`ofport_request`), `mtu_request` on links and `other_config:verify-edge=true` plus
  `other_config:verify-probe=trust` (the fuzzer injects there; docs/verify-header.md "The
  probe mark") on host ports.
- `LabIntf`, a Mininet interface with an MTU and no IPv6 (no router solicitations or DAD on
  test links), configured before the interface comes up.
- `LabNet`, a Mininet network without controller that leaves host-wide settings alone:
  `Mininet.init()` would raise sysctls (socket buffers, ARP cache, ptys) and rewrite
  tcp_rmem/tcp_wmem for every process on the machine.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil

from mininet.link import Intf, Link
from mininet.net import Mininet
from mininet.node import Host, OVSSwitch
from mininet.topo import Topo

__all__ = ["LabIntf", "LabNet", "OvsBridge", "Topo"]

OFFLOADS = "tx off rx off tso off gso off gro off"


class LabIntf(Intf):
    """A veth end with an optional MTU, IPv6 off, and checksum offloads off (ethtool, when
    installed) so that captures and checksums stay exact."""

    def config(self, mtu=None, **params):
        self.cmd("sysctl", "-qw", f"net.ipv6.conf.{self.name}.disable_ipv6=1")
        if shutil.which("ethtool"):
            self.cmd("ethtool", "-K", self.name, OFFLOADS)
        if mtu:
            self.cmd("ip", "link", "set", self.name, "mtu", str(mtu))
        return super().config(**params)


class OvsBridge(OVSSwitch):
    """An OVSSwitch on a private OvsInstance (`ovs=`), userspace datapath, Verify tagging on.
    `ovs` is a pazzlab.ovs.OvsInstance; the bridge is named after the switch."""

    def __init__(self, name, *, ovs, **params):
        self.ovs = ovs
        params.setdefault("failMode", "secure")
        params.setdefault("protocols", "OpenFlow10,OpenFlow13")
        super().__init__(name, datapath="user", **params)

    @classmethod
    def setup(cls):
        """Nothing to probe: OVSSwitch.setup() asks the system ovsdb-server (ovs-vsctl from
        PATH) and exits the process when there is none."""

    # Every Mininet call that would run ovs-vsctl or ovs-ofctl from PATH on the system
    # database goes to the private instance instead.
    def vsctl(self, *args, **kwargs):
        return self.ovs.vsctl(*shlex.split(" ".join(str(a) for a in args)))

    def dpctl(self, *args):
        return self.ovs.ofctl(str(args[0]), self.name, *map(str, args[1:]))

    def connected(self):
        v = self.ovs.vsctl("--if-exists", "get", "controller", self.name, "is_connected")
        return v.strip() == "true"

    def bridge_args(self) -> list[str]:
        """ovs-vsctl arguments that create this bridge with its data ports."""
        br = self.name
        args = [
            "--",
            "add-br",
            br,
            "--",
            "set",
            "bridge",
            br,
            "datapath_type=netdev",
            f"fail_mode={self.failMode}",
            f"protocols={self.protocols}",
            f"other_config:datapath-id={self.dpid}",
            "other_config:verify-tagging=true",
            "other_config:disable-in-band=true",
            f"other_config:dp-desc={br}",
        ]
        for intf in self.intfList():
            port = self.ports[intf]
            if not port or intf.name == "lo":
                continue
            sets = [f"ofport_request={port}"]
            if intf.params.get("mtu"):
                sets.append(f"mtu_request={intf.params['mtu']}")
            link = intf.link
            peer = link and (link.intf2 if link.intf1 is intf else link.intf1)
            if peer is not None and isinstance(peer.node, Host):
                # A host port is also where the fuzzer injects (netns:...:eth0): the
                # probes' mark is kept, the host's own traffic stays unmarked.
                sets += ["other_config:verify-edge=true", "other_config:verify-probe=trust"]
            args += ["--", "add-port", br, intf.name, "--", "set", "interface", intf.name, *sets]
        return args

    def start(self, controllers):
        """Queue the bridge for batchStartup (Mininet's default), or create it now. Mininet's
        controllers are not used: the lab points the bridges at pazzd's proxy later."""
        if self.batch:
            self.commands.append(self.bridge_args())
        else:
            self.ovs.vsctl(*self.bridge_args(), timeout=60)

    @classmethod
    def batchStartup(cls, switches, run=None):
        """All bridges and ports in one transaction; ovs-vsctl returns once ovs-vswitchd has
        applied it (raises on error, unlike Mininet's own start-up)."""
        args = [a for sw in switches for cmd in sw.commands for a in cmd]
        for sw in switches:
            sw.commands, sw.batch = [], False
        if args:
            switches[0].ovs.vsctl(*args, timeout=120)
        return switches

    def stop(self, deleteIntfs=True):
        with contextlib.suppress(Exception):
            self.ovs.vsctl("--if-exists", "del-br", self.name, timeout=20)
        super(OVSSwitch, self).stop(deleteIntfs)

    @classmethod
    def batchShutdown(cls, switches, run=None):
        """Delete the bridges in one transaction (the netdev datapath removes their tap
        devices), then end each switch's shell."""
        if switches:
            args = [a for sw in switches for a in ("--", "--if-exists", "del-br", sw.name)]
            with contextlib.suppress(Exception):
                switches[0].ovs.vsctl(*args, timeout=30)
        for sw in switches:
            sw.terminate()
        return switches


class LabNet(Mininet):
    """Mininet without a controller, its interfaces `LabIntf`, and no host-wide tuning."""

    def __init__(self, topo: Topo, **kw):
        kw.setdefault("controller", None)
        kw.setdefault("intf", LabIntf)
        kw.setdefault("link", Link)
        kw.setdefault("host", Host)
        kw.setdefault("build", False)
        inited, Mininet.inited = Mininet.inited, True  # skips fixLimits(), see above
        try:
            super().__init__(topo=topo, **kw)
        finally:
            Mininet.inited = inited
