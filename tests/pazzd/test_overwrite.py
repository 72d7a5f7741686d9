"""One application's writes over another's entries (pazzd.interference overwrites), from
real OpenFlow 1.3 FlowMods through the proxy: the controller's messages (os-ken's encoder)
go to a session, the switch confirms each barrier, and the committed changes reach the
check's subscriber as the daemon's do (proxy hooks.commit).

The oracle: the table the test keeps itself of which app owns which entry, by the cookie
each app gave it, and which of them a FlowMod removes or changes."""

from __future__ import annotations

import asyncio

import ofwire as of
from cpc.interference import App, Apps, InterferenceChecker
from cpc.model import Model
from cpc.topology import Topology
from pazzd.findstore import FindingStore
from pazzd.interference import InterferenceFindings
from pazzd.proxy import Proxy, ProxyConfig
from pazzd.records import OverwriteFinding
from pazzd.services import FindingSink
from tests.pazzd.proxy.ofhelpers import flow_mod, ofp, ofpp, out
from tests.pazzd.proxy.test_robustness import connected

APPS = [App("router", 0x10, 0xFF), App("acl", 0x20, 0xFF)]


def net(i: int):
    return ofpp.OFPMatch(eth_type=0x800, ipv4_dst=(f"10.0.{i}.0", "255.255.255.0"))


def run(steps, allowed=frozenset()) -> tuple[list[OverwriteFinding], FindingStore]:
    """steps: lists of FlowMods; each list goes with a barrier, confirmed by the switch."""
    store = FindingStore(":memory:")

    async def go():
        topo = Topology()
        topo.add_switch(7, "s7", [1, 2, 3])
        model = Model(topo)
        model.build()
        proxy = Proxy(ProxyConfig(audit_interval=0), model)
        checker = InterferenceChecker(model, Apps(APPS))
        found = InterferenceFindings(FindingSink(store), topo, checker, model)
        found.allowed = set(allowed)
        proxy.hooks.commit.append(found.committed)
        s, sw, _up = connected(proxy)  # dpid 7
        xid = 100
        for mods in steps:
            for m in mods:
                xid += 1
                s.from_controller(m(xid))
            xid += 1
            s.from_controller(of.message(4, of.OFPT_BARRIER_REQUEST, xid))
            data, off = bytes(sw.data), 0
            sw.data.clear()
            while off < len(data):  # the switch answers every barrier
                _ver, t, ln, bx = of.header(data[off:])
                if t == of.OFPT_BARRIER_REQUEST:
                    s.from_switch(of.message(4, of.OFPT_BARRIER_REPLY, bx))
                off += ln

    asyncio.run(go())
    return [f for f in store.findings("interference") if isinstance(f, OverwriteFinding)], store


def add(i: int, cookie: int, port: int = 1, priority: int = 100):
    return lambda x: flow_mod(
        x, priority=priority, match=net(i), actions=[out(port)], cookie=cookie
    )


INSTALL = [add(1, 0x10), add(2, 0x10), add(3, 0x20, priority=200)]


def test_a_wildcard_delete_of_one_app_over_another_is_a_finding():
    # acl (its cookie, mask 0: every entry) deletes all: router's two entries are gone.
    wipe = lambda x: flow_mod(x, command=ofp.OFPFC_DELETE, cookie=0x20, table=ofp.OFPTT_ALL)  # noqa: E731
    found, store = run([INSTALL, [wipe]])
    (f,) = found
    assert (f.writer, f.owner, f.count) == ("acl", "router", 2)
    assert f.name == "acl,router" and f.state == "open"
    assert {e["match"] for e in f.entries} == {"ip,nw_dst=10.0.1.0/24", "ip,nw_dst=10.0.2.0/24"}
    assert {e["change"] for e in f.entries} == {"delete"}
    assert f.flowmod["command"] == "delete" and f.flowmod["cookie"] == "0x20"
    assert "acl delete" in f.summary and "removed 2 entries of router" in f.summary
    assert "acl" in f.text() and "router" in f.text()
    # The router writes its two entries again: the finding resolves.
    found, store = run([INSTALL, [wipe], [add(1, 0x10), add(2, 0x10)]])
    assert [x.state for x in found] == ["resolved"]


def test_a_strict_modify_of_another_apps_entry_is_a_finding_and_its_own_is_not():
    def mod(cookie):
        return lambda x: flow_mod(
            x, command=ofp.OFPFC_MODIFY_STRICT, match=net(1), actions=[out(2)], cookie=cookie
        )

    found, _ = run([INSTALL, [mod(0x10)]])  # the router changes its own entry
    assert found == []
    found, _ = run([INSTALL, [mod(0x20)]])
    (f,) = found
    assert (f.writer, f.owner, f.count) == ("acl", "router", 1)
    assert f.entries[0]["change"] == "modify" and f.flowmod["command"] == "modify_strict"


def test_an_allowed_pair_is_no_finding():
    wipe = lambda x: flow_mod(x, command=ofp.OFPFC_DELETE, cookie=0x20, table=ofp.OFPTT_ALL)  # noqa: E731
    found, _ = run([INSTALL, [wipe]], allowed={("acl", "router")})
    assert found == []
    found, _ = run([INSTALL, [wipe]], allowed={("router", "acl")})  # the other way round
    assert len(found) == 1


def test_an_app_deleting_only_its_own_entries_is_no_finding():
    own = lambda x: flow_mod(  # noqa: E731
        x, command=ofp.OFPFC_DELETE, cookie=0x20, cookie_mask=0xFF, table=ofp.OFPTT_ALL
    )
    found, _ = run([INSTALL, [own]])
    assert found == []
