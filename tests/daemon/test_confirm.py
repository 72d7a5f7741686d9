"""Confirmation of findings by probes: every report of the probed header is recorded, and
the verdict follows the reports (agrees, differs, unseen), with whom an interference
finding's data plane obeyed."""

from __future__ import annotations

from cpc.topology import Topology
from pazzd.confirm import Confirmations
from tester.engine import watch_key

HDR = {"eth_type": 0x0800, "ipv4_dst": 0x0A000301, "ipv4_src": 0x0A000001, "ip_proto": 6,
       "tp_dst": 80, "tp_src": 49152}  # fmt: skip


class Fake:
    def __init__(self):
        self.t = 100.0
        self.sent = []
        self.watches = {}
        self.conf = {}

    def __call__(self):  # the clock
        return self.t

    def confirm(self, ingress, header, copies):  # the fuzzer
        self.sent.append((ingress, dict(header), copies))
        return ingress != (9, 9)

    def set_confirmation(self, fid, obj):  # the store
        self.conf[fid] = obj


def confirmations():
    topo = Topology()
    for d in (1, 4):
        topo.add_switch(d, f"s{d}", [1, 5])
        topo.add_edge((d, 5))
    topo.add_link((1, 1), (4, 1))
    f = Fake()
    return f, Confirmations(f, f, f, topo, sampling_rate=64, probe_rate=1000.0, clock=f)


def report(f, egress, allowed):
    f.watches[watch_key(HDR)](egress, HDR, 0x10, 0x20, allowed, f.t)


def test_agrees_differs_unseen_and_obeyed():
    f, c = confirmations()
    assert c.copies == 192  # 3N at sampling 1/N
    for fid, reports, verdict, obeyed in (
        (1, [((4, 5), True)], "agrees", "router"),
        (2, [((4, 5), False)], "differs", "not router"),
        (3, [((1, 5), True)], "differs", "not router"),  # an exit the model does not predict
        (4, [], "unseen", "unseen"),
    ):
        probe = [("witness", (1, 5), HDR, {(4, 5)})]
        assert c.start_probes(fid, probe, {"model_winner": "router"})
        assert f.conf[fid]["verdict"] == "probing"
        for eg, ok in reports:
            report(f, eg, ok)
        f.t += c.window + 1
        c.tick()
        got = f.conf[fid]
        assert (got["verdict"], got["obeyed"]) == (verdict, obeyed), got
        assert [r["egress"] for r in got["probes"][0]["reports"]] == [
            f"s{eg[0]}:{eg[1]}" for eg, _ in reports
        ]
    assert f.watches == {} and c.pending == {}  # nothing left watched


def test_no_exit_predicted_and_none_reported_agrees():
    f, c = confirmations()
    assert c.start_probes(7, [("witness", (1, 5), HDR, set())])
    f.t += c.window + 1
    c.tick()
    assert f.conf[7]["verdict"] == "agrees" and "obeyed" not in f.conf[7]
    assert not c.start_probes(8, [("witness", (9, 9), HDR, set())])  # ingress not fuzzed
