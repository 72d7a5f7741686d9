"""Fixtures for tests that need the patched Open vSwitch (see tests/ovs/ovsenv.py).

Set PAZZ_OVS_PREFIX to the prefix printed by ovs-patches/build.sh (`make test` does).
Fixtures:
  ovs_prefix  session: the patched OVS prefix (skips when unset, not root, or missing)
  cleanup     function: an ovsenv.Cleanup stack run at teardown, even on failure
  ovs         function: a started private OvsInstance (stopped at teardown)
  ovs_factory function: make_ovs(prefix=None, name="ovs") -> started OvsInstance
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.ovs.ovsenv import Cleanup, OvsInstance


@pytest.fixture(scope="session")
def ovs_prefix() -> Path:
    prefix = os.environ.get("PAZZ_OVS_PREFIX")
    if not prefix:
        pytest.skip("PAZZ_OVS_PREFIX is not set (run `make ovs` or ovs-patches/build.sh)")
    if os.geteuid() != 0:
        pytest.skip("patched-OVS tests need root (network namespaces, veth)")
    p = Path(prefix)
    if not (p / "sbin/ovs-vswitchd").exists():
        pytest.skip(f"no ovs-vswitchd under PAZZ_OVS_PREFIX={prefix}")
    return p


@pytest.fixture
def cleanup():
    c = Cleanup()
    yield c
    c.run()


@pytest.fixture
def ovs_factory(ovs_prefix, cleanup):
    def make(prefix: Path | str | None = None, name: str = "ovs") -> OvsInstance:
        rundir = tempfile.mkdtemp(prefix=f"pazz-{name}-")
        cleanup.push(shutil.rmtree, rundir, True)
        inst = OvsInstance(prefix or ovs_prefix, rundir, name=name)
        cleanup.push(inst.stop)
        inst.start()
        return inst

    return make


@pytest.fixture
def ovs(ovs_factory) -> OvsInstance:
    return ovs_factory()
