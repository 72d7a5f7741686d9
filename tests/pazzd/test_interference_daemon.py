"""Interference between controller apps in a running pazzd: found at start-up from the rules
file, opened and resolved by FlowMods through the API, served by the API, pazzctl and the
metrics; each witness checked against the two entries it names."""

from __future__ import annotations

import json

import pytest

from cpc.ofctl import parse_flow, read_rules
from cpc.rules import FlowEntry
from pazzlab.demo import metrics_of as scrape

from .helpers import Pazzd, base_config, pazzctl, wait_for, write_config

APPS = [
    {"name": "router", "cookie": "0x10", "mask": "0xff"},
    {"name": "acl", "cookie": 0x20, "mask": 0xFF},
    {"name": "lb", "cookie": "0x30", "mask": "0xff"},
]


def open_findings(d) -> list[dict]:
    return d.call("findings", kind="interference", state="open")


def check_witness(f: dict) -> None:
    """Both entries match the witness, and the one the finding says wins has the higher
    priority (or, at equal priority, is the one the model picks)."""
    det = f["detail"]
    for side in ("a", "b"):
        e = det[side]
        m = parse_flow(f"priority={e['priority']},{e['match']}", 1, "delete").match
        assert m.contains(det["witness"], det["in_port"] or 0), f
    if det["relation"] != "same_priority":
        assert det["a"]["priority"] > det["b"]["priority"] and det["winner"] == "a", f


@pytest.fixture
def pazzd(tmp_path):
    cfg = base_config(tmp_path, apps=APPS)
    path = write_config(tmp_path / "pazzd.yaml", cfg)
    d = Pazzd(path)
    try:
        st = d.wait_ready()
        yield d, cfg, st
    finally:
        d.stop()


def test_interference_found_live(pazzd):
    d, cfg, st = pazzd
    entries = [e for e in read_rules(cfg["rules"]) if isinstance(e, FlowEntry)]
    # Each ACL line drops part of a route's headers on its switch: a partial override.
    expected = {
        (a.dpid, a.priority, str(a.match))
        for a in entries
        if a.cookie == 0x20
        for r in entries
        if r.cookie == 0x10 and r.dpid == a.dpid and r.match.overlaps(a.match)
    }
    assert expected
    found = wait_for(lambda: open_findings(d))
    got = {
        (f["detail"]["dpid"], f["detail"]["a"]["priority"], f["detail"]["a"]["match"])
        for f in found
    }
    assert got == expected, d.log_text()
    assert {(f["name"], f["detail"]["relation"]) for f in found} == {
        ("acl,router", "partial_override")
    }
    for f in found:
        check_witness(f)

    # A load balancer's more specific route at the router's priority: same-priority overlap.
    route = next(e for e in entries if e.cookie == 0x10 and e.dpid == 1)
    net, _ = route.match.get("ipv4_dst")
    lb = f"priority={route.priority},cookie=0x30,ip,nw_dst={net >> 24}.{net >> 16 & 255}.{net >> 8 & 255}.128/25"
    port = 2 if "output:2" not in str(route.instructions) else 3
    d.call("flowmod", switch="s1", flow=f"{lb},actions=output:{port}")
    new = wait_for(lambda: [f for f in open_findings(d) if f["name"] == "lb,router"])
    assert [f["detail"]["relation"] for f in new] == ["same_priority"], d.log_text()
    check_witness(new[0])
    m = scrape(st["metrics"])
    assert m['pazz_interference_findings{apps="lb,router",relation="same_priority"}'] == 1
    assert m['pazz_interference_findings{apps="acl,router",relation="partial_override"}'] == len(
        expected
    )
    assert m['pazz_interference_findings{apps="acl,lb",relation="shadowing"}'] == 0
    listing = json.loads(pazzctl(d.sock, "--json", "interference", "--app", "lb").stdout)
    assert [f["id"] for f in listing] == [new[0]["id"]]
    out = pazzctl(d.sock, "interference", "--open").stdout
    assert "same_priority" in out and "partial_override" in out

    # The load balancer takes its route back: resolved.
    d.call("flowmod", switch="s1", flow=lb, command="delete_strict")
    assert wait_for(lambda: not [f for f in open_findings(d) if f["name"] == "lb,router"])
    assert d.call("finding", id=new[0]["id"])["state"] == "resolved"


def test_bad_app_names_the_field(tmp_path):
    from pazzd.config import ConfigError, load_config

    for apps, msg in (
        ([{"name": "a", "cookie": 1}], r"apps\[0\]\.mask: required"),
        ([{"name": "a", "cookie": "0x1g", "mask": 1}], r"apps\[0\]\.cookie: must be an integer"),
        ([{"name": "a", "cookie": 2, "mask": 1}], r"apps\[0\]\.cookie: 0x2 has bits outside"),
        (APPS + [dict(APPS[0])], r"apps\[3\]\.name: 'router' is named twice"),
        ([{"name": "a", "cookie": 1, "mask": 1, "prio": 3}], r"apps\[0\]\.prio: unknown key"),
        (
            [{**APPS[0], "may_overwrite": ["acl", "nope"]}, APPS[1]],
            r"apps\[0\]\.may_overwrite\[1\]: no app named 'nope'",
        ),
        ([{**APPS[0], "may_overwrite": "acl"}], r"apps\[0\]\.may_overwrite: must be a list"),
    ):
        path = write_config(tmp_path / "pazzd.yaml", base_config(tmp_path, apps=apps))
        with pytest.raises(ConfigError, match=r"pazzd.yaml:\d+: " + msg):
            load_config(path)
    ok = [{**APPS[0], "may_overwrite": ["acl", "unknown"]}, APPS[1]]
    cfg = load_config(write_config(tmp_path / "pazzd.yaml", base_config(tmp_path, apps=ok)))
    assert cfg.overwrite_allowed == {("router", "acl"), ("router", "unknown")}
