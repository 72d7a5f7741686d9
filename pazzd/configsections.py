"""The sections of pazzd's config that take more than typed values: intents and their
policies, controller applications, the controllers, the sFlow agents, and the deep checks
of check-config (the rule file, the database)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from cpc import agents
from cpc.intents import KINDS, Policy
from cpc.interference import UNKNOWN, App, Apps
from cpc.ofctl import read_rules
from cpc.rules import Group, ModelError
from cpc.topology import Topology, TopologyError

from .configread import Reader, as_int, read_match, read_ports
from .proxy.proxy import Controller, ProxyConfig

if TYPE_CHECKING:
    from .config import Config

__all__ = [
    "check_database",
    "check_rules",
    "controller_names",
    "read_agents",
    "read_apps",
    "read_controllers",
    "read_intents",
    "read_tls",
]

POLICY_KEYS = {"name", "check", "from", "to", "via", "match", "enforce"}


def read_agents(r: Reader, sec, cfg: Config) -> None:
    """agents (sec: the section, its option() fields read)."""
    g = sec.get("group_twice", "refuse")
    if g not in ("refuse", "warn"):
        r.fail(sec, "group_twice", "agents.group_twice", f"must be refuse or warn, not {g!r}")
    cfg.agents.group_twice = g


def read_intents(r: Reader, sec, topo: Topology, cfg: Config) -> None:
    """intents (sec: the section, its option() fields read): its policies."""
    pols: list[Policy] = []
    if r.typed(sec, "no_loops", "intents.no_loops", bool, True):
        pols.append(Policy("no_loops", "loop_free"))
    nb = sec.get("no_blackholes", False)
    if nb is True:
        pols.append(Policy("no_blackholes", "blackhole_free"))
    elif isinstance(nb, dict):
        bad = sorted(str(k) for k in nb if k not in {"from", "match"})
        if bad:
            r.fail(nb, bad[0], f"intents.no_blackholes.{bad[0]}", "unknown key")
        src = read_ports(r, topo, nb, "from", "intents.no_blackholes.from") if "from" in nb else ()
        match = read_match(r, nb, "match", "intents.no_blackholes.match")
        pols.append(Policy("no_blackholes", "blackhole_free", src=src, match=match))
    elif nb not in (False, None):
        r.fail(
            sec, "no_blackholes", "intents.no_blackholes", "must be true, false or {from, match}"
        )
    names = {p.name for p in pols}
    items = r.items(sec, "policies", "intents.policies")
    for i, e in enumerate(items):
        d = f"intents.policies[{i}]"
        if not isinstance(e, dict):
            r.fail(items, i, d, "must be a mapping {name, check, from, to, match}")
        bad = sorted(str(k) for k in e if k not in POLICY_KEYS)
        if bad:
            r.fail(e, bad[0], f"{d}.{bad[0]}", "unknown key")
        for k in ("name", "check"):
            if k not in e:
                r.fail(items, i, f"{d}.{k}", "required key missing")
        name, check = str(e["name"]), e["check"]
        if name in names:
            r.fail(e, "name", f"{d}.name", f"duplicate policy name {name!r}")
        names.add(name)
        if check not in KINDS:
            r.fail(e, "check", f"{d}.check", f"must be one of {', '.join(KINDS)}, not {check!r}")
        needs = ["from", "to"] if check not in ("loop_free", "blackhole_free") else []
        if check == "waypoint":
            needs.append("via")
        for k in needs:
            if k not in e:
                r.fail(e, "check", f"{d}.{k}", f"required for a {check} policy")
        src = read_ports(r, topo, e, "from", f"{d}.from") if "from" in e else ()
        dst = None
        if "to" in e:
            (dst,) = read_ports(r, topo, e, "to", f"{d}.to")
        via = set()
        vs = e.get("via") or []
        for j, sw in enumerate(vs if isinstance(vs, list) else [vs]):
            try:
                via.add(topo.resolve_switch(str(sw)))
            except TopologyError as ex:
                r.fail(e, "via", f"{d}.via[{j}]", str(ex))
        match = read_match(r, e, "match", f"{d}.match")
        enforce = r.typed(e, "enforce", f"{d}.enforce", bool, False)
        pols.append(Policy(name, check, src, dst, match, frozenset(via), enforce))
    cfg.intents.policies = pols


def read_apps(r: Reader, doc, cfg: Config) -> None:
    items = r.items(doc, "apps", "apps")
    apps = []
    for i, e in enumerate(items):
        d = f"apps[{i}]"
        if not isinstance(e, dict):
            r.fail(items, i, d, "must be a mapping {name, cookie, mask, controller, may_overwrite}")
        keys = {"name", "cookie", "mask", "controller", "may_overwrite"}
        bad = sorted(str(k) for k in e if k not in keys)
        if bad:
            r.fail(e, bad[0], f"{d}.{bad[0]}", "unknown key")
        need = ("name", "cookie", "mask") if "controller" not in e or "cookie" in e else ("name",)
        for k in need + (("cookie",) if "mask" in e else ()):
            if k not in e:
                r.fail(items, i, f"{d}.{k}", "required key missing")
        vals = {}
        for k in ("cookie", "mask"):
            if k not in e:
                continue
            try:
                vals[k] = as_int(e[k])
            except ValueError:
                r.fail(e, k, f"{d}.{k}", f"must be an integer (0x... for hex), not {e[k]!r}")
        ctl = e.get("controller")
        if ctl is not None:
            names = controller_names(cfg)
            if str(ctl) not in names:
                r.fail(
                    e,
                    "controller",
                    f"{d}.controller",
                    f"no controller named {ctl!r} (controllers: {', '.join(names)})",
                )
            ctl = str(ctl)
        apps.append(App(str(e["name"]), vals.get("cookie"), vals.get("mask"), ctl))
    try:
        Apps(apps)
    except ModelError as ex:  # names the field: apps[i].name, .cookie or .mask
        where, _, msg = str(ex).partition(": ")
        i = int(where[5 : where.index("]")])
        key = where.rsplit(".", 1)[1] if "." in where else "name"
        r.fail(items[i], key, where, msg)
    cfg.apps = apps
    cfg.overwrite_allowed = set()
    names = {a.name for a in apps} | {UNKNOWN}
    for i, e in enumerate(items):
        may = e.get("may_overwrite", [])
        if not isinstance(may, list):
            r.fail(e, "may_overwrite", f"apps[{i}].may_overwrite", "must be a list of app names")
        for j, other in enumerate(may):
            if str(other) not in names:
                r.fail(
                    may,
                    j,
                    f"apps[{i}].may_overwrite[{j}]",
                    f"no app named {other!r} (apps: {', '.join(sorted(names))})",
                )
            cfg.overwrite_allowed.add((str(e["name"]), str(other)))


def read_controllers(r: Reader, c, pc: ProxyConfig, rel) -> None:
    """controller.name and controller.controllers into pc: the default controller is
    controller.address (named controller.name), or the first of the list when neither is
    given."""
    if c.get("name") is not None and not isinstance(c["name"], str):
        r.fail(c, "name", "controller.name", "must be a string")
    items = r.items(c, "controllers", "controller.controllers") if c.get("controllers") else []
    more = []
    for i, e in enumerate(items):
        d = f"controller.controllers[{i}]"
        if not isinstance(e, dict):
            r.fail(items, i, d, "must be a mapping {address, name, upstream_tls}")
        bad = sorted(str(k) for k in e if k not in {"address", "name", "upstream_tls"})
        if bad:
            r.fail(e, bad[0], f"{d}.{bad[0]}", "unknown key")
        if e.get("address") is None:
            r.fail(items, i, f"{d}.address", "required key missing")
        host, port = r.address(e, "address", f"{d}.address", ("127.0.0.1", 6633))
        name = e.get("name")
        if name is not None and (not isinstance(name, str) or not name):
            r.fail(e, "name", f"{d}.name", "must be a non-empty string")
        tls = read_tls(r, e, "upstream_tls", d, ("ca",), rel) if e.get("upstream_tls") else None
        more.append((Controller(host, port, name or "", tls=tls), e, d))
    if more and c.get("address") is None and c.get("name") is None:  # the first is the default
        first = more.pop(0)[0]
        pc.controller_host, pc.controller_port = first.host, first.port
        pc.controller_name = first.name
        pc.upstream_tls = first.tls or pc.upstream_tls
    else:
        pc.controller_name = str(c.get("name") or "")
    seen = {pc.upstreams()[0].name}
    for ctl, e, d in more:
        if ctl.name in seen:
            key = "name" if "name" in e else "address"
            r.fail(e, key, f"{d}.{key}", f"controller {ctl.name!r} is named twice")
        seen.add(ctl.name)
    pc.controllers = [ctl for ctl, _, _ in more]


def controller_names(cfg: Config) -> list[str]:
    """The names of the configured controllers, the default first."""
    return [u.name for u in cfg.controller.upstreams()]


def read_tls(r: Reader, c, key: str, where: str, need, rel) -> dict:
    """A TLS section (cert, key, ca; server_hostname) with its files checked."""
    t = r.section(c, key, f"{where}.{key}")
    tls = {}
    for k in ("cert", "key", "ca"):
        if t.get(k) is None:
            if k in need:
                r.fail(c, key, f"{where}.{key}.{k}", "required key missing")
            continue
        if not isinstance(t[k], str):
            r.fail(t, k, f"{where}.{key}.{k}", "must be a file path")
        tls[k] = rel(t[k])
        if not Path(tls[k]).is_file():
            r.fail(t, k, f"{where}.{key}.{k}", f"{tls[k]}: no such file")
    if ("cert" in tls) != ("key" in tls):
        r.fail(c, key, f"{where}.{key}", "cert and key go together")
    if t.get("server_hostname") is not None:
        tls["server_hostname"] = str(t["server_hostname"])
    return tls


def check_rules(r: Reader, doc, cfg: Config) -> None:
    """Parse the rule file and check that its switches are the topology's."""
    if cfg.rules is None:
        return
    items = []
    try:
        for it in read_rules(cfg.rules):
            if it.dpid not in cfg.topology.switches:
                where = f"{it.source}: " if getattr(it, "source", "") else ""
                raise ModelError(f"{where}switch dpid {it.dpid} is not in the topology")
            items.append(it)
    except ModelError as e:
        r.fail(doc, "rules", "rules", str(e))
    entries = [it for it in items if not isinstance(it, Group)]
    groups = [it for it in items if isinstance(it, Group)]
    cfg.agent_warnings = [str(w) for w in agents.lint(entries, groups)]


def check_database(r: Reader, doc, cfg: Config) -> None:
    """An existing fault database must be one SQLite can read."""
    db = cfg.database
    if db == ":memory:" or not Path(db).exists():
        return
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            ok = con.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error as e:
        ok = str(e)
    if ok != "ok":
        r.fail(
            doc,
            "database",
            "database",
            f"{db} is not a readable fault database ({ok}); move it away and pazzd "
            "starts with an empty one",
        )
