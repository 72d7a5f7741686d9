"""A table audit confirms a new difference behind a barrier: a FlowMod in flight can make
the switch's table and the intended one differ for a moment, and that is not a finding.
A difference that is still there after the barrier is one, and one already reported is not
confirmed again."""

from __future__ import annotations

import asyncio
import struct

import pytest

import ofwire as of
from pazzd.proxy import Proxy, ProxyConfig
from tests.pazzd.proxy.test_robustness import connected, flow_stats_reply, frames
from tests.reliability.test_proxy_commit import _model


@pytest.fixture
def proxy():
    p = Proxy(ProxyConfig(audit_delay=-1, audit_interval=0), model=_model())
    yield p
    p.store.close()


def _empty(xid: int) -> bytes:
    return of.message(4, of.OFPT_MULTIPART_REPLY, xid, struct.pack("!HH4x", of.OFPMP_FLOW, 0))


async def _next_request(sw, kind: int, seen: int) -> tuple[int, int]:
    """The xid of the (seen+1)-th request of this type the proxy sent the switch."""
    for _ in range(200):
        reqs = [f for f in frames(bytes(sw.data)) if f[1] == kind]
        if len(reqs) > seen:
            return of.header(reqs[seen])[3], len(reqs)
        await asyncio.sleep(0)
    raise AssertionError(f"the proxy sent no request of type {kind}")


def _run_audit(proxy, s, sw, replies):
    """One audit; `replies` answer its flow dumps in turn (a barrier in between is
    answered too). Returns (findings, dumps asked for, barriers asked for)."""

    async def main():
        sw.data.clear()
        task = asyncio.ensure_future(proxy.audit(7))
        dumps = barriers = 0
        for i, reply in enumerate(replies):
            if i:
                xid, barriers = await _next_request(sw, of.OFPT_BARRIER_REQUEST, barriers)
                s.from_switch(of.message(4, of.OFPT_BARRIER_REPLY, xid))
            xid, dumps = await _next_request(sw, of.OFPT_MULTIPART_REQUEST, dumps)
            s.from_switch(reply(xid))
        found = await asyncio.wait_for(task, 5)
        return found, dumps, barriers

    return asyncio.run(main())


def test_a_difference_gone_after_the_barrier_is_no_finding(proxy):
    s, sw, _ = connected(proxy)
    found, dumps, barriers = _run_audit(proxy, s, sw, [flow_stats_reply, _empty])
    assert (found, dumps, barriers) == ([], 2, 1)
    assert list(proxy.findings) == []


def test_a_difference_still_there_is_reported_once(proxy):
    s, sw, _ = connected(proxy)
    found, dumps, barriers = _run_audit(proxy, s, sw, [flow_stats_reply, flow_stats_reply])
    assert [(f.kind, f.priority) for f in found] == [("unexpected", 100)]
    assert (dumps, barriers) == (2, 1) and len(proxy.findings) == 1
    # The next audit sees it again: reported already, so no second dump and no new finding.
    found, dumps, barriers = _run_audit(proxy, s, sw, [flow_stats_reply])
    assert [(f.kind, f.priority) for f in found] == [("unexpected", 100)]
    assert (dumps, barriers) == (1, 0) and len(proxy.findings) == 1
