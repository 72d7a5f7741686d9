"""A FLOW_REMOVED only ends intent for a timeout the entry was installed with, or a
delete the controller sent; an entry deleted behind the controller's back stays intended
and the next audit reports it missing; a timeout claimed for an entry without that
timeout (or with another cookie) is counted and ignored."""

from __future__ import annotations

import asyncio
import struct

import pytest

import ofwire as of
from pazzd.proxy import Proxy, ProxyConfig
from tests.pazzd.proxy.ofhelpers import flow_mod, ofp, ofpp, out
from tests.pazzd.proxy.test_robustness import connected, frames
from tests.reliability.test_proxy_commit import _model

MATCH = ofpp.OFPMatch(eth_type=0x800, ipv4_dst="10.0.0.7")


@pytest.fixture
def proxy():
    p = Proxy(ProxyConfig(audit_delay=-1, audit_interval=0), model=_model())
    yield p
    p.store.close()


def _flow_removed(fm_bytes: bytes, reason: int) -> bytes:
    fm = of.parse_flow_mod(fm_bytes)
    match = fm_bytes[48 : fm.match_end]
    body = struct.pack("!QHBBIIHHQQ", fm.cookie, fm.priority, reason, fm.table, 1, 0, 0, 0, 0, 0)
    return of.message(4, of.OFPT_FLOW_REMOVED, 0, body + match)


def _commit(s, sw) -> None:
    barrier = [f for f in frames(bytes(sw.data)) if f[1] == of.OFPT_BARRIER_REQUEST][-1]
    s.from_switch(of.message(4, of.OFPT_BARRIER_REPLY, of.header(barrier)[3]))
    sw.data.clear()


def _add(s, sw, xid: int, idle: int = 0, hard: int = 0) -> bytes:
    fm = flow_mod(
        xid,
        match=MATCH,
        actions=[out(1)],
        cookie=5,
        flags=ofp.OFPFF_SEND_FLOW_REM,
        idle=idle,
        hard=hard,
    )
    s.from_controller(fm)
    _commit(s, sw)
    return fm


def _audit(proxy, s, sw):
    async def main():
        task = asyncio.ensure_future(proxy.audit(7))
        await asyncio.sleep(0)
        req = [f for f in frames(bytes(sw.data)) if f[1] == of.OFPT_MULTIPART_REQUEST][-1]
        empty = struct.pack("!HH4x", of.OFPMP_FLOW, 0)
        s.from_switch(of.message(4, of.OFPT_MULTIPART_REPLY, of.header(req)[3], empty))
        return await asyncio.wait_for(task, 5)

    return asyncio.run(main())


def test_delete_behind_the_controllers_back_stays_intended(proxy):
    s, sw, up = connected(proxy)
    fm = _add(s, sw, 1)
    assert len(proxy.tables[7].entries) == 1 and len(proxy.model.entries(7)) == 1
    s.from_switch(_flow_removed(fm, of.OFPRR_DELETE))
    assert len(proxy.tables[7].entries) == 1  # still intended
    assert len(proxy.model.entries(7)) == 1
    assert proxy.unexplained_removals == 1
    # The controller still hears of it (relayed as it came).
    assert [f for f in frames(bytes(up.data)) if f[1] == of.OFPT_FLOW_REMOVED]
    # The first audit after it reports it missing (not only the second).
    found = _audit(proxy, s, sw)
    assert [(f.kind, f.priority) for f in found] == [("missing", 100)]


def test_timeouts_and_the_controllers_deletes_end_intent(proxy):
    s, sw, up = connected(proxy)
    fm = _add(s, sw, 1, idle=30)
    s.from_switch(_flow_removed(fm, of.OFPRR_IDLE_TIMEOUT))
    assert not proxy.tables[7].entries and not proxy.model.entries(7)
    fm = _add(s, sw, 4, hard=600)
    s.from_switch(_flow_removed(fm, of.OFPRR_HARD_TIMEOUT))
    assert not proxy.tables[7].entries and not proxy.model.entries(7)
    assert proxy.ignored_removals == 0
    fm = _add(s, sw, 2)
    # The controller deletes it: the FLOW_REMOVED comes before the barrier reply.
    s.from_controller(
        flow_mod(3, command=ofp.OFPFC_DELETE_STRICT, match=MATCH, out_port=ofp.OFPP_ANY)
    )
    s.from_switch(_flow_removed(fm, of.OFPRR_DELETE))
    assert proxy.unexplained_removals == 0
    _commit(s, sw)
    assert not proxy.tables[7].entries and not proxy.model.entries(7)


def test_a_timeout_the_entry_never_had_is_ignored(proxy):
    """Ten FLOW_REMOVEDs claiming timeouts for an entry installed without any (the forged
    removals that emptied the model), then, for the entry with an idle timeout, a hard
    timeout and an idle one with another cookie: the rule count is unchanged, each is
    counted, and the controller still hears them (relayed as they came)."""
    s, sw, up = connected(proxy)
    fm = _add(s, sw, 1)
    for i in range(10):
        s.from_switch(_flow_removed(fm, (of.OFPRR_IDLE_TIMEOUT, of.OFPRR_HARD_TIMEOUT)[i % 2]))
    assert len(proxy.tables[7].entries) == 1 and len(proxy.model.entries(7)) == 1
    assert proxy.ignored_removals == 10
    idle = _add(s, sw, 2, idle=30)  # the same match and priority: replaced, with a timeout
    s.from_switch(_flow_removed(idle, of.OFPRR_HARD_TIMEOUT))  # it has no hard timeout
    forged = bytearray(_flow_removed(idle, of.OFPRR_IDLE_TIMEOUT))
    forged[8:16] = (99).to_bytes(8, "big")  # another cookie than the entry's 5
    s.from_switch(bytes(forged))
    assert len(proxy.model.entries(7)) == 1 and proxy.ignored_removals == 12
    relayed = [f for f in frames(bytes(up.data)) if f[1] == of.OFPT_FLOW_REMOVED]
    assert len(relayed) == 12
    s.from_switch(_flow_removed(idle, of.OFPRR_IDLE_TIMEOUT))  # the real one
    assert not proxy.model.entries(7) and proxy.ignored_removals == 12
