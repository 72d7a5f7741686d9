"""Audit findings as faults (pazzd/audit.py), the audit settings in pazzd.yaml, the daemon's
wiring (proxy config, reload, localize, metrics) and how pazzctl shows audit faults."""

from __future__ import annotations

import asyncio
import logging

import pytest

from cpc.ofctl import format_flow, parse_flow
from pazzd import cli
from pazzd.answers import fault_json
from pazzd.audit import AuditFaults
from pazzd.config import ConfigError, load_config
from pazzd.daemon import Daemon
from pazzd.proxy import AuditFinding
from tester.detect import BLACKHOLE, TYPE_P_MATCH
from tester.store import OPEN, RESOLVED, FaultStore

from .helpers import base_config, write_config

HIDDEN = "priority=100,ip,nw_dst=10.0.99.0/24,actions=output:2"
ROUTE = "priority=100,ip,nw_dst=10.0.3.0/24,actions=output:3"


def finding(kind: str, flow: str, intended: str | None = None, dpid: int = 1) -> AuditFinding:
    """An AuditFinding as the proxy makes it (texts in ovs-ofctl syntax)."""
    e = parse_flow(flow, dpid).entry()
    text = format_flow(e)
    itext = text if kind == "missing" else ""
    if intended:
        itext = format_flow(parse_flow(intended, dpid).entry())
    # The match bytes only key the fault: any bytes unique per match will do here.
    return AuditFinding(
        dpid, kind, e.table, e.priority, str(e.match).encode(), text=text, intended_text=itext
    )


def open_tester_fault(store, kind=TYPE_P_MATCH, polled=None, cls="c1") -> int:
    fid, _ = store.record(
        kind,
        "dpid:1",
        cls,
        1.0,
        b"",
        {"text": "ipv4_dst=10.0.99.1"},
        (1, 1),
        [],
        None,
        {"candidates": [1]},
    )
    if polled is not None:
        store.set_polled(fid, polled)
    return fid


def polled_answer(finding_kind: str, entry: str | None, intended: str | None, dpid=1) -> dict:
    item = {
        "dpid": dpid,
        "switch": "s1",
        "finding": finding_kind,
        "in_port": 1,
        "entry": entry,
        "intended": intended,
    }
    return {**item, "fault": 1, "polled": [dpid], "errors": {}, "findings": [item]}


@pytest.fixture
def store(tmp_path):
    s = FaultStore(str(tmp_path / "faults.db"))
    yield s
    s.close()


def test_one_fault_per_entry_updated_resolved_and_reopened(store):
    af = AuditFaults(store, {1: "s1"})
    f = finding("unexpected", HIDDEN)
    (ev,) = af.round(1, [f], 10.0)
    assert ev.what == "new"
    (row,) = store.faults()
    assert (row.kind, row.location, row.state, row.count) == ("audit", "dpid:1", OPEN, 1)
    assert row.audit["finding"] == "unexpected" and row.audit["switch"] == "s1"
    # ovs-ofctl syntax, not the model's field names (ipv4_dst=..., eth_type=0x0800)
    assert row.audit["entry"] == "table=0,priority=100,ip,nw_dst=10.0.99.0/24,actions=output:2"
    assert row.header["text"] == row.audit["entry"] and row.audit["intended"] is None
    # The next rounds see it again: the same fault is updated, nothing new is reported.
    assert af.round(1, [f], 20.0) == [] and af.round(1, [f], 30.0) == []
    (row,) = store.faults()
    assert (row.id, row.count, row.last_seen, row.state) == (ev.fault_id, 3, 30.0, OPEN)
    # A round of another switch does not resolve it; a round of its switch without it does.
    assert af.round(2, [], 35.0) == [] and store.get(ev.fault_id).state == OPEN
    (res,) = af.round(1, [], 40.0)
    assert (res.what, res.fault_id) == ("resolved", ev.fault_id)
    assert store.get(ev.fault_id).state == RESOLVED
    # It comes back: the same row reopens.
    (again,) = af.round(1, [f], 50.0)
    assert again.what == "new" and again.fault_id == ev.fault_id
    row = store.get(ev.fault_id)
    assert row.state == OPEN and row.reopened == 1 and len(store.faults()) == 1


def test_kinds_and_entries_are_told_apart(store):
    af = AuditFaults(store)
    changed = finding("changed", "priority=100,ip,nw_dst=10.0.3.0/24,actions=output:1", ROUTE)
    missing = finding("missing", "priority=100,ip,nw_dst=10.0.4.0/24,actions=output:2")
    evs = af.round(1, [finding("unexpected", HIDDEN), changed, missing], 1.0)
    assert [e.what for e in evs] == ["new"] * 3 and len(store.faults(OPEN)) == 3
    by = {r.audit["finding"]: r.audit for r in store.faults()}
    assert by["changed"]["entry"].endswith("actions=output:1")
    assert (
        by["changed"]["intended"] == "table=0,priority=100,ip,nw_dst=10.0.3.0/24,actions=output:3"
    )
    assert by["missing"]["entry"] is None and "nw_dst=10.0.4.0/24" in by["missing"]["intended"]


def test_merged_into_the_tester_fault_localized_to_the_same_entry(store):
    af = AuditFaults(store)
    # The localization read the switch with ovs-ofctl: its text is a dump-flows line.
    dump = "cookie=0x0, table=0, priority=100,ip,nw_dst=10.0.99.0/24 actions=output:2"
    tid = open_tester_fault(store, polled=polled_answer("unexpected", dump, ROUTE))
    other_switch = open_tester_fault(
        store, polled=polled_answer("unexpected", dump, None, dpid=2), cls="c2"
    )
    (ev,) = af.round(1, [finding("unexpected", HIDDEN)], 10.0)
    assert (ev.what, ev.fault_id) == ("merged", tid)
    assert [r.kind for r in store.faults()] == [TYPE_P_MATCH, TYPE_P_MATCH]  # no audit fault
    a = store.get(tid).audit
    assert a["finding"] == "unexpected" and a["first_seen"] == 10.0
    assert store.get(other_switch).audit is None
    # Seen again: recorded, not reported again.
    assert af.round(1, [finding("unexpected", HIDDEN)], 20.0) == []
    a = store.get(tid).audit
    assert (a["first_seen"], a["last_seen"]) == (10.0, 20.0)
    # Another entry of the same switch (other priority) is a fault of its own.
    (ev,) = af.round(1, [finding("unexpected", HIDDEN.replace("100", "90"))], 30.0)
    assert ev.what == "new" and store.get(ev.fault_id).kind == "audit"


def test_audit_fault_opened_first_is_merged_when_the_tester_localizes(store):
    af = AuditFaults(store)
    f = finding("missing", ROUTE)
    (ev,) = af.round(1, [f], 10.0)
    aid = ev.fault_id
    # A blackhole, localized later: the missing intended entry is its cause.
    answer = polled_answer("missing", None, format_flow(parse_flow(ROUTE, 1).entry()))
    answer["cause"] = answer["intended"]
    bid = open_tester_fault(store, kind=BLACKHOLE, polled=answer, cls="flow:web")
    evs = af.round(1, [f], 20.0)
    assert [(e.what, e.fault_id, e.into) for e in evs] == [
        ("merged", bid, None),
        ("merged_away", aid, bid),
    ]
    row = store.get(aid)
    assert row.state == RESOLVED and row.audit["merged_into"] == bid
    assert store.get(bid).audit["finding"] == "missing"
    # A resolved tester fault takes no merge: the audit fault reopens.
    store.resolve(bid, 25.0)
    (ev,) = af.round(1, [f], 30.0)
    assert (ev.what, ev.fault_id) == ("new", aid)


def test_unlocalized_or_unrelated_tester_faults_take_no_merge(store):
    af = AuditFaults(store)
    open_tester_fault(store)  # not localized yet
    open_tester_fault(store, polled=polled_answer("changed", ROUTE, ROUTE), cls="c2")
    (ev,) = af.round(1, [finding("unexpected", HIDDEN)], 1.0)
    assert ev.what == "new"


# --- config -------------------------------------------------------------------------------


def _load(tmp_path, controller: dict):
    cfg = base_config(tmp_path, controller={"enabled": True, **controller})
    return load_config(write_config(tmp_path / "pazzd.yaml", cfg))


def test_audit_settings_in_the_config(tmp_path):
    c = _load(tmp_path, {})
    assert (c.controller.audit_interval, c.controller.audit_delay) == (30.0, 2.0)
    c = _load(tmp_path, {"audit_interval": 5, "audit_delay": 0.5})
    assert (c.controller.audit_interval, c.controller.audit_delay) == (5.0, 0.5)
    assert (
        _load(tmp_path, {"audit_interval": 0}).controller.audit_interval == 0.0
    )  # no periodic audit


@pytest.mark.parametrize(
    "key, value, msg",
    [
        ("audit_interval", -1, "must be at least 0.0"),
        ("audit_interval", 0.01, "must be 0 (no periodic audit) or at least 0.1"),
        ("audit_interval", 100000, "must be at most 86400.0"),
        ("audit_interval", "often", "must be a float"),
        ("audit_interval", float("nan"), "must be a finite number"),
        ("audit_interval", float("inf"), "must be a finite number"),
        ("audit_delay", -0.5, "must be at least 0.0"),
        ("audit_delay", float("-inf"), "must be a finite number"),
        ("audit_delay", True, "must be a float"),
    ],
)
def test_audit_settings_are_validated(tmp_path, key, value, msg):
    with pytest.raises(ConfigError) as ei:
        _load(tmp_path, {key: value})
    err = str(ei.value)
    path = tmp_path / "pazzd.yaml"
    line = int(err.split(":")[1])
    assert err.startswith(f"{path}:") and f"controller.{key}: {msg}" in err, err
    assert key in path.read_text().splitlines()[line - 1]


# --- the daemon -----------------------------------------------------------------------------


def test_daemon_wires_audit_faults_reload_localize_and_metrics(tmp_path, caplog):
    cfg = base_config(
        tmp_path,
        controller={
            "enabled": True,
            "listen": "127.0.0.1:0",
            "audit_interval": 5,
            "audit_delay": 1,
        },
    )
    path = write_config(tmp_path / "pazzd.yaml", cfg)

    async def main():
        d = Daemon(str(path))
        await d.start()
        try:
            pc = d.proxy.config
            assert (pc.audit_interval, pc.audit_delay) == (5.0, 1.0)
            task = d.proxy._audit_task
            assert task is not None and not task.done()
            # SIGHUP with other audit settings: applied to the running proxy.
            cfg["controller"].update(audit_interval=0.5, audit_delay=0)
            write_config(path, cfg)
            assert await d.reload()
            assert (pc.audit_interval, pc.audit_delay) == (0.5, 0.0)
            await asyncio.sleep(0)
            assert task.cancelled() and d.proxy._audit_task is not task
            cfg["controller"]["audit_interval"] = 0  # off: no audit loop left
            write_config(path, cfg)
            assert await d.reload() and d.proxy._audit_task is None

            # An audit round through the daemon's handler: stored before it is logged.
            seen_in_store = []

            class Check(logging.Handler):
                def emit(self, record):
                    if record.getMessage().startswith("fault #"):
                        other = FaultStore(d.cfg.database)  # another connection: committed?
                        seen_in_store.append([r.kind for r in other.faults(OPEN)])
                        other.close()

            h = Check()
            logging.getLogger("pazzd").addHandler(h)
            try:
                with caplog.at_level(logging.INFO, logger="pazzd"):
                    d.proxy.on_audit(1, [finding("unexpected", HIDDEN)])
            finally:
                logging.getLogger("pazzd").removeHandler(h)
            assert seen_in_store == [["audit"]]
            line = "audit at dpid:1: dpid 0x1: unexpected entry table=0,priority=100,ip,nw_dst="
            assert line in caplog.text
            (row,) = d.store.faults(OPEN)
            assert d.faults_open()["audit"] == 1
            assert d.metrics.faults_detected.labels("audit")._value.get() == 1
            ans = await d.faults.localize(row.id)  # nothing to poll: the audit's own answer
            assert (ans["switch"], ans["finding"], ans["source"]) == ("s1", "unexpected", "audit")
            assert fault_json(row)["audit"]["finding"] == "unexpected"
        finally:
            await d.stop()

    asyncio.run(main())


# --- pazzctl --------------------------------------------------------------------------------


def test_pazzctl_shows_audit_faults(store, monkeypatch, capsys):
    af = AuditFaults(store, {1: "s1"})
    af.round(
        1, [finding("changed", "priority=100,ip,nw_dst=10.0.3.0/24,actions=output:1", ROUTE)], 1.0
    )
    rows = [fault_json(r) for r in store.faults()]
    monkeypatch.setattr(cli, "_call", lambda args, cmd, **kw: rows if cmd == "faults" else rows[0])
    cli.cmd_faults(cli.build_parser().parse_args(["faults"]))
    out = capsys.readouterr().out
    assert "audit" in out and "s1 (changed)" in out and "nw_dst=10.0.3.0/24" in out
    cli.cmd_faults(cli.build_parser().parse_args(["faults", "show", str(rows[0]["id"])]))
    out = capsys.readouterr().out
    assert "changed entry on s1" in out
    assert "table=0,priority=100,ip,nw_dst=10.0.3.0/24,actions=output:1" in out
    assert "  intended   table=0,priority=100,ip,nw_dst=10.0.3.0/24,actions=output:3" in out
    assert "header" not in out and "expected" not in out
