"""Interference on the lab, MSAID's examples in kind: the os-ken controller app installs the
generator's routes (cookie 0x10, the `router` app) and ACL lines (0x20, `acl`) through
pazzd's proxy, and a third app (`lb`, cookie 0x30) pushes its own FlowMods through the same
controller: one app's flows dropped by another's rule, a rule shadowed by a filter, and a
same-priority overlap. Each is found live with a witness in both entries' matches, and the
witness is probed in the data plane."""

from __future__ import annotations

import ipaddress
import json

import pytest

from pazzd.api import call
from tests.daemon.helpers import grid_lab, wait_for

pytestmark = [pytest.mark.ovs, pytest.mark.slow]

APPS = [
    {"name": "router", "cookie": 0x10, "mask": 0xFF},
    {"name": "acl", "cookie": 0x20, "mask": 0xFF},
    {"name": "lb", "cookie": 0x30, "mask": 0xFF},
]
# The generator's ACL line on s4: h1's TCP 3389 to h4's prefix is dropped (cookie 0x20,
# priority 1000), over the route to h4 (cookie 0x10, priority 24, output:5).
ACL = "tcp,nw_src=10.0.0.0/24,nw_dst=10.0.3.0/24,tcp_dst=3389"
SHADOWED = f"priority=500,cookie=0x30,{ACL},actions=output:5"
TIED = "priority=24,cookie=0x30,ip,nw_dst=10.0.3.0/25,actions=output:1"


def found(sock: str, apps: str, relation: str, dpid: int = 4) -> list[dict]:
    return [
        f
        for f in call(sock, "findings", kind="interference", state="open")
        if f["name"] == apps and f["detail"]["relation"] == relation and f["detail"]["dpid"] == dpid
    ]


def in_net(addr: int, net: str) -> bool:
    return ipaddress.IPv4Address(addr) in ipaddress.IPv4Network(net)


def confirmation(sock: str, fid: int) -> dict | None:
    conf = call(sock, "finding", id=fid)["confirmation"]
    return conf if conf and conf.get("verdict") != "probing" else None


def test_three_apps_interfere_live(tmp_path):
    updates = tmp_path / "updates.jsonl"
    updates.touch()
    with grid_lab(
        "interference-lab",
        updates=updates,
        fuzz_rate=200,
        resolve_after=8,
        extra={"apps": APPS},
    ) as (lab, run, workdir):
        sock = run.sock
        # 1. The ACL app's drop overrides part of the router's route on s4.
        over = wait_for(
            lambda: [
                f
                for f in found(sock, "acl,router", "partial_override")
                if "3389" in json.dumps(f["detail"])
            ]
        )
        assert over, call(sock, "findings", kind="interference")
        d = over[0]["detail"]
        w = d["witness"]
        assert in_net(w["ipv4_dst"], "10.0.3.0/24") and in_net(w["ipv4_src"], "10.0.0.0/24")
        assert (w["ip_proto"], w["tp_dst"]) == (6, 3389)
        assert d[d["winner"]]["owner"] == "acl"
        conf = wait_for(lambda: confirmation(sock, over[0]["id"]), timeout=40)
        # the witness is dropped at s4, as the model says: no exit reports it
        assert conf and conf["verdict"] == "agrees" and conf["obeyed"] == "acl", conf

        # 2. The lb app's rule under the filter never takes effect; its tie with the router
        # leaves the outcome to the switch.
        with updates.open("a") as f:
            for flow in (SHADOWED, TIED):
                f.write(json.dumps({"dpid": 4, "flow": flow, "command": "add"}) + "\n")
        shadow = wait_for(lambda: found(sock, "acl,lb", "shadowing"))
        assert shadow, call(sock, "findings", kind="interference")
        w = shadow[0]["detail"]["witness"]
        assert in_net(w["ipv4_dst"], "10.0.3.0/24") and w["tp_dst"] == 3389
        tie = wait_for(lambda: found(sock, "lb,router", "same_priority"))
        assert tie, call(sock, "findings", kind="interference")
        w = tie[0]["detail"]["witness"]
        assert in_net(w["ipv4_dst"], "10.0.3.0/25")
        conf = wait_for(lambda: confirmation(sock, tie[0]["id"]), timeout=40)
        assert conf and "obeyed" in conf, conf  # which one OVS picks is its own choice
        out = call(sock, "findings", kind="interference", state="open")
        assert {f["name"] for f in out} >= {"acl,router", "acl,lb", "lb,router"}
