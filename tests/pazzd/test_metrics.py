"""pazzd/metrics.py: what a scrape shows, read from the daemon's state."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
from types import SimpleNamespace

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import ofwire as of
from cpc.model import Model
from cpc.topology import Topology
from pazzd.config import load_config
from pazzd.daemon import Daemon
from pazzd.metrics import Metrics, config_hash
from pazzd.proxy import Proxy, ProxyConfig
from tests.pazzd.proxy.ofhelpers import flow_mod, ofpp, out
from tests.pazzd.proxy.test_robustness import connected

from .helpers import base_config, write_config


def samples(registry) -> dict[str, float]:
    text = generate_latest(registry).decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return out


def test_sflow_datagram_counters_partition_what_was_received():
    tester = {"datagrams": 10, "malformed": 3, "lost_datagrams": 4, "reordered_datagrams": 2}
    m = samples(Metrics(lambda: {"tester": tester}).registry)
    decoded = m['pazz_sflow_datagrams_received_total{result="decoded"}']
    malformed = m['pazz_sflow_datagrams_received_total{result="malformed"}']
    assert (decoded, malformed) == (7, 3)  # 10 received: 7 decoded and 3 malformed
    assert m["pazz_sflow_datagrams_lost_total"] == 4
    assert m["pazz_sflow_datagrams_reordered_total"] == 2
    assert not any(k.startswith("pazz_sflow_datagrams_total") for k in m)


def test_process_platform_build_and_config_hash(tmp_path):
    met = Metrics(dict)
    cfg = tmp_path / "c.yaml"
    cfg.write_bytes(b"log_level: info\n")
    met.set_config_hash(config_hash(str(cfg)))
    cfg.write_bytes(b"log_level: debug\n")
    met.set_config_hash(config_hash(str(cfg)))
    m = samples(met.registry)
    assert m["process_resident_memory_bytes"] > 0 and "process_open_fds" in m
    assert any(k.startswith("python_info{") for k in m)
    assert any(k.startswith("python_gc_objects_collected_total") for k in m)
    want = importlib.metadata.version("pazz")
    assert m[f'pazz_build_info{{version="{want}"}}'] == 1
    hashes = [k for k in m if k.startswith("pazz_config_hash_info")]
    digest = hashlib.sha256(b"log_level: debug\n").hexdigest()[:16]
    assert hashes == [f'pazz_config_hash_info{{hash="{digest}"}}'], hashes


def _daemon(tmp_path) -> Daemon:
    path = write_config(tmp_path / "pazzd.yaml", base_config(tmp_path))
    d = Daemon(str(path))
    d.cfg = load_config(str(path))
    return d


def test_switch_connected_has_a_series_for_a_switch_that_never_connected(tmp_path):
    d = _daemon(tmp_path)
    dpids = sorted(d.cfg.topology.switches)
    assert len(dpids) == 4
    # Without the proxy pazzd knows nothing of OpenFlow sessions: no series, no false alarm.
    m = samples(d.metrics.registry)
    assert not any(k.startswith(("pazz_switch_connected", "pazz_controller_connected")) for k in m)
    # With it: one connected switch, one that went down, two that never connected.
    d.proxy = SimpleNamespace(
        switches={dpids[0]: object()}, controller_connected=True, drops=dict, ignored=dict
    )
    d.switch_up[dpids[1]] = False
    m = samples(d.metrics.registry)
    got = {k: v for k, v in m.items() if k.startswith("pazz_switch_connected")}
    assert got == {f'pazz_switch_connected{{dpid="{p}"}}': float(p == dpids[0]) for p in dpids}
    assert m["pazz_controller_connected"] == 1


def test_model_update_seconds_is_observed_on_the_proxy_path():
    asyncio.run(_proxy_path())  # the session schedules on a running loop


async def _proxy_path():
    topo = Topology()
    topo.add_switch(7, "s7", ports=[1, 2])
    topo.add_edge((7, 1))
    topo.add_edge((7, 2))
    model = Model(topo)
    model.build()
    proxy = Proxy(ProxyConfig(db_path=None), model=model)
    seen: list[float] = []
    proxy.on_model_update = seen.append
    s, sw, _up = connected(proxy)
    fm = flow_mod(5, match=ofpp.OFPMatch(eth_type=0x800, ipv4_dst="10.0.0.1"), actions=[out(2)])
    s.from_controller(fm)
    barriers = []
    off = 0
    while off < len(sw.data):
        _ver, t, ln, xid = of.header(bytes(sw.data[off : off + 8]))
        if t == of.OFPT_BARRIER_REQUEST:
            barriers.append(xid)
        off += ln
    assert barriers, "the proxy sent no barrier after the FlowMod"
    for xid in barriers:
        s.from_switch(of.message(4, of.OFPT_BARRIER_REPLY, xid))
    assert model.rule_count() == 1
    assert len(seen) == 1 and 0 < seen[0] < 5


def test_the_daemon_wires_the_proxy_to_model_update_seconds(tmp_path):
    cfg = base_config(tmp_path)
    cfg["controller"] = {"enabled": True, "listen": "127.0.0.1:0", "address": "127.0.0.1:9"}
    d = Daemon(str(write_config(tmp_path / "pazzd.yaml", cfg)))

    async def run():
        await d.start()
        try:
            assert d.proxy is not None
            d.proxy.on_model_update(0.002)
            m = samples(d.metrics.registry)
            assert m["pazz_model_update_seconds_count"] == 1
            # Nothing connected yet: every switch of the topology is down, not absent.
            down = [k for k, v in m.items() if k.startswith("pazz_switch_connected") and v == 0]
            assert len(down) == len(d.cfg.topology.switches) == 4
            assert m["pazz_controller_connected"] == 0
        finally:
            await d.stop()

    asyncio.run(run())
