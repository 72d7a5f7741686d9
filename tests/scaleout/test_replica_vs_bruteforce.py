"""A replica built from a snapshot and the journal's records forwards every header as the
brute-force data plane of the primary's entries does (cpc.refdp), through entry, group and
port changes, and never sees the guard's trials."""

from __future__ import annotations

import contextlib
import random
import time
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cpc.model import Model
from cpc.refdp import RefDataPlane
from cpc.rules import Group, ModelError
from pazzd.guard import _undo
from pazzd.scaleout.codec import THRIFT, decode
from pazzd.scaleout.journal import ModelJournal, snapshot_records, topology_fingerprint
from pazzd.scaleout.replica import Replica
from tests.cpc.netgen import flowmods, scenarios
from tests.cpc.test_model_vs_bruteforce import outcome_key, unique_priorities


def _records(journal: ModelJournal) -> list:
    out = [decode(THRIFT.ModelRecord, data) for _, data in journal.pending]
    journal.pending.clear()
    return out


def _head(model, journal, parts):
    return THRIFT.SnapshotHead(
        journal.epoch, journal.version, time.time(), 1, len(parts), journal.fingerprint, []
    )


def _mutate(model: Model, fms, rnd: random.Random, topo) -> None:
    """FlowMods, with a group rewritten or deleted and a port going down or up between."""
    ports = sorted({*topo.edges, *topo.links})
    for fm in fms:
        if fm.command == "add" and not unique_priorities(model, fm):
            continue  # overlapping entries of one priority: the switches' order is undefined
        with contextlib.suppress(ModelError):
            model.apply(fm)
        r = rnd.random()
        if r < 0.1 and model.groups():
            g = rnd.choice(model.groups())
            if rnd.random() < 0.5:
                model.delete_group(g.dpid, g.group_id)
            else:
                model.set_group(Group(g.dpid, g.group_id, g.type, tuple(reversed(g.buckets))))
        elif r < 0.2:
            d, p = rnd.choice(ports)
            model.port_status(d, p, up=(d, p) in topo.down)
        elif r < 0.3:  # a trial, taken back as the guard does: not journalled
            with model.trial(), contextlib.suppress(ModelError):
                upd = model.apply(fm)
                model.apply_many(_undo(upd.changes))


def _check(replica: Replica, primary: Model, topo, headers) -> None:
    assert Counter(map(str, replica.model.entries())) == Counter(map(str, primary.entries()))
    ref = RefDataPlane(topo, primary.entries(), primary.groups())
    for h in headers:
        for ing in topo.edge_ports():
            got = Counter(outcome_key(d) for d in replica.model.trace(ing, h))
            prim = Counter(outcome_key(d) for d in primary.trace(ing, h))
            assert got == prim, ("replica differs from the primary", ing, h, got, prim)
            want = Counter(outcome_key(d) for d in ref.send(ing, h) if ing not in topo.down)
            if ing in topo.down:
                continue
            assert got == want, (ing, h, got - want, want - got)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.integers(0, 2**32), st.data())
def test_replica_forwards_as_the_primary(sc, seed, data):
    topo, groups, fms, hs = sc
    fms = fms + data.draw(st.lists(flowmods(topo, 3), min_size=20, max_size=60))
    rnd = random.Random(seed)
    primary = Model(topo)
    primary.add_entries([], groups)
    journal = ModelJournal(primary, ifmap=list)
    half = len(fms) // 2
    _mutate(primary, fms[:half], rnd, topo)
    _records(journal)  # before the snapshot: in it
    journal.version += 1
    parts = snapshot_records(primary, journal.epoch, journal.version, time.time())
    replica = Replica(topo.__class__(**{**topo.__dict__, "down": set()}), journal.fingerprint)
    replica.load(_head(primary, journal, parts), parts)
    assert replica.model.topo.down == primary.topo.down
    _mutate(primary, fms[half:], rnd, topo)
    for rec in _records(journal):
        assert replica.apply(rec), rec.version
    assert replica.version == journal.version
    _check(replica, primary, primary.topo, hs)


def test_a_missing_record_makes_the_replica_wait_for_a_snapshot():
    from cpc.topology import Topology

    topo = Topology()
    topo.add_switch(1, "s1", [1, 2])
    topo.add_edge((1, 1))
    topo.add_edge((1, 2))
    primary = Model(topo)
    primary.build()
    journal = ModelJournal(primary, ifmap=list)
    parts = snapshot_records(primary, journal.epoch, journal.version, time.time())
    replica = Replica(topo, topology_fingerprint(topo))
    replica.load(_head(primary, journal, parts), parts)
    primary.add_flow(1, "priority=5,ip,nw_dst=10.0.0.1,actions=output:2")
    primary.add_flow(1, "priority=5,ip,nw_dst=10.0.0.2,actions=output:2")
    recs = _records(journal)
    assert not replica.apply(recs[1])  # the first is missing
    assert replica.stale and replica.needs_snapshot(journal.epoch)
    assert replica.model.rule_count() == 0


def test_another_topology_is_refused():
    from cpc.topology import Topology

    topo = Topology()
    topo.add_switch(1, "s1", [1, 2])
    topo.add_edge((1, 1))
    other = Topology()
    other.add_switch(1, "s1", [1, 2, 3])
    model = Model(topo)
    model.build()
    parts = snapshot_records(model, "e", 1, 0.0)
    head = THRIFT.SnapshotHead("e", 1, 0.0, 1, 1, topology_fingerprint(topo), [])
    replica = Replica(other, topology_fingerprint(other))
    try:
        replica.load(head, parts)
    except Exception as e:
        assert "same topology file" in str(e)
    else:
        raise AssertionError("a replica of another topology loaded")
