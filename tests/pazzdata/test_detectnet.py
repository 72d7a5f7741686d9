"""The detection harness's networks, faults and churn (pazzdata/detectnet.py), checked with the
reference data plane and the lab's own file loader: what the lab builds is what the
harness reasons about, every fault is a real difference, and the churn is benign."""

from __future__ import annotations

import json

import pytest

from cpc.ofctl import parse_flow
from pazzdata.detectnet import (
    CHURN_HOST,
    FAULT_KINDS,
    Churn,
    dotted,
    make_faults,
    random_network,
)
from pazzlab.lab import load_network

SEEDS = range(11, 19)


@pytest.mark.parametrize("seed", SEEDS)
def test_network_delivers_every_pair_and_loads_in_the_lab(seed, tmp_path):
    net = random_network(seed)
    topo_file, rules_file = tmp_path / "net.yaml", tmp_path / "rules.jsonl"
    net.write(topo_file, rules_file)
    wl, addrs = load_network(topo_file, rules_file)  # the lab's loader, with its checks
    assert sorted(wl.hosts) == sorted(net.hosts)
    assert len(wl.entries) == len(net.entries) and len(wl.groups) == len(net.groups)
    # The harness's addresses are the ones the lab gives its hosts.
    assert {h: a.ip for h, a in addrs.items()} == {h: dotted(ip) for h, ip in net.ips.items()}
    assert {h: a.mac for h, a in addrs.items()} == net.macs
    # Some switch carries no host; tables 0 and 1 are both used.
    assert set(net.topo.switches) - {p[0] for p in net.hosts.values()}
    assert {e.table for e in net.entries} == {0, 1}
    ref = net.ref(wl.entries)  # the rules as the lab reads them back
    for a in net.hosts:
        for b in net.hosts:
            if a == b:
                continue
            for dst in (net.ips[b], net.ips[b] - 1 + CHURN_HOST):
                h = {
                    "eth_type": 0x0800,
                    "ipv4_src": net.ips[a],
                    "ipv4_dst": dst,
                    "ip_proto": 6,
                    "tp_src": 5000,
                    "tp_dst": 80,
                }
                ds = ref.send_with_headers(net.hosts[a], h)
                assert ds, (a, b)
                for d, out in ds:
                    assert d.kind == "egress" and d.egress == net.hosts[b], (a, b, d)
                    assert out["eth_dst"] == int(net.macs[b].replace(":", ""), 16)
    crit = ref.send(net.hosts[net.critical[0]], net.critical_header())
    assert crit and all(d.egress == net.hosts[net.critical[1]] for d in crit)


def test_every_fault_kind_occurs_and_is_a_real_difference():
    kinds = set()
    for seed in SEEDS:
        net = random_network(seed)
        for f in make_faults(net, seed):
            kinds.add(f.kind)
            assert {e.dpid for e in [*f.add, *f.delete]} == {f.dpid}
            ingress, header = f.witness
            before = net.ref().send_with_headers(ingress, header)
            after = net.ref(f.apply(net.entries)).send_with_headers(ingress, header)
            assert [
                (d.kind, d.egress, d.hops, d.verify_rule, sorted(h.items())) for d, h in before
            ] != [(d.kind, d.egress, d.hops, d.verify_rule, sorted(h.items())) for d, h in after], (
                f.title
            )
    assert kinds == set(FAULT_KINDS)


def test_faults_on_the_critical_flow_or_off_it():
    for seed in SEEDS:
        net = random_network(seed)
        hdr = net.critical_header()
        path = net.ref().send(net.hosts[net.critical[0]], hdr)
        for f in make_faults(net, seed, kinds=("delete_critical", "delete_route")):
            (e,) = f.delete
            on_path = any(
                h.dpid == e.dpid and e.match.contains(hdr, h.in_port) for d in path for h in d.hops
            )
            assert on_path == (f.kind == "delete_critical"), f.title


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_churn_is_benign_for_production_traffic(seed):
    """Churn changes rule tags of production traffic, never where it goes; every update
    line parses as the controller app parses it, and deletes remove what adds put in."""
    net = random_network(seed)
    churn = Churn(net, seed, live=3)
    entries = list(net.entries)

    def outcomes(es, tags=False):
        ref = net.ref(es)
        out = {}
        for a in net.hosts:
            for b in net.hosts:
                if a != b:
                    h = {
                        "eth_type": 0x0800,
                        "ipv4_src": net.ips[a],
                        "ip_proto": 17,
                        "ipv4_dst": net.ips[b] - 1 + CHURN_HOST,
                        "tp_src": 1,
                        "tp_dst": 53,
                    }
                    out[a, b] = sorted(
                        (
                            d.kind,
                            d.egress,
                            tuple(x.dpid for x in d.hops),
                            d.verify_rule if tags else 0,
                        )
                        for d in ref.send(net.hosts[a], h)
                    )
        return out

    want, tags0 = outcomes(entries), outcomes(entries, tags=True)
    tags_changed = False
    for _ in range(16):
        for line in churn.batch():
            json.dumps(line)
            fm = parse_flow(line["flow"], line["dpid"], line["command"])
            key = (fm.dpid, fm.table, fm.priority, fm.match)
            if line["command"] == "add":
                entries.append(fm.entry())
            else:
                n = len(entries)
                entries = [e for e in entries if (e.dpid, e.table, e.priority, e.match) != key]
                assert len(entries) == n - 1
        assert outcomes(entries) == want
        tags_changed |= outcomes(entries, tags=True) != tags0
    assert churn.count > 16
    assert tags_changed  # hot churn did touch production traffic's rules


def test_every_seed_places_its_hosts_and_keeps_a_transit_switch():
    """Host placement terminates for every seed: where the draw puts a host on every switch
    (one would hang here before, e.g. 7128 and 8412) or more hosts on a switch than it has
    free ports (7108), hosts are moved among the host switches; at least one switch stays
    transit only, and every host has a port of its own."""
    for seed in [*range(7000, 7400), *range(8400, 8600)]:
        net = random_network(seed)
        ports = list(net.hosts.values())
        assert len(set(ports)) == len(ports), seed
        assert len({p[0] for p in ports}) < len(net.topo.switches), seed
