"""The fuzzer's probes as PACKET_OUTs through pazzd's proxy, on the lab: the 4-switch grid of
pazzlab.lab on patched OVS, the example os-ken controller installing the rules through the
proxy, production traffic at one packet a second per host, and no host interface for the
fuzzer (fuzz.inject empty). The probes enter each edge switch as packet-outs with in_port
the host's port: the switches' sFlow samples (1 in 1) must count more packets than the
probes sent, far more than the traffic alone gives, and every report at an exit port must
carry the tags the model expects (no fault). Most probes aim at headers the model drops
(S_e - S_i), so few of them reach an exit; with raw sockets (fuzz.inject) the same run
gives as many samples and reports."""

from __future__ import annotations

import json
import time

import pytest
import yaml

from .helpers import grid_lab, pazzctl

pytestmark = pytest.mark.ovs

PPS = 1  # production traffic per host


def test_fuzz_probes_by_packet_out_on_the_lab():
    with grid_lab(
        "lab-packet-out",
        pps=PPS,
        fuzz_rate=200.0,
        resolve_after=30.0,
        settle=1.5,
        fuzz_inject=False,
    ) as (lab, run, _):
        assert yaml.safe_load(run.config.read_text())["fuzz"]["inject"] == {}
        status = lambda: json.loads(pazzctl(run.sock, "status", "--json").stdout)  # noqa: E731
        s0, t0 = status(), time.monotonic()
        time.sleep(10)
        s1, t1 = status(), time.monotonic()
        probes = s1["fuzz"]["probes_sent_total"] - s0["fuzz"]["probes_sent_total"]
        seen = s1["tester"]["ingress_samples"] - s0["tester"]["ingress_samples"]
        reports = s1["tester"]["reports"] - s0["tester"]["reports"]
        # sampling 1 in 1: every packet is sampled where it enters a switch
        traffic_bound = (t1 - t0 + 2) * PPS * len(lab.hosts) * len(lab.topo.switches)
        assert probes >= 1000, s1["fuzz"]
        assert seen > probes > traffic_bound, (seen, probes, traffic_bound, s1["tester"])
        assert reports > 0
        assert s1["tester"]["consistent"] - s0["tester"]["consistent"] == reports, s1["tester"]
        assert json.loads(pazzctl(run.sock, "faults", "--json").stdout) == []
