"""The audit as a detector, against the real patched OVS: entries changed behind the proxy's
back with ovs-ofctl become audit faults in the fault store (through the daemon's handler),
are updated while they last, and resolve when the difference is gone."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from cpc.topology import Topology
from pazzd.checks.audit import AuditCheck
from pazzd.metrics import Metrics
from tester.store import OPEN, RESOLVED, FaultStore
from tests.pazzd.proxy.test_proxy_ovs import ROUTES, install_routes, start, target

pytestmark = pytest.mark.ovs

DPID = 7


async def until(pred, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.1)


def test_audit_faults_open_update_and_resolve(ovs, bridge, tmp_path):
    br = bridge(dpid=DPID)
    db = str(tmp_path / "faults.db")
    store = FaultStore(db)
    reader = FaultStore(db)  # another connection, as pazzctl's daemon or a worker would read
    topo = Topology()
    topo.add_switch(DPID, "s7", [1, 2])
    metrics = Metrics(lambda: {})
    check = AuditCheck()  # the daemon's audit check, on the proxy under test

    def audit_faults(state=None):
        return [r for r in reader.faults(state) if r.kind == "audit"]

    async def main():
        ctl, px = await start(ovs, {"audit_interval": 0.3, "audit_delay": 0.1})
        check.start(SimpleNamespace(topology=topo, store=store, metrics=metrics, proxy=px))
        try:
            ovs.vsctl("set-controller", br, target(px))
            c = await ctl.conn()
            install_routes(c)
            await c.barrier()
            await px.barrier(DPID)
            assert len(px.intended(DPID)) == len(ROUTES)
            rounds = len(px.findings)
            await asyncio.sleep(1.0)  # several audits of the intended table: no fault
            assert audit_faults() == [] and len(px.findings) == rounds == 0

            # 1. An entry added behind the proxy's back: one audit fault, updated each round.
            ovs.ofctl("add-flow", br, "priority=100,ip,nw_dst=10.0.99.0/24,actions=output:2")
            (row,) = await until(lambda: audit_faults(OPEN))
            assert row.location == f"dpid:{DPID}" and row.audit["finding"] == "unexpected"
            assert row.audit["switch"] == "s7"
            assert (
                row.audit["entry"] == "table=0,priority=100,ip,nw_dst=10.0.99.0/24,actions=output:2"
            )
            await until(lambda: reader.get(row.id).count >= 3)
            assert len(audit_faults()) == 1  # not a new fault per round
            assert metrics.faults_detected.labels("audit")._value.get() == 1
            # Removed again: the next audit resolves it.
            ovs.ofctl("del-flows", br, "--strict", "priority=100,ip,nw_dst=10.0.99.0/24")
            await until(lambda: reader.get(row.id).state == RESOLVED)
            assert audit_faults(OPEN) == []

            # 2. An intended entry deleted behind the proxy's back: a missing entry.
            ovs.ofctl("del-flows", br, "--strict", "priority=100,ip,nw_dst=10.0.3.0/24")
            (miss,) = await until(lambda: audit_faults(OPEN))
            assert miss.id != row.id and miss.audit["finding"] == "missing"
            assert miss.audit["entry"] is None
            intended = miss.audit["intended"]
            assert intended.startswith("table=0,priority=100,cookie=0x42,ip,nw_dst=10.0.3.0/24,")
            assert "set_verify_rule:" in intended and intended.endswith("output:1")
            # The controller puts it back (the same FlowMods again): resolved.
            install_routes(c)
            await c.barrier()
            await until(lambda: reader.get(miss.id).state == RESOLVED)
            assert audit_faults(OPEN) == [] and len(audit_faults()) == 2
        finally:
            await px.stop()
            await ctl.stop()
            reader.close()
            store.close()

    asyncio.run(main())
