"""One corrupted but well-formed sample opens no fault; a second sample
of the same fault (or the fuzzer's re-probe of its header, when it is sampled) does, and
the fault's first evidence stays the first sample."""

from __future__ import annotations

import pytest

from cpc.model import Model
from fuzzer.engine import Fuzzer
from pazzdata.workloads import generate
from tester.emit import ReferenceEmitter, synthetic_ifmap
from tester.engine import Tester
from tester.store import FaultStore
from tests.tester.tester_helpers import (
    ALL_PORTS,
    BAD,
    EGRESS,
    GOOD,
    HDR,
    FakeModel,
    expected,
    tags_of,
)


@pytest.fixture
def make(tmp_path):
    stores = []

    def mk(corroborate: int):
        store = FaultStore(str(tmp_path / f"f{len(stores)}.db"))
        stores.append(store)
        events, suspects = [], []
        t = Tester(
            FakeModel({(EGRESS, HDR["ipv4_dst"]): [expected(GOOD)]}),
            store,
            synthetic_ifmap(ALL_PORTS),
            on_fault=events.append,
            resolve_after=1e9,
        )
        t.corroborate, t.corroborate_window = corroborate, 10.0
        t.on_suspect = lambda eg, h, exp: suspects.append((eg, h, exp))
        emitters[t] = ReferenceEmitter()  # one agent, numbering its samples
        return t, store, events, suspects

    yield mk
    emitters.clear()
    for s in stores:
        s.close()


emitters: dict = {}


def _send(t, hops, now, header=HDR):
    em = emitters[t]
    em.add(EGRESS, header, *tags_of(hops))
    for d in em.flush():
        t.process_datagram(d, now)


def test_one_corrupted_sample_opens_nothing(make):
    t, store, events, suspects = make(2)
    _send(t, GOOD, 0.0)
    _send(t, BAD, 1.0)
    assert store.faults() == [] and not events
    assert t.stats.uncorroborated == 1 and t.stats.fault_samples == 1
    assert len(suspects) == 1 and suspects[0][0] == EGRESS  # a re-probe was asked for
    # A second sample within the window opens it, as of the first sample.
    _send(t, BAD, 5.0)
    rows = store.faults()
    assert len(rows) == 1 and rows[0].first_seen == 1.0 and rows[0].count == 2
    assert [e.new for e in events] == [True, False]
    # Once open, every sample counts at once.
    _send(t, BAD, 6.0)
    assert store.faults()[0].count == 3 and t.stats.uncorroborated == 1


def test_samples_too_far_apart_do_not_corroborate(make):
    t, store, events, suspects = make(2)
    _send(t, BAD, 0.0)
    _send(t, BAD, 20.0)  # window 10 s
    assert store.faults() == [] and len(suspects) == 2
    _send(t, BAD, 25.0)
    assert store.faults()[0].first_seen == 20.0


def test_corroborate_1_is_the_old_behaviour(make):
    t, store, events, suspects = make(1)
    _send(t, BAD, 0.0)
    assert len(store.faults()) == 1 and not suspects


def test_fuzzer_reprobes_first():
    wl = generate("grid", 2, 40, rule_ids=True)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    fz = Fuzzer(model, seed=1, subscribe=False)
    ingress = next(iter(fz.state))
    hdr = {"eth_type": 0x800, "ipv4_dst": 0x0A000102, "ip_proto": 6}
    fz.reprobe(ingress, hdr)
    fz.reprobe((999, 1), hdr)  # not an ingress of the fuzzer: ignored
    probes = fz.next_probes(3)
    assert probes[0].area == "reprobe" and probes[0].ingress == ingress
    assert probes[0].header == hdr
    assert all(p.area != "reprobe" for p in probes[1:])
    fz.record(probes)
    assert fz.sent_by_area["reprobe"] == 1
