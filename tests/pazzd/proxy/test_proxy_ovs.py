"""The proxy between a raw OpenFlow 1.3 controller and the real patched OVS."""

from __future__ import annotations

import asyncio
import random
import tempfile
from pathlib import Path

import pytest

import ofwire as of
from cpc import ofctl
from cpc.model import Model
from cpc.topology import Topology
from pazzd.proxy import Proxy, ProxyConfig
from tests.pazzd.proxy.ofhelpers import RawController, flow_mod, ofp, ofpp, out

pytestmark = pytest.mark.ovs

PREFIXES = ["10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.1.2.3/32", "10.2.0.0/16"]


def topo(*dpids) -> Topology:
    t = Topology()
    for d in dpids:
        t.add_switch(d, ports=[1, 2, 3])
    return t


def switch_entries(ovs, bridge: str, dpid: int) -> set:
    """The switch's table as model entries (set_verify_rule:ID becomes rule_id)."""
    text = ovs.ofctl("--no-names", "dump-flows", bridge)
    path = Path(tempfile.mkstemp(suffix=".txt")[1])
    path.write_text(f"## dpid={dpid}\n" + text)
    try:
        return {key(e) for e in ofctl.read_rules(path)}
    finally:
        path.unlink()


def key(e) -> tuple:
    return (e.table, e.priority, str(e.match), str(e.instructions), e.cookie, e.rule_id)


def model_entries(model, dpid) -> set:
    return {key(e) for e in model.entries(dpid)}


def random_match(rng):
    kw = {}
    if rng.random() < 0.3:
        kw["in_port"] = rng.randint(1, 3)
    if rng.random() < 0.85:
        kw["eth_type"] = 0x800
        net, plen = rng.choice(PREFIXES).split("/")
        mask = ".".join(
            str((0xFFFFFFFF << (32 - int(plen)) >> (24 - 8 * i)) & 0xFF) for i in range(4)
        )
        kw["ipv4_dst"] = (net, mask) if plen != "32" else net
        if rng.random() < 0.3:
            kw["ip_proto"] = 6
            if rng.random() < 0.5:
                kw["tcp_dst"] = rng.choice([80, 443])
    return ofpp.OFPMatch(**kw)


def random_flow_mod(rng, xid):
    """A random FlowMod; about one in six is one the switch rejects."""
    cmd = rng.choices(
        [
            ofp.OFPFC_ADD,
            ofp.OFPFC_MODIFY,
            ofp.OFPFC_MODIFY_STRICT,
            ofp.OFPFC_DELETE,
            ofp.OFPFC_DELETE_STRICT,
        ],
        [6, 1, 1, 1, 1],
    )[0]
    table = rng.choice([0, 0, 1, 2])
    bad = rng.random() < 0.17
    acts = [out(rng.randint(1, 3))]
    ins = [ofpp.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, acts)]
    r = rng.random()
    if r < 0.2 and table < 2:
        ins = [ofpp.OFPInstructionGotoTable(table + 1)]
    elif r < 0.3:
        ins.append(ofpp.OFPInstructionActions(ofp.OFPIT_WRITE_ACTIONS, [out(rng.randint(1, 3))]))
    elif r < 0.35:
        ins = []
    if bad and cmd in (ofp.OFPFC_ADD, ofp.OFPFC_MODIFY_STRICT, ofp.OFPFC_MODIFY):
        kind = rng.randint(0, 2)
        if kind == 0 and cmd == ofp.OFPFC_ADD:
            table = 255  # bad table id
        elif kind == 1:
            ins = [ofpp.OFPInstructionGotoTable(0 if table else 200)]  # goto an earlier table
            table = table or 0
            if table == 0:
                ins = [ofpp.OFPInstructionGotoTable(0)]
        else:
            ins = [
                ofpp.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [out(ofp.OFPP_ANY)])
            ]  # output:ANY is invalid
    kw = {}
    if cmd in (ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT) and rng.random() < 0.3:
        kw["out_port"] = rng.randint(1, 3)
    if cmd != ofp.OFPFC_ADD and rng.random() < 0.3:
        kw["cookie"], kw["cookie_mask"] = rng.randint(0, 2), 0xFF
    return flow_mod(
        xid,
        command=cmd,
        table=table,
        priority=rng.choice([10, 20, 30]),
        match=random_match(rng),
        instructions=ins,
        cookie=kw.pop("cookie", rng.randint(0, 2)),
        **kw,
    )


_N = iter(range(1_000_000))


def unix_path(ovs) -> str:
    """A unix socket for the proxy in the OVS run directory (the only place ovs-vswitchd
    connects to; the switch runs in its own network namespace)."""
    return str(ovs.rundir / f"pazzd{next(_N)}.sock")


def target(px) -> str:
    return f"unix:{px.config.listen_unix}"


async def start(ovs, config_kw=None, model=None, findings=None):
    ctl = RawController()
    cport = await ctl.start()
    kw = {
        "audit_interval": 0,
        "audit_delay": -1,
        "listen_unix": unix_path(ovs),
        **(config_kw or {}),
    }
    cfg = ProxyConfig(listen_host="127.0.0.1", listen_port=0, controller_port=cport, **kw)
    px = Proxy(cfg, model=model, on_finding=findings.append if findings is not None else None)
    await px.start()
    return ctl, px


def test_model_in_step_with_random_flowmods(ovs, bridge):
    br = bridge(dpid=1)
    model = Model(topo(1))
    model.build()

    async def main():
        ctl, px = await start(ovs, model=model)
        try:
            ovs.vsctl("set-controller", br, target(px))
            c = await ctl.conn()
            assert c.dpid == 1
            rng = random.Random(7)
            sent = []
            for _ in range(12):
                batch = [random_flow_mod(rng, c.next_xid()) for _ in range(25)]
                sent += batch
                c.send(*batch)
                await c.barrier()
                await px.barrier(1)
                assert model_entries(model, 1) == switch_entries(ovs, br, 1)
            errors = c.errors()
            assert len(errors) >= 10, "the random FlowMods include rejected ones"
            # The error echoes the controller's own FlowMod bytes (no ID action inside).
            by_xid = {of.header(m)[3]: m for m in sent}
            for e in errors:
                orig = by_xid[of.header(e)[3]]
                data = e[12:]
                assert data == orig[: len(data)]
            # The switch holds every entry with its ID; the controller never sees one.
            dump = ovs.dump_flows(br)
            assert dump.count("set_verify_rule:") == len(model.entries(1)) > 20
            stats = await c.flow_stats()
            assert len(stats) == len(model.entries(1))
            intended = {(e.table, e.priority, e.mkey): e for e in px.intended(1)}
            raw = b"".join(r[16:] for r in await c.request(of.flow_stats_request(c.next_xid())))
            entries, _ = of.parse_flow_stats_body(raw, strip=False)
            for st in entries:
                assert st.rule_id is None
                assert of.strip_rule_id(st.instr)[1] is None
                e = intended[(st.table, st.priority, st.mkey)]
                assert st.instr == e.instr  # the controller's own instruction bytes
            ids = [e.rule_id for e in px.intended(1)]
            assert len(set(ids)) == len(ids) and 0 not in ids
            assert await px.audit(1) == []
        finally:
            await px.stop()
            await ctl.stop()

    asyncio.run(main())


ROUTES = [(f"10.0.{i}.0", i % 3 + 1) for i in range(20)]


def install_routes(c):
    msgs = [
        flow_mod(
            c.next_xid(),
            priority=100,
            cookie=0x42,
            match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst=(net, "255.255.255.0")),
            actions=[out(port)],
        )
        for net, port in ROUTES
    ]
    c.send(*msgs)


def test_restarts_keep_the_model_and_audit_finds_cli_rules(ovs, bridge, tmp_path):
    br = bridge(dpid=5)
    db = str(tmp_path / "pazzd.db")
    findings: list = []

    async def main():
        model = Model(topo(5))
        model.build()
        ctl, px = await start(ovs, {"db_path": db, "audit_interval": 0.5}, model, findings)
        try:
            ovs.vsctl("set-controller", br, target(px))
            c = await ctl.conn()
            install_routes(c)
            await c.barrier()
            await px.barrier(5)
            want = switch_entries(ovs, br, 5)
            assert model_entries(model, 5) == want and len(want) == len(ROUTES)
            ids = {e.key: e.rule_id for e in px.intended(5)}

            # 1. The controller restarts: the switch connection stays, the proxy answers
            # the switch's echoes meanwhile, a new controller session is opened.
            port = ctl.server.sockets[0].getsockname()[1]
            await ctl.stop()
            await asyncio.sleep(1.0)
            assert 5 in px.switches
            ctl = RawController()
            await ctl.start(port)
            c = await ctl.conn()
            install_routes(c)  # re-sent FlowMods are applied idempotently
            await c.barrier()
            await px.barrier(5)
            assert model_entries(model, 5) == want == switch_entries(ovs, br, 5)

            # 2. The switch reconnects (flows stay on the switch): the model is kept.
            # (No del-controller: a bridge left without controllers flushes its flows.)
            ovs.vsctl("set-controller", br, "tcp:127.0.0.1:1")
            await asyncio.sleep(0.5)
            assert 5 not in px.switches
            ovs.vsctl("set-controller", br, target(px))
            c = await ctl.conn()
            assert model_entries(model, 5) == want
            await asyncio.sleep(1.2)
        finally:
            await px.stop()
        # 3. pazzd restarts: the model comes back from SQLite without asking anyone.
        model2 = Model(topo(5))
        ctl2 = ctl
        px2 = Proxy(
            ProxyConfig(
                listen_host="127.0.0.1",
                listen_port=0,
                controller_port=ctl.server.sockets[0].getsockname()[1],
                db_path=db,
                audit_interval=0.5,
                audit_delay=0.2,
                listen_unix=unix_path(ovs),
            ),
            model=model2,
            on_finding=findings.append,
        )
        try:
            assert model_entries(model2, 5) == want
            assert {e.key: e.rule_id for e in px2.intended(5)} == ids
            await px2.start()
            ovs.vsctl("set-controller", br, target(px2))
            await ctl2.conn()
            await asyncio.sleep(1.5)
            assert findings == [], [str(f) for f in findings]
            # A rule added from the command line is reported within one audit period.
            ovs.ofctl("add-flow", br, "priority=100,ip,nw_dst=10.0.99.0/24,actions=output:2")
            await asyncio.sleep(0.5 + 0.4)
            assert [f.kind for f in findings] == ["unexpected"]
            assert "10.0.99.0/24" in findings[0].text
            # A changed entry is reported too.
            ovs.ofctl(
                "mod-flows", br, "--strict", "priority=100,ip,nw_dst=10.0.3.0/24,actions=output:3"
            )
            await asyncio.sleep(0.9)
            assert [f.kind for f in findings] == ["unexpected", "changed"]
        finally:
            await px2.stop()
            await ctl2.stop()

    asyncio.run(main())
