"""Rule IDs are freed when nothing uses them (a rejected ADD, a delete),
and the intended table's per-match cache stays bounded."""

from __future__ import annotations

import struct

import ofwire as of
from pazzd.proxy import Proxy, ProxyConfig
from pazzd.proxy.table import IntendedTable
from tests.pazzd.proxy.ofhelpers import flow_mod, ofp, ofpp, out
from tests.pazzd.proxy.test_robustness import connected, frames


def _match(i: int):
    return ofpp.OFPMatch(eth_type=0x800, ipv4_dst=(0x0A000000 + i, 0xFFFFFFFF))


def _barrier_reply(s, sw) -> None:
    b = [f for f in frames(bytes(sw.data)) if f[1] == of.OFPT_BARRIER_REQUEST][-1]
    s.from_switch(of.message(4, of.OFPT_BARRIER_REPLY, of.header(b)[3]))
    sw.data.clear()


def test_rule_ids_are_freed(tmp_path):
    proxy = Proxy(ProxyConfig(audit_delay=-1, audit_interval=0, db_path=str(tmp_path / "r.db")))
    try:
        s, sw, up = connected(proxy)
        n = 200
        s.from_controller(
            b"".join(flow_mod(i + 1, match=_match(i), actions=[out(1)]) for i in range(n))
        )
        assert proxy.store.id_count == n
        # The switch rejects the odd ones.
        for i in range(1, n, 2):
            err = struct.pack("!HH", 5, 0) + flow_mod(i + 1, match=_match(i))[:64]
            s.from_switch(of.message(4, of.OFPT_ERROR, i + 1, err))
        _barrier_reply(s, sw)
        assert len(proxy.tables[7].entries) == n // 2
        assert proxy.store.id_count == n // 2
        kept = {k: e.rule_id for k, e in proxy.tables[7].entries.items()}
        # The controller deletes half of the rest, and re-adds one of them in the same batch.
        dels = [
            flow_mod(1000 + i, command=ofp.OFPFC_DELETE_STRICT, match=_match(i))
            for i in range(0, n // 2, 2)
        ]
        readd = flow_mod(2000, match=_match(0), actions=[out(2)])
        s.from_controller(b"".join(dels) + readd)
        _barrier_reply(s, sw)
        left = proxy.tables[7].entries
        assert len(left) == n // 2 - len(dels) + 1
        assert proxy.store.id_count == len(left)
        for k, e in left.items():  # every intended entry still has its ID
            assert proxy.store.known_id(7, *k) == e.rule_id
            if k in kept and k != (0, 100, of.parse_flow_mod(readd).mkey):
                assert e.rule_id == kept[k]
        proxy.store.flush()
        (count,) = proxy.store.db.execute("SELECT COUNT(*) FROM ids").fetchone()
        assert count == len(left)
    finally:
        proxy.store.close()


def test_per_match_cache_is_bounded():
    t = IntendedTable()
    for i in range(20000):
        fm = of.parse_flow_mod(flow_mod(i, command=ofp.OFPFC_DELETE, match=_match(i)))
        t.select(fm, False)
    assert len(t._fields) <= 4096
