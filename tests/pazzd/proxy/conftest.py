"""Fixtures for the proxy tests: the patched-OVS fixtures of tests/ovs, and a bridge factory."""

from __future__ import annotations

import shutil
import tempfile

import pytest

from tests.ovs.conftest import cleanup, ovs_prefix  # noqa: F401
from tests.ovs.ovsenv import Netns, OvsInstance, unique_name


class NetnsOvs(OvsInstance):
    """ovs-vswitchd inside a private network namespace: the userspace datapath's tap devices
    (ovs-netdev, one per bridge) then cannot collide with other OVS instances on the host.
    Switches reach the proxy over a unix socket (`set-controller BR unix:PATH`)."""

    def __init__(self, prefix, rundir, netns: Netns, **kw):
        super().__init__(prefix, rundir, **kw)
        self.netns = netns

    def _spawn(self, *cmd) -> None:
        if str(cmd[0]).endswith("ovs-vswitchd"):
            cmd = ("ip", "netns", "exec", self.netns.name, *cmd)
        super()._spawn(*cmd)


@pytest.fixture
def ovs(ovs_prefix, cleanup):  # noqa: F811
    ns = Netns(unique_name("ns"))
    cleanup.push(ns.delete)
    rundir = tempfile.mkdtemp(prefix="pazz-proxy-ovs-")
    cleanup.push(shutil.rmtree, rundir, True)
    inst = NetnsOvs(ovs_prefix, rundir, ns)
    cleanup.push(inst.stop)
    inst.start()
    return inst


@pytest.fixture
def sock_path(tmp_path):
    return str(tmp_path / "pazzd-of.sock")


@pytest.fixture
def bridge(ovs):  # noqa: F811
    """make(dpid, ports=(1, 2, 3)) -> name: a secure-mode OF1.3 bridge with internal ports.
    Names are unique: the userspace datapath's tap devices live in the root namespace."""

    def make(dpid: int = 1, ports=(1, 2, 3)):
        name = unique_name("b")
        ovs.add_bridge(name, dpid=dpid)
        ovs.vsctl("set", "bridge", name, "protocols=OpenFlow13")
        for p in ports:
            ovs.vsctl(
                "add-port",
                name,
                f"{name}{p}",
                "--",
                "set",
                "interface",
                f"{name}{p}",
                "type=internal",
                f"ofport_request={p}",
            )
        return name

    return make
