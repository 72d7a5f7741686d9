"""Interference between three real os-ken applications (examples/apps: router, acl, lb) on
the lab, through pazzd's proxy, MSAID's examples in kind: the filter drops part of the
router's flows, a load-balancer rule is shadowed by the filter, and the load balancer ties
with the router at one priority. Each is found live with a witness in both entries'
matches, and the witness is probed in the data plane (`obeyed` names the app).

Two set-ups: the three apps in one controller process, owned by cookie range; and two
controller processes (router and acl in one, lb in the other, its FlowMods without a
cookie of its own), every switch connected to both through the proxy, lb owned by its
connection. The second also renames an app with a config reload: the findings are
re-attributed without a restart."""

from __future__ import annotations

import ipaddress
import json

import pytest
import yaml

from pazzapi import call
from tests.pazzd.helpers import grid_lab, wait_for

pytestmark = [pytest.mark.ovs, pytest.mark.slow]

# The generator's ACL line on s4: h1's TCP 3389 to h4's prefix is dropped (cookie 0x20,
# priority 1000), over the route to h4 (cookie 0x10, priority 24, output:5).
ACL = "tcp,nw_src=10.0.0.0/24,nw_dst=10.0.3.0/24,tcp_dst=3389"


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


ROUTER = {"name": "router", "cookie": 0x10, "mask": 0xFF}
FILTER = {"name": "acl", "cookie": 0x20, "mask": 0xFF}
SHADOWED = f"priority=500,{ACL},actions=output:5"
TIED = "priority=24,ip,nw_dst=10.0.3.0/25,actions=output:1"


def probe(sock: str, fid: int) -> dict:
    conf = wait_for(lambda: confirmation(sock, fid), timeout=40)
    assert conf and "obeyed" in conf, conf
    return conf


def check_three(sock: str, updates, lb: str, lb_cookie: int, lab=None) -> None:
    """With lab: s4 loses the filter's drop behind the controller's back before lb's
    rules arrive, so that lb's shadowed entry wins in the data plane."""
    # 1. The filter's drop overrides part of the router's route on s4.
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
    conf = probe(sock, over[0]["id"])
    assert conf["verdict"] == "agrees" and conf["obeyed"] == "acl", conf

    # 2. lb's rules arrive live: one under the filter, one tied with the router.
    if lab is not None:
        lab.ofctl(4, "del-flows", "--strict", f"priority=1000,{ACL}")
    with updates.open("a") as f:
        for flow in (SHADOWED, TIED):
            f.write(json.dumps({"dpid": 4, "flow": flow, "command": "add"}) + "\n")
    pair = ",".join(sorted(("acl", lb)))
    shadow = wait_for(lambda: found(sock, pair, "shadowing"))
    assert shadow, call(sock, "findings", kind="interference")
    d = shadow[0]["detail"]
    assert d["b"]["owner"] == lb and int(d["b"]["cookie"], 16) == lb_cookie, d
    assert in_net(d["witness"]["ipv4_dst"], "10.0.3.0/24") and d["witness"]["tp_dst"] == 3389
    conf = probe(sock, shadow[0]["id"])
    if lab is None:
        assert conf["verdict"] == "agrees" and conf["obeyed"] == "acl", conf
    else:  # the data plane obeyed lb: its witness left at h4 with lb's tags
        assert conf["verdict"] == "differs" and conf["obeyed"] == "not acl", conf
        (p,) = conf["probes"]
        assert p["fate"] == "elsewhere"
        assert any(r["egress"] == "s4:5" and not r["allowed"] for r in p["reports"]), p

    pair = ",".join(sorted(("router", lb)))
    tie = wait_for(lambda: found(sock, pair, "same_priority"))
    assert tie, call(sock, "findings", kind="interference")
    assert in_net(tie[0]["detail"]["witness"]["ipv4_dst"], "10.0.3.0/25")
    probe(sock, tie[0]["id"])  # which entry OVS picks is its own choice; `obeyed` says


def test_three_apps_in_one_controller(tmp_path):
    updates = tmp_path / "lb.jsonl"
    updates.touch()
    apps = [ROUTER, FILTER, {"name": "lb", "cookie": 0x30, "mask": 0xFF}]
    with grid_lab(
        "apps-one",
        updates=updates,
        fuzz_rate=200,
        resolve_after=8,
        extra={"apps": apps},
        apps=[{"name": "main", "apps": "router,acl,lb"}],
    ) as (lab, run, workdir):
        check_three(run.sock, updates, "lb", 0x30, lab=lab)


def test_two_controllers_own_their_entries(tmp_path):
    updates = tmp_path / "lb.jsonl"
    updates.touch()
    apps = [ROUTER, FILTER, {"name": "lb", "controller": "lbctl"}]
    with grid_lab(
        "apps-two",
        updates=updates,
        fuzz_rate=200,
        resolve_after=8,
        extra={"apps": apps},
        apps=[
            {"name": "main", "apps": "router,acl"},
            {"name": "lbctl", "apps": "lb", "lb_cookie": 0},
        ],
    ) as (lab, run, workdir):
        sock = run.sock
        check_three(sock, updates, "lb", 0)
        # a reload renames the connection's app: the same findings, re-attributed
        cfg = yaml.safe_load(run.config.read_text())
        cfg["apps"][2]["name"] = "balancer"
        run.config.write_text(yaml.safe_dump(cfg, sort_keys=False))
        assert call(sock, "reload", timeout=30)["ok"]
        assert wait_for(lambda: found(sock, "acl,balancer", "shadowing"))
        assert wait_for(lambda: found(sock, "balancer,router", "same_priority"))
        assert not found(sock, "acl,lb", "shadowing")
