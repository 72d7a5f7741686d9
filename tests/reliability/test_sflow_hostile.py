"""Forged sFlow datagrams cannot inflate `lost`, grow per-agent
state or write one log line each, and `sflow.agents` drops unknown agents."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from tester.collector import SflowCollector
from tester.engine import Tester
from tester.ifmap import IfMap
from tester.sflow import CounterSample, IfCounters, encode_datagram
from tester.store import FaultStore
from tests.tester.tester_helpers import FakeModel


@pytest.fixture
def tester(tmp_path):
    store = FaultStore(str(tmp_path / "faults.db"))
    t = Tester(FakeModel({}), store, IfMap(), resolve_after=10.0)
    yield t
    store.close()


def _counters(seq: int, ifindex: int, up: bool = True) -> CounterSample:
    vals = [0] * 19
    vals[0], vals[4] = ifindex, 3 if up else 1
    return CounterSample(seq, 0, ifindex, IfCounters(*vals))


def test_one_forged_datagram_cannot_add_billions_to_lost(tester):
    t = tester
    for seq in range(1, 11):
        t.process_datagram(encode_datagram("10.0.0.1", 0, seq, seq, []), now=1.0)
    assert t.stats.lost_datagrams == 0
    t.process_datagram(encode_datagram("10.0.0.1", 0, 10 + 2**31 - 1, 0, []), now=1.0)
    assert t.stats.lost_datagrams <= Tester.MAX_SEQ_GAP
    assert t.stats.sequence_resets == 1
    # The real agent goes on: that is a reset (backwards), not loss either.
    for seq in range(11, 20):
        t.process_datagram(encode_datagram("10.0.0.1", 0, seq, seq, []), now=1.0)
    assert t.stats.lost_datagrams <= Tester.MAX_SEQ_GAP
    # Real loss within the bound is still counted exactly.
    t.process_datagram(encode_datagram("10.0.0.1", 0, 30, 30, []), now=1.0)
    assert t.stats.lost_datagrams == 10


def test_forged_agents_do_not_grow_state_or_the_log(tester, caplog):
    t = tester
    n = Tester.MAX_AGENT_STATE * 3
    with caplog.at_level(logging.WARNING, logger="tester.engine"):
        for i in range(n):
            agent = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
            t.process_datagram(encode_datagram(agent, 0, 5, 0, [_counters(1, 7, up=True)]), now=1.0)
            t.process_datagram(
                encode_datagram(agent, 0, 6, 0, [_counters(2, 7, up=False)]), now=1.0
            )
    assert len(t._seq) <= Tester.MAX_AGENT_STATE
    assert len(t._ifstate) <= Tester.MAX_AGENT_STATE
    assert len(t.rlog._last) <= 5
    assert len(caplog.records) <= 5
    assert t.stats.interfaces_down == n  # still counted, every one


def test_allow_list_drops_unknown_agents_and_sources(tester):
    t = tester
    t.agents = frozenset({"10.0.0.1"})
    t.process_datagram(encode_datagram("10.0.0.1", 0, 1, 0, []), now=1.0, source="10.0.0.1")
    t.process_datagram(encode_datagram("10.9.9.9", 0, 1, 0, []), now=1.0, source="10.9.9.9")
    # A forged payload agent from an unknown UDP source.
    t.process_datagram(encode_datagram("10.0.0.1", 0, 2**31, 0, []), now=1.0, source="6.6.6.6")
    assert t.stats.unknown_agent == 2
    assert set(t._seq) == {("10.0.0.1", 0)}
    assert t.stats.lost_datagrams == 0 and t.stats.sequence_resets == 0


def test_collector_passes_the_udp_source():
    got = []

    async def main():
        col = SflowCollector(
            lambda d, src: got.append(src), hosts=("127.0.0.1",), port=0, pass_source=True
        )
        await col.start()
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(encode_datagram("10.0.0.1", 0, 1, 0, []), col.bound[0][:2])
            for _ in range(200):
                if got:
                    break
                await asyncio.sleep(0.01)
        finally:
            col.close()

    asyncio.run(asyncio.wait_for(main(), 10))
    assert got == ["127.0.0.1"]


def test_sflow_agents_config(tmp_path):
    from pazzd.config import ConfigError, load_config
    from tests.pazzd.helpers import base_config, write_config

    cfg = base_config(tmp_path)
    cfg["sflow"]["agents"] = ["10.0.0.1", "2001:db8:0::1"]
    c = load_config(str(write_config(tmp_path / "a.yaml", cfg)))
    assert c.sflow.agents == frozenset({"10.0.0.1", "2001:db8::1"})
    cfg["sflow"]["agents"] = ["10.0.0.1", "switch-1"]
    with pytest.raises(ConfigError, match=r"sflow\.agents\[1\]"):
        load_config(str(write_config(tmp_path / "b.yaml", cfg)))
    del cfg["sflow"]["agents"]
    assert load_config(str(write_config(tmp_path / "c.yaml", cfg))).sflow.agents is None


def test_new_counters_are_exported():
    from prometheus_client import generate_latest

    from pazzd.metrics import Metrics

    m = Metrics(
        lambda: {
            "tester": {"unknown_agent": 7, "sequence_resets": 3},
            "proxy": {"stalled": 2, "refused": 5},
        }
    )
    text = generate_latest(m.registry).decode()
    assert "pazz_sflow_unknown_agent_datagrams_total 7.0" in text
    assert "pazz_sflow_sequence_resets_total 3.0" in text
    assert 'pazz_proxy_dropped_connections_total{reason="stalled"} 2.0' in text
    assert 'pazz_proxy_dropped_connections_total{reason="refused"} 5.0' in text


def test_a_thousand_forged_datagrams_add_at_most_a_thousand_to_lost(tester):
    """Random sequence numbers under a real agent's address, and under forged ones: each
    datagram received can account for at most one lost datagram."""
    import random

    t, rng = tester, random.Random(5)
    for seq in range(1, 6):
        t.process_datagram(encode_datagram("10.0.0.1", 0, seq, seq, []), now=1.0)
    for i in range(1000):
        agent = "10.0.0.1" if i % 2 else f"10.9.{i % 7}.{i % 5}"
        seq = rng.randrange(2, 1 << 32) if i % 3 else rng.randrange(2, 2000)
        t.process_datagram(encode_datagram(agent, 0, seq, 0, []), now=1.0)
    assert t.stats.lost_datagrams <= 1000 + 5, t.stats


def _fault_datagram(seq: int, sample: int = 1) -> bytes:
    """A datagram numbered seq with the fault's report, the agent's sample number `sample`."""
    from tester.emit import ReferenceEmitter, agent_of
    from tests.tester.tester_helpers import BAD, EGRESS, HDR, tags_of

    em = ReferenceEmitter()
    em._dg_seq[agent_of(EGRESS[0])] = seq - 1  # the datagram's sequence number is seq
    em._sample_seq[(agent_of(EGRESS[0]), em.base + EGRESS[1])] = sample - 1
    em.add(EGRESS, HDR, *tags_of(BAD))
    (dg,) = em.flush()
    return dg


def test_a_repeated_or_replayed_datagram_corroborates_nothing(tmp_path):
    """The two-sample rule counts distinct datagrams: the same datagram twice, 0.2 s apart,
    and a replay of an older one, open nothing and are counted; a late datagram not seen
    before is judged (reordered); a new datagram with the fault's sample opens it."""
    from tester.emit import synthetic_ifmap
    from tests.tester.tester_helpers import ALL_PORTS, EGRESS, GOOD, HDR, expected

    store = FaultStore(str(tmp_path / "f.db"))
    t = Tester(
        FakeModel({(EGRESS, HDR["ipv4_dst"]): [expected(GOOD)]}),
        store,
        synthetic_ifmap(ALL_PORTS),
        resolve_after=1e9,
    )
    t.corroborate, t.corroborate_window = 2, 60.0
    try:
        d5 = _fault_datagram(5)
        t.process_datagram(d5, now=1.0)
        t.process_datagram(d5, now=1.2)  # the same datagram again
        assert t.stats.duplicate_datagrams == 1 and store.faults("open") == []
        t.process_datagram(_fault_datagram(9, sample=2), now=1.4)
        t.process_datagram(_fault_datagram(5), now=1.6)  # a replay behind the latest
        assert t.stats.duplicate_datagrams == 2 and t.stats.fault_samples == 2
        assert len(store.faults("open")) == 1  # 5 and 9: two packets, one fault
        t.process_datagram(_fault_datagram(7, sample=3), now=1.8)  # late, never seen: judged
        assert t.stats.reordered_datagrams == 1 and t.stats.fault_samples == 3
        # 6, 7, 8 were missing when 9 came, but only one datagram (5) had been received
        # from the agent: a gap counts at most the datagrams received.
        assert t.stats.lost_datagrams == 1
    finally:
        store.close()
