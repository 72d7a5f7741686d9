"""A config reload applies a changed apps section: findings are re-attributed (same ids,
new owners), resolve when no two owners are left, and come back with the apps; a change of
the controllers or of the sampling rate only warns (it takes a restart)."""

from __future__ import annotations

from cpc.ofctl import read_rules
from cpc.rules import FlowEntry

from .helpers import Pazzd, base_config, wait_for, write_config

ROUTER = {"name": "router", "cookie": 0x10, "mask": 0xFF}


def names(d) -> dict[int, str]:
    return {f["id"]: f["name"] for f in d.call("findings", kind="interference", state="open")}


def reload(d, path, cfg) -> None:
    write_config(path, cfg)
    assert d.call("reload", timeout=30)["ok"]


def test_reload_reattributes_and_resolves(tmp_path):
    cfg = base_config(tmp_path, apps=[ROUTER, {"name": "acl", "cookie": 0x20, "mask": 0xFF}])
    path = write_config(tmp_path / "pazzd.yaml", cfg)
    d = Pazzd(path)
    try:
        d.wait_ready()
        entries = [e for e in read_rules(cfg["rules"]) if isinstance(e, FlowEntry)]
        acls = [e for e in entries if e.cookie == 0x20]
        # every ACL line meets a route of its switch (the generator puts them on routes)
        assert acls and all(
            any(
                r.cookie == 0x10 and r.dpid == a.dpid and r.match.overlaps(a.match) for r in entries
            )
            for a in acls
        )
        before = wait_for(lambda: names(d))
        assert before and set(before.values()) == {"acl,router"}, before

        cfg["apps"] = [ROUTER, {"name": "filter", "cookie": 0x20, "mask": 0xFF}]
        reload(d, path, cfg)
        assert names(d) == {i: "filter,router" for i in before}

        cfg["apps"] = [ROUTER]  # the ACL lines belong to no app now: "unknown"
        reload(d, path, cfg)
        assert names(d) == {i: "router,unknown" for i in before}

        cfg["apps"] = []
        reload(d, path, cfg)
        assert names(d) == {}

        cfg["apps"] = [ROUTER, {"name": "acl", "cookie": 0x20, "mask": 0xFF}]
        reload(d, path, cfg)
        assert names(d) == before  # reopened, the same findings

        cfg["controller"] = {
            "address": "127.0.0.1:6633",
            "controllers": [{"address": "127.0.0.1:7001", "name": "x"}],
        }
        reload(d, path, cfg)
        assert "controllers changed; it takes effect at the next restart" in d.log_text()

        cfg["sflow"] = {**cfg["sflow"], "sampling_rate": 100}
        reload(d, path, cfg)
        assert "sampling_rate changed; it takes effect at the next restart" in d.log_text()
    finally:
        d.stop()
