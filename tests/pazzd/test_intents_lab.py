"""Intent checks on the lab: the os-ken controller app's own FlowMods (through pazzd's proxy,
to patched OVS) break policies; each is found with its witness, the witness probes are
judged by the tester, the guard keeps an enforced loop off the switches and the controller
gets the error; a PACKET_IN for a header with an installed path is a direct_paths finding.

Not on the lab: forgotten buffered packets (Open vSwitch 3.1 never buffers a PACKET_IN:
buffer_id is always NO_BUFFER); tests/pazzd/test_packetins.py covers that invariant."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from os_ken.ofproto import ofproto_v1_3 as ofp

from cpc.fields import parse_header
from pazzapi import call
from tests.pazzd.helpers import grid_lab, wait_for

pytestmark = [pytest.mark.ovs, pytest.mark.slow]

H1_NET, H4_NET = "10.0.0.0/24", "10.0.3.0/24"  # routed to h1 (s1:5) and h4 (s4:5)
# s1 east to s2, south to s4, west to s3, north to s1 again (grid ports: 1 N, 2 E, 3 S, 4 W)
RING = [(1, 2), (2, 3), (4, 4), (3, 1)]
LOOP = "priority=60000,ip,nw_dst=10.9.0.0/16"
REPLY = {
    "name": "reply-h1-h4",
    "check": "reply",
    "from": "s1:5",
    "to": "s4:5",
    "match": f"tcp,nw_src={H1_NET},nw_dst={H4_NET}",
}


class Controller:
    """The controller app's FlowMods, appended to the file it follows (--updates)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def send(self, *mods: tuple[int, str, str]) -> None:
        with self.path.open("a") as f:
            for dpid, flow, command in mods:
                f.write(json.dumps({"dpid": dpid, "flow": flow, "command": command}) + "\n")


@contextlib.contextmanager
def controlled_lab(tmp_path: Path, tag: str, **bring_up_kw):
    """grid_lab with the controller app following a file of FlowMods: yields (lab, run,
    Controller, workdir); bring_up_kw go to pazzlab.demo.bring_up (scaleout=2, say)."""
    updates = tmp_path / "updates.jsonl"
    updates.touch()
    kw = dict(updates=updates, fuzz_rate=200, resolve_after=8) | bring_up_kw
    with grid_lab(tag, **kw) as (lab, run, workdir):
        yield lab, run, Controller(updates), workdir


@pytest.fixture
def lab_run(tmp_path):
    with controlled_lab(tmp_path, "intents-lab") as out:
        yield out


def reload_with(run, intents: dict) -> None:
    cfg = yaml.safe_load(run.config.read_text())
    cfg["intents"] = intents
    run.config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    res = call(run.sock, "reload", timeout=20)
    assert res["ok"], res


def open_findings(sock: str) -> dict[str, dict]:
    return {f["name"]: f for f in call(sock, "findings", kind="intent", state="open")}


def confirmed(sock: str, fid: int) -> dict | None:
    conf = call(sock, "finding", id=fid)["confirmation"]
    return conf if conf and conf.get("verdict") != "probing" else None


def test_intent_findings_witnesses_guard_and_packet_ins(lab_run):
    lab, run, ctl, workdir = lab_run
    sock = run.sock
    reload_with(
        run,
        {
            "resolve_after": 5,
            "policies": [REPLY],
        },
    )
    assert open_findings(sock) == {}, "the generated network breaks no policy"

    # 1. The controller closes a forwarding loop for 10.9.0.0/16.
    ctl.send(*[(d, f"{LOOP},actions=output:{p}", "add") for d, p in RING])
    loop = wait_for(lambda: open_findings(sock).get("no_loops"))
    assert loop, call(sock, "findings", kind="intent")
    det = loop["detail"]
    assert parse_header(det["witness"])["ipv4_dst"] >> 16 == 0x0A09
    assert det["cause"]["source"] == "controller" and det["cause"]["xids"]
    assert any(o["kind"] == "loop" for o in det["paths"])
    conf = wait_for(lambda: confirmed(sock, loop["id"]), timeout=40)
    # The probes went round the ring: no exit reported them, as the model predicts.
    assert conf and conf["verdict"] == "agrees", conf
    ctl.send(*[(d, LOOP, "delete_strict") for d, _ in RING])
    assert wait_for(lambda: "no_loops" not in open_findings(sock))

    # 2. The same loop with the policy enforced: the FlowMod that closes it is refused.
    reload_with(
        run,
        {
            "resolve_after": 5,
            "policies": [{"name": "loops-enforced", "check": "loop_free", "enforce": True}],
        },
    )
    ctl.send(*[(d, f"{LOOP},actions=output:{p}", "add") for d, p in RING])
    log = workdir / "controller.log"
    # FLOW_MOD_FAILED / EPERM, os-ken's numbers: the controller app logs type and code
    err = f"error type {ofp.OFPET_FLOW_MOD_FAILED} code {ofp.OFPFMFC_EPERM}"
    refused = wait_for(lambda: err in log.read_text(errors="replace"))
    assert refused, (workdir / "pazzd.log").read_text()[-3000:]
    time.sleep(2.0)
    holding = [d for d, _ in RING if any("10.9.0.0/16" in f for f in lab.dump_flows(d))]
    assert len(holding) == 3, holding  # the last of the four never reached its switch
    assert "no_loops" not in open_findings(sock)
    ctl.send(*[(d, LOOP, "delete_strict") for d, _ in RING])

    # 3. An ACL on s4 drops h4's replies to h1: reply-h1-h4 breaks.
    reload_with(
        run,
        {
            "resolve_after": 5,
            "policies": [REPLY],
        },
    )
    drop = f"priority=5000,tcp,nw_src={H4_NET},nw_dst={H1_NET},actions=drop"
    ctl.send((4, drop, "add"))
    rep = wait_for(lambda: open_findings(sock).get("reply-h1-h4"))
    assert rep, call(sock, "findings", kind="intent")
    conf = wait_for(lambda: confirmed(sock, rep["id"]), timeout=40)
    assert conf, call(sock, "finding", id=rep["id"])
    by_probe = {p["probe"]: p for p in conf["probes"]}
    # The request probe left at s4:5 with the tags the model expects; the reply left nowhere.
    assert any(r["egress"] == "s4:5" and r["allowed"] for r in by_probe["witness"]["reports"])
    assert by_probe["reply"]["reports"] == [] and by_probe["reply"]["expected_exits"] == []
    assert conf["verdict"] == "agrees", conf
    ctl.send((4, drop.split(",actions")[0], "delete_strict"))
    assert wait_for(lambda: "reply-h1-h4" not in open_findings(sock))

    # 3b. The same ACL, lost by s4 behind the controller's back right after it was
    # installed: the reply probe arrives at h1 although the model drops it.
    ctl.send((4, drop, "add"))
    assert wait_for(lambda: any("nw_src=10.0.3.0/24" in f for f in lab.dump_flows(4)), every=0.05)
    lab.ofctl(4, "del-flows", "--strict", drop.split(",actions")[0])
    rep = wait_for(lambda: open_findings(sock).get("reply-h1-h4"))
    assert rep, call(sock, "findings", kind="intent")
    conf = wait_for(lambda: confirmed(sock, rep["id"]), timeout=60)
    assert conf and conf["verdict"] == "differs", conf
    by_probe = {p["probe"]: p for p in conf["probes"]}
    assert by_probe["reply"]["fate"] == "elsewhere", by_probe
    assert any(r["egress"] == "s1:5" and not r["allowed"] for r in by_probe["reply"]["reports"])
    ctl.send((4, drop.split(",actions")[0], "delete_strict"))
    assert wait_for(lambda: "reply-h1-h4" not in open_findings(sock))

    # 4. Behind the controller's back, s1 sends TCP port 7777 to the controller: h1's
    # packets for h4 arrive there as PACKET_INs although the intended path is installed.
    lab.ofctl(1, "add-flow", "priority=65000,tcp,tp_dst=7777,actions=controller")
    ns = lab.hosts["h1"]["ns"].name
    with contextlib.suppress(subprocess.SubprocessError):
        for _ in range(5):
            subprocess.run(
                ["ip", "netns", "exec", ns, "python3", "-c",
                 "import socket; s=socket.socket(); s.settimeout(0.3);"
                 f" s.connect_ex(('{lab.host_ip('h4')}', 7777))"],
                timeout=5, check=False,
            )  # fmt: skip
    direct = wait_for(lambda: open_findings(sock).get("direct_paths"))
    assert direct, call(sock, "findings", kind="intent")
    det = direct["detail"]
    w = parse_header(det["witness"])
    assert (w["tp_dst"], det["ingress"]) == (7777, "s1:5")
    assert all(o["kind"] == "egress" and o["egress"] == "s4:5" for o in det["paths"])
    lab.ofctl(1, "del-flows", "--strict", "priority=65000,tcp,tp_dst=7777")
