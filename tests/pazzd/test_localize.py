"""Localization (pazzd/localize.py): which entry a finding names, with every header the
fault recorded, and benign controller changes made after the fault opened set aside."""

from __future__ import annotations

import asyncio
import json
import sqlite3

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpc.fields import format_header, parse_header
from cpc.ofctl import format_flow, format_group, parse_flow, parse_group
from pazzd import cli
from pazzd.answers import fault_json
from pazzd.localize import ChangeLog, Localizer
from tester import store as store_mod
from tester.store import HEADERS_MAX, FaultStore

ROUTE8 = "table=0,priority=8,ip,nw_dst=10.0.0.0/8,actions=output:1"
ROUTE24 = "table=0,priority=24,ip,nw_dst=10.0.1.0/24,actions=output:2"
HIDDEN = "table=0,priority=100,cookie=0xbad,ip,nw_dst=10.0.1.0/28,actions=output:3"
BENIGN = "table=0,priority=200,ip,nw_dst=10.0.1.8/29,actions=output:2"


def flow(text: str, dpid: int = 1):
    return parse_flow(text, dpid).entry()


def hdr(text: str) -> dict:
    h = parse_header(text)
    return {**h, "text": format_header(h)}


class _Stat:
    def __init__(self, e) -> None:
        self.e = e

    def entry(self, dpid: int):
        return self.e


class FakeProxy:
    """The switches' actual tables, served as the proxy's dump_flows would."""

    def __init__(self, tables: dict[int, list]) -> None:
        self.tables = tables
        self.switches = dict.fromkeys(tables)

    async def dump_flows(self, dpid: int):
        return [_Stat(e) for e in self.tables[dpid]]


def localizer(intended: dict[int, list], actual: dict[int, list], changes=None) -> Localizer:
    return Localizer(
        lambda d: intended.get(d, []),
        {},
        proxy=FakeProxy(actual),
        names={d: f"s{d}" for d in actual},
        changes=changes,
    )


def fault(headers: list[dict], candidates=(1,), kind="type_p_match", now=100.0, store=None):
    """A stored fault that saw these headers (the last is the latest)."""
    store = store or FaultStore(":memory:")
    for i, h in enumerate(headers):
        fid, _ = store.record(
            kind,
            "dpid:1",
            "c1",
            now + i,
            b"",
            h,
            (1, 5),
            [],
            None,
            {"candidates": list(candidates), "culprit": None},
        )
    return store.get(fid)


def localize(loc: Localizer, row) -> dict:
    return asyncio.run(loc.localize(row))


# --------------------------------------------------------------------------- the findings


def test_blackhole_under_covering_route_names_missing_entry() -> None:
    intended = {1: [flow(ROUTE8), flow(ROUTE24)]}
    actual = {1: [flow(ROUTE8)]}  # the /24 was deleted; the /8 still matches the header
    ans = localize(localizer(intended, actual), fault([hdr("ipv4_dst=10.0.1.5")], kind="blackhole"))
    assert ans["finding"] == "missing" and ans["switch"] == "s1"
    assert ans["cause"] == format_flow(flow(ROUTE24))
    assert ans["intended"] == format_flow(flow(ROUTE24))
    assert ans["entry"] == format_flow(flow(ROUTE8))  # what the switch applies instead


def test_blackhole_to_table_miss() -> None:
    ans = localize(
        localizer({1: [flow(ROUTE24)]}, {1: []}),
        fault([hdr("ipv4_dst=10.0.1.5")], kind="blackhole"),
    )
    assert ans["finding"] == "missing" and ans["entry"] is None
    assert ans["cause"] == format_flow(flow(ROUTE24))


def test_hidden_entry_is_unexpected() -> None:
    intended = {1: [flow(ROUTE8), flow(ROUTE24)]}
    actual = {1: [flow(ROUTE8), flow(ROUTE24), flow(HIDDEN)]}
    ans = localize(localizer(intended, actual), fault([hdr("ipv4_dst=10.0.1.5")]))
    assert ans["finding"] == "unexpected" and ans["cause"] == format_flow(flow(HIDDEN))


def test_hidden_entry_replacing_a_deleted_one_is_unexpected() -> None:
    # The switch's winner was never intended: the hidden entry, not the gone /24, is named.
    intended = {1: [flow(ROUTE8), flow(ROUTE24)]}
    actual = {1: [flow(ROUTE8), flow(HIDDEN)]}
    ans = localize(localizer(intended, actual), fault([hdr("ipv4_dst=10.0.1.5")]))
    assert ans["finding"] == "unexpected" and ans["cause"] == format_flow(flow(HIDDEN))


def test_changed_action_in_a_later_table() -> None:
    t0 = "table=0,priority=10,ip,actions=goto_table:1"
    t1 = "table=1,priority=24,ip,nw_dst=10.0.1.0/24,actions=output:2"
    t1_bad = t1.replace("output:2", "output:4")
    intended = {1: [flow(t0), flow(t1)]}
    actual = {1: [flow(t0), flow(t1_bad)]}
    ans = localize(localizer(intended, actual), fault([hdr("ipv4_dst=10.0.1.5")]))
    assert ans["finding"] == "changed"
    assert ans["cause"] == ans["entry"] == format_flow(flow(t1_bad))
    assert ans["intended"] == format_flow(flow(t1))


def test_equal_tables_no_finding() -> None:
    tables = {1: [flow(ROUTE8), flow(ROUTE24)]}
    ans = localize(localizer(tables, {1: list(tables[1])}), fault([hdr("ipv4_dst=10.0.1.5")]))
    assert ans["findings"] == [] and "finding" not in ans


# --------------------------------------------------------------------------- the headers


def test_earlier_header_when_the_latest_was_covered_by_a_benign_update() -> None:
    # The hidden /28 caught 10.0.1.1 and 10.0.1.9. Then the controller added a /29 over
    # 10.0.1.9 (on the switch and in the model alike): the latest header shows nothing.
    intended = {1: [flow(ROUTE8), flow(ROUTE24), flow(BENIGN)]}
    actual = {1: [flow(ROUTE8), flow(ROUTE24), flow(BENIGN), flow(HIDDEN)]}
    row = fault([hdr("ipv4_dst=10.0.1.1"), hdr("ipv4_dst=10.0.1.9")])
    assert row.header["ipv4_dst"] == parse_header("ipv4_dst=10.0.1.9")["ipv4_dst"]
    ans = localize(localizer(intended, actual), row)
    assert ans["finding"] == "unexpected" and ans["cause"] == format_flow(flow(HIDDEN))
    assert ans["header"] == format_header(parse_header("ipv4_dst=10.0.1.1"))
    assert ans["headers_tried"] == 2


def test_benign_change_after_the_fault_opened_is_ignored() -> None:
    # s1: the controller added the /29 after the fault opened; the dump was read before
    # the switch had it. s2: the fault, a deleted /24.
    intended = {1: [flow(ROUTE24), flow(BENIGN)], 2: [flow(ROUTE8, 2), flow(ROUTE24, 2)]}
    actual = {1: [flow(ROUTE24)], 2: [flow(ROUTE8, 2)]}
    row = fault([hdr("ipv4_dst=10.0.1.9")], candidates=(1, 2), now=100.0)
    log = ChangeLog()
    b = flow(BENIGN)
    log.note(1, b.table, b.priority, b.match, when=150.0)
    ans = localize(localizer(intended, actual, log), row)
    assert ans["switch"] == "s2" and ans["finding"] == "missing"
    assert ans["cause"] == format_flow(flow(ROUTE24, 2))
    assert [(f["switch"], f["finding"]) for f in ans["ignored"]] == [("s1", "missing")]
    # Changed before the fault opened: a real difference, the first switch's.
    log2 = ChangeLog()
    log2.note(1, b.table, b.priority, b.match, when=50.0)
    ans = localize(localizer(intended, actual, log2), row)
    assert ans["switch"] == "s1" and ans["cause"] == format_flow(b) and ans["ignored"] == []


def test_changelog_is_bounded() -> None:
    log = ChangeLog(maxlen=3)
    es = [flow(f"table=0,priority={p},ip,actions=output:1") for p in range(1, 6)]
    for i, e in enumerate(es):
        log.note(1, e.table, e.priority, e.match, when=float(i))
    assert len(log) == 3
    assert not log.changed_since(1, es[0], 0.0) and log.changed_since(1, es[4], 4.0)
    assert not log.changed_since(1, es[4], 4.5) and not log.changed_since(2, es[4], 0.0)


# --------------------------------------------------------------------------- the store


def test_store_keeps_a_few_distinct_headers() -> None:
    hs = [hdr(f"ipv4_dst=10.0.1.{i}") for i in range(20)]
    row = fault(hs[:3] + [hs[1]])
    assert row.headers == hs[:3] and row.header == hs[1] and row.count == 4
    row = fault(hs)
    assert len(row.headers) == HEADERS_MAX
    assert row.headers[0] == hs[0] and row.headers[1:] == hs[20 - HEADERS_MAX + 1 :]


def test_store_migrates_an_old_database(tmp_path) -> None:
    p = str(tmp_path / "old.db")
    db = sqlite3.connect(p, isolation_level=None)
    for sql in store_mod._MIGRATIONS[:3]:  # a database from before the headers column
        db.executescript(sql)
    db.execute("PRAGMA user_version=3")
    h = hdr("ipv4_dst=10.0.1.1")
    db.execute(
        "INSERT INTO faults (kind, location, header_class, first_seen, last_seen, count, evidence,"
        " header, egress, expected, actual, localization, state) VALUES"
        " ('type_p_match','dpid:1','c1',1,1,1,'',?,'null','[]','{}','{}','open')",
        (json.dumps(h),),
    )
    db.close()
    s = FaultStore(p)
    assert s.schema_version == len(store_mod._MIGRATIONS)
    (old,) = s.faults()
    assert old.headers is None
    # Localization of an old row uses its one header.
    intended = {1: [flow(ROUTE24)]}
    ans = localize(localizer(intended, {1: [flow(ROUTE24), flow(HIDDEN)]}), old)
    assert ans["finding"] == "unexpected"
    h2 = hdr("ipv4_dst=10.0.1.2")
    s.record("type_p_match", "dpid:1", "c1", 2.0, b"", h2, (1, 5), [], None, {})
    assert s.get(old.id).headers == [h2]


# --------------------------------------------------------------------------- pazzctl


def test_faults_show_blackhole_header(monkeypatch, capsys) -> None:
    s = FaultStore(":memory:")
    flow_hdr = {"ipv4_dst": parse_header("ipv4_dst=10.0.1.5")["ipv4_dst"]}  # no "text"
    fid, _ = s.record(
        "blackhole",
        "flow:1:5->2:5",
        "flow:f",
        1.0,
        b"",
        flow_hdr,
        (2, 5),
        [],
        None,
        {"candidates": [1]},
    )
    nohdr, _ = s.record(
        "blackhole", "flow:1:5->3:5", "flow:g", 1.0, b"", {}, (3, 5), [], None, {"candidates": []}
    )
    rows = {fid: fault_json(s.get(fid)), nohdr: fault_json(s.get(nohdr))}
    assert rows[fid]["header"] == "ipv4_dst=10.0.1.5" and rows[nohdr]["header"] is None
    monkeypatch.setattr(
        cli, "_call", lambda args, cmd, **kw: {} if cmd == "topology" else rows[int(kw["id"])]
    )
    # pazzctl writes the header as an ovs-ofctl match (an IPv4 field implies `ip`).
    for i, want in ((fid, "ip,nw_dst=10.0.1.5"), (nohdr, "(none)")):
        assert cli.main(["faults", "show", str(i)]) == 0
        out = capsys.readouterr().out
        (line,) = [ln for ln in out.splitlines() if ln.startswith("header")]
        assert line.split(None, 1)[1] == want and "None" not in line


# --------------------------------------------------------------------------- oracle


def _winner(entries, dst: int):
    """The oracle: the highest-priority /N route containing dst (priorities are distinct)."""
    best = None
    for e in entries:
        v, m = e.match.get("ipv4_dst") or (0, 0)
        if dst & m == v and (best is None or e.priority > best.priority):
            best = e
    return best


@st.composite
def scenarios(draw):
    """An intended single-table routing table (distinct priorities), one mutation."""
    n = draw(st.integers(1, 8))
    prios = draw(st.lists(st.integers(1, 1000), min_size=n + 1, max_size=n + 1, unique=True))
    routes = []
    for p in prios[:n]:
        plen = draw(st.sampled_from([8, 16, 24, 28, 32]))
        base = draw(st.sampled_from([0x0A000000, 0x0A000100, 0x0A000110, 0x0A010000]))
        mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
        ip = ".".join(str((base & mask) >> s & 255) for s in (24, 16, 8, 0))
        out = draw(st.integers(1, 4))
        routes.append(f"table=0,priority={p},ip,nw_dst={ip}/{plen},actions=output:{out}")
    kind = draw(st.sampled_from(["delete", "insert", "change"]))
    i = draw(st.integers(0, n - 1))
    actual = list(routes)
    if kind == "delete":
        mutated = actual.pop(i)
    elif kind == "insert":
        plen = draw(st.sampled_from([16, 24, 28, 32]))
        mask = (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF
        base = draw(st.sampled_from([0x0A000000, 0x0A000105, 0x0A000110])) & mask
        ip = ".".join(str(base >> s & 255) for s in (24, 16, 8, 0))
        mutated = f"table=0,priority={prios[n]},cookie=0xbad,ip,nw_dst={ip}/{plen},actions=output:5"
        actual.append(mutated)
    else:
        mutated = actual[i].rsplit("output:", 1)[0] + "output:6"
        actual[i] = mutated
    return routes, actual, kind, mutated


DSTS = [
    0x0A000000,
    0x0A000001,
    0x0A000105,
    0x0A000110,
    0x0A000111,
    0x0A0001FF,
    0x0A010000,
    0x0A010203,
    0x0B000001,
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_oracle_finding_names_the_mutated_entry(sc) -> None:
    routes, actual_text, kind, mutated = sc
    intended = [flow(t) for t in routes]
    actual = [flow(t) for t in actual_text]
    want_kind = {"delete": "missing", "insert": "unexpected", "change": "changed"}[kind]
    mut = flow(mutated)
    loc = localizer({1: intended}, {1: actual})
    for dst in DSTS:
        h = {"eth_type": 0x0800, "ipv4_dst": dst}
        w, g = _winner(intended, dst), _winner(actual, dst)
        ans = localize(loc, fault([{**h, "text": format_header(h)}]))
        if (w and format_flow(w)) == (g and format_flow(g)):
            assert ans["findings"] == [], (dst, ans)
            continue
        # The header's behaviour changed: the finding is the mutation, of the right kind.
        assert ans["finding"] == want_kind, (dst, ans)
        assert ans["cause"] == format_flow(mut), (dst, ans)


def test_proxy_commits_reach_the_changelog() -> None:
    """A FlowMod the switch confirmed (barrier reply) is logged under the identity that
    localization compares: its table, priority and match as the model has them."""
    import ofwire as of
    from pazzd.proxy import Proxy, ProxyConfig
    from tests.pazzd.proxy.ofhelpers import flow_mod, ofpp, out
    from tests.pazzd.proxy.test_robustness import connected

    async def run() -> ChangeLog:  # the proxy spawns its audit task on the loop
        proxy = Proxy(ProxyConfig(audit_interval=0))
        changes = ChangeLog(clock=lambda: 100.0)
        proxy.hooks.commit.append(changes.committed)
        s, sw, _up = connected(proxy)  # dpid 7
        match = ofpp.OFPMatch(eth_type=0x800, ipv4_dst=("10.0.1.0", "255.255.255.0"))
        s.from_controller(flow_mod(5, priority=24, match=match, actions=[out(1)]))
        s.from_controller(of.message(4, of.OFPT_BARRIER_REQUEST, 10))
        assert len(changes) == 0  # relayed, not yet confirmed
        data, off = bytes(sw.data), 0
        while off < len(data):  # the switch answers every barrier
            _ver, t, ln, xid = of.header(data[off:])
            if t == of.OFPT_BARRIER_REQUEST:
                s.from_switch(of.message(4, of.OFPT_BARRIER_REPLY, xid))
            off += ln
        return changes

    log = asyncio.run(run())
    route = flow(ROUTE24, 7)
    assert log.changed_since(7, route, 100.0) and not log.changed_since(7, route, 100.5)
    assert not log.changed_since(1, route, 0.0) and not log.changed_since(7, flow(ROUTE8, 7), 0.0)


def test_poll_errors_are_sentences(tmp_path) -> None:
    """A poll that times out or has no target says so in words, not an exception name."""
    slow = tmp_path / "ovs-ofctl"
    slow.write_text("#!/bin/sh\nsleep 5\n")
    slow.chmod(0o755)
    loc = Localizer(lambda d: [], {1: "unix:/nonexistent.mgmt"}, ofctl=str(slow), timeout=0.3)
    ans = localize(loc, fault([hdr("ipv4_dst=10.0.1.2")], candidates=(1, 2)))
    assert ans["findings"] == []
    assert ans["errors"] == {
        "1": "ovs-ofctl dump-flows unix:/nonexistent.mgmt did not answer within 0.3 s",
        "2": "no ovs-ofctl target or proxy connection for dpid 2",
    }


# --------------------------------------------------------------------------- groups
ECMP = "table=0,priority=24,ip,nw_dst=10.0.1.0/24,actions=group:7"
G7 = "group_id=7,type=select,bucket=output:2,bucket=output:3"


class FakeGroupProxy(FakeProxy):
    def __init__(self, tables, groups) -> None:
        super().__init__(tables)
        self.groups = groups

    async def dump_groups(self, dpid: int):
        return self.groups[dpid]


def group_localizer(actual_groups, intended=G7) -> Localizer:
    want = {7: parse_group(intended, 1)}
    return Localizer(
        lambda d: [flow(ECMP)],
        {},
        proxy=FakeGroupProxy({1: [flow(ECMP)]}, {1: [parse_group(g, 1) for g in actual_groups]}),
        names={1: "s1"},
        intended_group=lambda d, gid: want.get(gid),
    )


def test_a_group_changed_behind_the_controller_is_named_beside_the_intended_one() -> None:
    """The flow tables agree; the SELECT group the route uses has its buckets in the other
    order on the switch (every flow's pick moves), another weight, or another bucket."""
    row = fault([hdr("ipv4_dst=10.0.1.2")], kind="type_p_action")
    for actual in (
        "group_id=7,type=select,bucket=output:3,bucket=output:2",
        "group_id=7,type=select,bucket=weight:2,output:2,bucket=weight:1,output:3",
        "group_id=7,type=select,bucket=output:2,bucket=output:4",
        "group_id=7,type=all,bucket=output:2,bucket=output:3",
    ):
        ans = localize(group_localizer([actual]), row)
        assert ans["finding"] == "changed_group" and ans["misrouting_hop"] == "s1", ans
        assert ans["entry"] == format_group(parse_group(actual, 1))
        assert ans["intended"] == format_group(parse_group(G7, 1))
    ans = localize(group_localizer([]), row)
    assert ans["finding"] == "missing_group" and ans["entry"] is None
    # The same group (weights scaled alike pick the same buckets): no finding.
    same = "group_id=7,type=select,bucket=weight:5,output:2,bucket=weight:5,output:3"
    assert localize(group_localizer([G7, same][1:]), row)["findings"] == []
    assert localize(group_localizer([G7]), row)["findings"] == []


def test_groups_are_read_with_ovs_ofctl_without_the_proxy(tmp_path) -> None:
    """No proxy connection: the flows and groups come from `ovs-ofctl dump-flows` and
    `dump-groups` on the switch's target, as the patched build prints them."""
    fake = tmp_path / "ovs-ofctl"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$4" in\n'
        '  dump-flows) echo " cookie=0x0, duration=1.2s, table=0, n_packets=3, n_bytes=180, '
        'priority=24,ip,nw_dst=10.0.1.0/24 actions=group:7" ;;\n'
        '  dump-groups) echo "OFPST_GROUP_DESC reply (OF1.3) (xid=0x2):"; '
        'echo " group_id=7,type=select,bucket=actions=output:3,bucket=actions=output:2" ;;\n'
        "esac\n"
    )
    fake.chmod(0o755)
    want = parse_group(G7, 1)
    loc = Localizer(
        lambda d: [flow(ECMP)],
        {1: "unix:/x.mgmt"},
        ofctl=str(fake),
        intended_group=lambda d, gid: want if gid == 7 else None,
    )
    ans = localize(loc, fault([hdr("ipv4_dst=10.0.1.2")], kind="type_p_action"))
    assert ans["errors"] == {} and ans["finding"] == "changed_group", ans
    assert "bucket=output:3,bucket=output:2" in ans["entry"]
