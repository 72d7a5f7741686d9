"""Fixtures for the proxy tests: the patched-OVS fixtures of tests/ovs, and a bridge factory."""

from __future__ import annotations

import pytest

from tests.ovs.conftest import cleanup, ovs, ovs_factory, ovs_prefix  # noqa: F401
from tests.ovs.ovsenv import unique_name


@pytest.fixture
def bridge(ovs):  # noqa: F811
    """make(dpid, ports=(1, 2, 3)) -> name: a secure-mode OF1.3 bridge with internal ports.
    Names are unique: the userspace datapath's tap devices live in the root namespace."""

    def make(dpid: int = 1, ports=(1, 2, 3)):
        name = unique_name("b")
        ovs.add_bridge(name, dpid=dpid)
        ovs.vsctl("set", "bridge", name, "protocols=OpenFlow13")
        for p in ports:
            ovs.vsctl("add-port", name, f"{name}{p}", "--", "set", "interface", f"{name}{p}",
                      "type=internal", f"ofport_request={p}")  # fmt: skip
        return name

    return make
