"""pazzctl: the operator's command line.

    pazzctl trace --topology T.yaml --rules R --in h1 --header 'tcp,nw_dst=10.0.1.5,tp_dst=80'
    pazzctl reach --topology T.yaml --rules R --from s1:5 --to h2 [--verbose]
    pazzctl trace --in s1:5 --header ...      # without --topology/--rules: the live model
    pazzctl status | faults [--open] [--since ID] [--follow] | faults show ID | localize ID
    pazzctl findings [--kind K] | findings show ID | reload | ui-url | check-config FILE

pazzctl reaches pazzd over its Unix socket (--socket, $PAZZ_SOCKET, default
/run/pazz/pazzd.sock). The global flags (--socket, --json) go before or after the
subcommand. Headers are ovs-ofctl matches with exact values (`tcp,nw_dst=10.0.1.5,
tp_dst=80`); ports are SWITCH:PORT (a switch name or dpid) or a host's name from the
topology's edge ports.

Exit status, the same with and without --json, with files and against pazzd: 0 success;
1 pazzd cannot be reached, failed, or answered with a failure (a reload that failed, a
localization that found nothing); 2 an input error: a bad flag, header, port, host,
switch or ID, or a bad file; 3 a reload that took effect with warnings (a switch's sFlow
ifIndex map could not be read again: the old one stays in force and is retried). pazzd's API tells the two kinds of error apart (the reply's
code, pazzapi.framing). Errors go to stderr: a sentence, or with --json one object
{"error": ..., "status": ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from cpc.model import Model
from cpc.rules import ModelError
from cpc.spacesummary import count_text
from cpc.topology import Topology, TopologyError, load_topology
from pazzapi import ApiError, InputError, call

from . import answers, version
from .config import ConfigError, load_config
from .faulttext import event_line, fault_rows, fault_text, no_finding_text
from .portnames import PortNames
from .records import outcomes_text, record_from_json, table_text, when

DEFAULT_SOCKET = "/run/pazz/pazzd.sock"


class CliError(Exception):
    """A usage or input error (exit status 2)."""


class Failure(Exception):
    """pazzd answered, and the answer is a failure (exit status 1); the output is printed."""


def _live(args) -> bool:
    if args.topology is None and args.rules is None:
        return True
    if args.topology is None or args.rules is None:
        raise CliError("give both --topology and --rules, or neither (the live model)")
    return False


def _load(args) -> tuple[Topology, Model]:
    topo = load_topology(args.topology)
    model = Model(topo)
    model.load_rules(args.rules)
    return topo, model


# The options that carry the arguments of trace and reach (pazzd.answers.QueryError.arg).
OPTION_OF = {"ingress": "--in", "header": "--header", "src": "--from", "dst": "--to"}


def _answer(fn, *args):
    """pazzd.answers' answer from a model loaded from files; a bad argument is a usage
    error that names the option."""
    try:
        return fn(*args)
    except answers.QueryError as e:
        raise CliError(f"{OPTION_OF[e.arg]}: {e.reason}") from None


def _live_answer(args, cmd: str, **kw):
    """pazzd's answer to trace or reach; a bad argument is named by its option, as in file
    mode (pazzd names it as the API request does: `ingress: ...`)."""
    try:
        return _call(args, cmd, **kw)
    except InputError as e:
        arg, sep, reason = str(e).partition(": ")
        if sep and arg in OPTION_OF:
            raise CliError(f"{OPTION_OF[arg]}: {reason}") from None
        raise


def _names(args, topo: Topology | None = None) -> PortNames:
    """The ports' names: from the topology file, or pazzd's topology."""
    return PortNames.of(topo) if topo is not None else PortNames(_call(args, "topology"))


def _fuzz_line(fz: dict | None) -> str:
    """The status line of the fuzzer: areas probed lately and the detection bound."""
    if not fz:
        return "off"
    if fz.get("error"):
        return f"error: {fz['error']}"
    line = (
        f"{fz.get('probes_sent_total') or 0} probes; {fz.get('areas_recent') or 0} of "
        f"{fz.get('areas') or 0} areas probed in the last {fz.get('window_s') or 0:g} s"
    )
    bound = fz.get("expected_detect_s_1_256")
    if bound is not None:
        line += f"; a hidden rule in 1/256 of an area: first probe in {bound:.0f} s expected"
    return line


def cmd_trace(args) -> int:
    if _live(args):
        res = _live_answer(args, "trace", ingress=args.ingress, header=args.header)
        names = None if args.json else _names(args)
    else:
        topo, model = _load(args)
        res = _answer(answers.trace, topo, model, args.ingress, args.header)
        names = PortNames.of(topo)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"Flow: {res['flow']}")
    print(f"in:   {names.named(res['ingress'])}\n")
    print(outcomes_text(res["outcomes"], names))
    return 0


def cmd_reach(args) -> int:
    if _live(args):
        res = _live_answer(args, "reach", src=args.src, dst=args.dst, limit=args.limit)
        names = None if args.json else _names(args)
    else:
        topo, model = _load(args)
        res = _answer(answers.reach, topo, model, args.src, args.dst, args.limit)
        names = PortNames.of(topo)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(reach_text(res, names, args.verbose, args.limit))
    return 0


def reach_text(res: dict, names: PortNames, verbose: bool, limit: int) -> str:
    """The summary of a reach answer: its size, then its groups by destination (the
    headers of one match, less its exceptions); the cubes themselves under --verbose."""
    sm = res["summary"]
    head = f"{names.named(res['from'])} -> {names.named(res['to'])}: "
    if not res["headers"]:
        return head + "no header is delivered"
    n = len(sm["groups"]) + sm["more_groups"]
    out = [
        head + f"{count_text(res['headers'])} headers in {n} group{'s' if n != 1 else ''} "
        "by destination"
    ]
    rows = [("nw_dst", "headers", "match", "except")]
    for g in sm["groups"]:
        ex = g["except"] + ([f"... {g['more_except']} more"] if g["more_except"] else [])
        rows.append((g["nw_dst"], count_text(g["headers"]), g["match"], ex[0] if ex else ""))
        rows += [("", "", "", x) for x in ex[1:]]
    out.append(table_text(rows))
    if sm["more_groups"]:
        out.append(f"  ... {sm['more_groups']} more groups (raise --limit above {limit})")
    if not sm["complete"]:
        out.append("  (more destinations than the summary looks at: the groups cover the first)")
    if verbose:
        out.append(f"\nthe header space as {len(res['cubes'])} disjoint matches:")
        out += [f"  {c}" for c in res["cubes"]]
        if res["truncated"]:
            out.append(f"  ... more (raise --limit above {limit})")
    elif res["cubes"]:
        out.append("(--verbose lists the header space as disjoint matches)")
    return "\n".join(out)


def _call(args, cmd: str, **kw):
    return call(args.socket, cmd, **kw)


def cmd_status(args) -> int:
    st = _call(args, "status")
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    m, t = st["model"], st["tester"]
    rows = [
        ("pazzd", f"pid {st['pid']}, up {st['uptime_s']} s, config {st['config']}"),
        ("config", st["config_error"] or f"ok ({st['config_reloads']} reloads)"),
        (
            "model",
            f"{m['rules']} rules, {m['classes']} classes, version {m['version']}, "
            f"{m['switches']} switches, {m['edge_ports']} edge ports",
        ),
        ("controller", st["controller"]),
        ("ifIndex map", _ifmap_line(st.get("ifmap"))),
        (
            "sFlow",
            f"{st['sflow']}: {t.get('datagrams', 0)} datagrams, {t.get('malformed', 0)} "
            f"malformed, {t.get('lost_datagrams', 0)} lost, "
            f"{t.get('samples_implausible', 0)} implausible samples, "
            f"{t.get('samples_repeated', 0)} repeated",
        ),
        (
            "reports",
            f"{t.get('reports', 0)} judged: {t.get('consistent', 0)} consistent, "
            f"{t.get('fault_samples', 0)} faulty, {t.get('held_transient', 0)} held",
        ),
        ("faults open", ", ".join(f"{k}={v}" for k, v in st["faults_open"].items())),
        ("fuzz", _fuzz_line(st["fuzz"])),
        ("metrics", st["metrics"]),
        ("web view", st.get("ui") or "off (ui.enabled)"),
    ]
    workers = st.get("tester_workers")
    if workers:
        alive = sum(1 for x in workers if x["alive"])
        per = ", ".join(f"#{x['index']} {x['datagrams']} dgrams" for x in workers)
        rows.insert(
            5,
            (
                "workers",
                f"{alive}/{len(workers)} alive, {t.get('worker_restarts', 0)} restarts: {per}",
            ),
        )
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k.ljust(w)}  {v}")
    return 0


def _ifmap_line(m: dict | None) -> str:
    if not m:
        return "?"
    out = f"{m['interfaces']} interfaces"
    for s in m["stale"]:
        age = "never read" if s["map_age_s"] is None else f"read {s['map_age_s']:.0f} s ago"
        out += (
            f"; STALE {','.join(s['switches'])} ({age}, OVSDB {s['ovsdb']} failing for "
            f"{s['failed_for_s']:.0f} s, {s['attempts']} tries, next in "
            f"{s['next_retry_s']:.0f} s: {s['error']})"
        )
    return out


FOLLOW_EVERY = 1.0  # seconds between polls of `faults --follow`: one request each


def cmd_faults(args) -> int:
    if args.action == "show":
        if args.id is None:
            raise CliError("faults show needs a fault ID")
        f = _call(args, "fault", id=args.id)
        if args.json:
            print(json.dumps(f, indent=2))
            return 0
        print("\n".join(fault_text(f, _names(args))))
        return 0
    if args.action is not None:
        raise CliError(f"unknown faults action {args.action!r} (use: faults show ID)")
    if args.id is not None:
        raise CliError(f"faults takes an ID only with show (faults show {args.id})")
    if args.follow:
        return follow_faults(args)
    faults = _call(args, "faults", state="open" if args.open else None, since=args.since)
    if args.json:
        print(json.dumps(faults, indent=2))
        return 0
    _table(fault_rows(faults, _names(args)), empty="no faults")
    unsaved = sum(1 for f in faults if not f.get("saved", True))
    if unsaved:
        print(
            f"{unsaved} fault(s) unsaved: the fault store fails (disk full?), they wait in "
            "pazzd's memory and are stored when it has room again"
        )
    return 0


def _changes(known: dict, f: dict) -> list[str]:
    """What happened to fault f since it was seen as known[id] (state, reopened)."""
    prev = known.get(f["id"])
    now = (f["state"], f["reopened"])
    known[f["id"]] = now
    if prev is None:
        return ["opened"] + (["resolved"] if f["state"] == "resolved" else [])
    if prev == now:
        return []
    if now[1] != prev[1]:
        return ["reopened"] + (["resolved"] if f["state"] == "resolved" else [])
    return [f["state"] if f["state"] == "resolved" else "reopened"]


def follow_faults(args, sleep=time.sleep) -> int:
    """Print faults as they open, resolve and reopen, one line each (with --json, one
    object per line), until interrupted. Polls pazzd once a second for the faults seen
    or resolved since the latest time it has seen; --since ID first prints the faults
    above ID."""
    names = None if args.json else _names(args)
    known: dict[int, tuple] = {}
    cursor = 0.0

    def emit(rows, quiet: bool) -> None:
        nonlocal cursor
        for f in rows:
            if f["id"] is None:  # waiting for the store: followed once it has an id
                continue
            cursor = max(cursor, f["last_seen"] or 0, f.get("resolved_at") or 0)
            for ev in _changes(known, f):
                if quiet:
                    continue
                if args.json:
                    print(json.dumps({"event": ev, "fault": f}), flush=True)
                else:
                    print(event_line(ev, f, names), flush=True)

    try:
        if args.since is None:
            emit(_call(args, "faults"), quiet=True)  # what is there already
        else:
            emit(_call(args, "faults", since=args.since), quiet=False)
        while True:
            sleep(FOLLOW_EVERY)
            emit(_call(args, "faults", changed_since=cursor, since=args.since), quiet=False)
    except KeyboardInterrupt:
        return 0


def cmd_findings(args) -> int:
    """Findings of every kind (intent, interference, agent), or `findings show ID`."""
    if args.action == "show":
        if args.id is None:
            raise CliError("findings show needs a finding ID")
        f = _call(args, "finding", id=args.id)
        if args.json:
            print(json.dumps(f, indent=2))
        else:
            print(record_from_json(f).text(_names(args)))
        return 0
    found = _call(args, "findings", kind=args.kind, state="open" if args.open else None)
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    rows = [("id", "kind", "state", "severity", "first seen", "finding")]
    rows += [
        (
            str(f["id"]),
            f["kind"],
            f["state"],
            f["severity"],
            when(f["first_seen"]),
            f["summary"][:80],
        )
        for f in found
    ]
    _table(rows, empty="no findings")
    return 0


def _finding_to_show(args, kind: str) -> dict | None:
    """`pazzctl KIND show ID`: the finding to print, or None once printed as JSON."""
    if args.id is None:
        raise CliError(f"{kind}s show needs a finding ID")
    f = _call(args, "finding", id=args.id)
    if f["kind"] != kind:
        raise CliError(
            f"finding {args.id} is a {f['kind']} finding, not an {kind} finding "
            f"(pazzctl findings show {args.id})"
        )
    if args.json:
        print(json.dumps(f, indent=2))
        return None
    return f


def _findings_to_list(args, kind: str) -> list | None:
    """`pazzctl KIND [--open]`: the findings to tabulate, or None once printed as JSON."""
    if args.action is not None:
        raise CliError(f"unknown {kind}s action {args.action!r} (use: {kind}s show ID)")
    found = _call(args, "findings", kind=kind, state="open" if args.open else None)
    if args.json:
        print(json.dumps(found, indent=2))
        return None
    return found


def cmd_intents(args) -> int:
    """Intent findings: the intended state breaks a policy (pazzd.findings)."""
    if args.action == "show":
        f = _finding_to_show(args, "intent")
        if f is not None:
            print(record_from_json(f).text(_names(args)))
        return 0
    found = _findings_to_list(args, "intent")
    if found is not None:
        _findings_table(found, ("policy", "data plane"), 70, "no intent findings")
    return 0


def _findings_table(found, heads: tuple[str, str], width: int, empty: str) -> None:
    """One row per finding: id, state, its name (heads[0]), first seen, the record's own
    column (heads[1]) and the summary cut to width."""
    rows = [("id", "state", heads[0], "first seen", heads[1], "finding")]
    for f in found:
        rows.append((*record_from_json(f).row(), f["summary"][:width]))
    _table(rows, empty=empty)


def cmd_agents(args) -> int:
    """Agent findings: a switch accepted an entry and forwards otherwise (pazzd.entries)."""
    if args.action == "show":
        f = _finding_to_show(args, "agent")
        if f is not None:
            print(record_from_json(f).text(_names(args)))
        return 0
    found = _findings_to_list(args, "agent")
    if found is not None:
        _findings_table(found, ("switch", "reason"), 80, "no agent findings")
    return 0


def cmd_interference(args) -> int:
    """Interference findings: entries of two controller apps that meet, and one app's
    writes over another's entries (pazzd.interference)."""
    found = _call(args, "findings", kind="interference", state="open" if args.open else None)
    if args.app:
        found = [f for f in found if args.app in f["name"].split(",")]
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    if not found:
        print("no interference findings")
        return 0
    rows = [("id", "state", "relation", "switch", "a (wins)", "b", "witness", "data plane")]
    rows += [record_from_json(f).row() for f in found]
    _table(rows)
    return 0


def cmd_localize(args) -> int:
    t0 = time.monotonic()
    a = _call(args, "localize", id=args.id)
    took = time.monotonic() - t0
    found = bool(a.get("findings")) or a.get("kind") == "audit"
    if args.json:
        print(json.dumps({**a, "wall_seconds": round(took, 4)}, indent=2))
        return 0 if found else 1
    print(
        f"fault {a['fault']} ({a['kind']}): polled {len(a['polled'])} switches "
        f"{a['polled']} in {took:.2f} s"
    )
    for d, err in a["errors"].items():
        print(f"  dpid {d}: poll failed: {err}")
    if not a["findings"]:
        print(f"  {no_finding_text(a)}")
        return 1
    rows = [("switch", "finding", "entry on the switch", "intended entry")]
    for f in a["findings"]:
        rows.append(
            (
                f["switch"],
                f["finding"],
                f["entry"] or "(none: table-miss)",
                f["intended"] or "(none)",
            )
        )
    _table(rows)
    if a.get("misrouting_hop"):
        print(f"  misrouting hop: {a['misrouting_hop']}")
    return 0


def cmd_flowmod(args) -> int:
    res = _call(args, "flowmod", switch=args.switch, flow=args.flow, command=args.command_)
    print(
        json.dumps(res)
        if args.json
        else f"model version {res['version']}, "
        f"{res['classes_changed']} classes changed in {res['seconds'] * 1e3:.2f} ms"
    )
    return 0


RELOAD_WARNINGS = 3  # the exit status of a reload in force with warnings


def cmd_reload(args) -> int:
    """Reload pazzd's config (as SIGHUP) and report its verdict."""
    res = _call(args, "reload")
    warnings = res.get("warnings") or []
    if args.json:
        print(json.dumps(res, indent=2))
    elif not res["ok"]:
        print(f"reload failed, the last good config stays in force: {res['error']}")
    elif warnings:
        print("config reloaded with warnings:")
        for w in warnings:
            print(f"  {w}")
    else:
        print("config reloaded")
    if not res["ok"]:
        return 1
    return RELOAD_WARNINGS if warnings else 0


def cmd_ui_url(args) -> int:
    """The web view's URL with its token (open to whoever may use the API socket)."""
    res = _call(args, "ui-url")
    print(json.dumps(res) if args.json else res["url"])
    return 0


def cmd_check_config(args) -> int:
    try:
        cfg = load_config(args.file, deep=True)
    except ConfigError as e:
        raise CliError(str(e)) from None
    if args.json:
        print(json.dumps({"ok": True, **cfg.summary(), "warnings": cfg.agent_warnings}, indent=2))
    else:
        print(f"{args.file}: OK")
        for k, v in cfg.summary().items():
            print(f"  {k:15} {v}")
        # Entries whose effect is the switch's choice (docs/agents.md): valid, but not portable.
        for w in cfg.agent_warnings:
            print(f"warning: {w}")
    return 0


def add_daemon_commands(sub, common) -> None:
    s = sub.add_parser(
        "status", parents=[common], help="pazzd's state: model, sFlow, reports, faults, fuzzer"
    )
    s.set_defaults(func=cmd_status)
    f = sub.add_parser("faults", parents=[common], help="list faults, or `faults show ID`")
    f.add_argument("action", nargs="?", choices=["show"], help="show one fault")
    f.add_argument("id", nargs="?", type=int, help="the fault's ID (with show)")
    f.add_argument("--open", action="store_true", help="only open faults (in the list)")
    f.add_argument("--since", type=int, metavar="ID", help="only faults with an ID above ID")
    f.add_argument(
        "--follow",
        action="store_true",
        help="print faults as they open, resolve and reopen, one line each, until Ctrl-C "
        "(with --json one object per line; pazzd is asked once a second)",
    )
    f.set_defaults(func=cmd_faults)
    fd = sub.add_parser(
        "findings", parents=[common], help="findings of every kind, or `findings show ID`"
    )
    fd.add_argument("action", nargs="?", choices=["show"], help="show one finding")
    fd.add_argument("id", nargs="?", type=int, help="the finding's ID (with show)")
    fd.add_argument("--kind", choices=["intent", "interference", "agent"], help="only this kind")
    fd.add_argument("--open", action="store_true", help="only open findings")
    fd.set_defaults(func=cmd_findings)
    for name, what, func in (
        ("intents", "where the intended state breaks a policy", cmd_intents),
        ("agents", "entries a switch accepted and forwards otherwise", cmd_agents),
    ):
        p = sub.add_parser(name, parents=[common], help=f"{what}, or `{name} show ID`")
        p.add_argument("action", nargs="?", choices=["show"], help="show one finding")
        p.add_argument("id", nargs="?", type=int, help="the finding's ID (with show)")
        p.add_argument("--open", action="store_true", help="only open findings")
        p.set_defaults(func=func)
    inf = sub.add_parser(
        "interference",
        parents=[common],
        help="entries of two controller apps whose matches meet (apps in pazzd.yaml)",
    )
    inf.add_argument("--app", help="only findings with this app on one side")
    inf.add_argument("--open", action="store_true", help="only open findings")
    inf.set_defaults(func=cmd_interference)
    lz = sub.add_parser(
        "localize", parents=[common], help="poll candidate flow tables for a fault's entry"
    )
    lz.add_argument("id", type=int, help="the fault's ID")
    lz.set_defaults(func=cmd_localize)
    fm = sub.add_parser(
        "flowmod", parents=[common], help="apply a FlowMod to the live model (no proxy)"
    )
    fm.add_argument("switch", help="the switch: name or dpid")
    fm.add_argument("flow", help="ovs-ofctl flow syntax")
    fm.add_argument(
        "--command",
        dest="command_",
        default="add",
        choices=["add", "modify", "modify_strict", "delete", "delete_strict"],
        help="the FlowMod command (default add)",
    )
    fm.set_defaults(func=cmd_flowmod)
    rl = sub.add_parser(
        "reload",
        parents=[common],
        help="reload pazzd's config and print its verdict (exit 1 if it failed, 3 if it "
        "took effect with warnings)",
    )
    rl.set_defaults(func=cmd_reload)
    u = sub.add_parser(
        "ui-url", parents=[common], help="the web view's URL, with the token it needs"
    )
    u.set_defaults(func=cmd_ui_url)
    c = sub.add_parser(
        "check-config", parents=[common], help="validate a pazzd config file without starting"
    )
    c.add_argument("file", help="the config file (YAML)")
    c.set_defaults(func=cmd_check_config)


def _table(rows, empty: str | None = None) -> None:
    """Rows under their header row; `empty` is printed instead when there are none."""
    print(table_text(rows, empty))


EXAMPLES = """\
examples:
  pazzctl status
  pazzctl faults --open
  pazzctl faults show 12
  pazzctl faults --follow --since 12
  pazzctl findings --open
  pazzctl intents show 3 --json
  pazzctl interference --app acl --open
  pazzctl agents --open
  pazzctl localize 12 --json
  pazzctl reload
  pazzctl check-config /etc/pazz/pazzd.yaml
  pazzctl ui-url
  pazzctl trace --in h1 --header 'tcp,nw_dst=10.0.1.5,tp_dst=80'
  pazzctl trace --in s1:5 --header 'arp'
  pazzctl reach --topology net.yaml --rules rules.jsonl --from s1:5 --to h2 --verbose
  pazzctl --socket /tmp/pazzd.sock --json status

headers: an ovs-ofctl match with exact values: the protocols ip, tcp, udp, icmp, arp and
  the fields nw_src, nw_dst, nw_proto, tp_src, tp_dst (tcp_*, udp_*), dl_src, dl_dst,
  dl_type, dl_vlan (or their OpenFlow names: ipv4_dst, ...). IPv6 is not modelled.
ports: SWITCH:PORT (a switch name or dpid: s1:5, 1:5, 0x1:5) or a host's name (h1).

exit status, the same with and without --json, on files and against pazzd:
  0  success
  1  pazzd cannot be reached or failed, or its answer is a failure (a failed reload, a
     localization that found nothing)
  2  an input error: a bad flag, header, port, host, switch, ID or file
  3  a reload in force with warnings (a switch's sFlow ifIndex map is stale: pazzctl
     status says which)
"""


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 2, as JSON on stderr under --json."""

    json_errors = False

    def error(self, message: str):
        if _Parser.json_errors:
            print(json.dumps({"error": message, "status": 2}), file=sys.stderr)
            sys.exit(2)
        super().error(message)


def _common(suppress: bool) -> argparse.ArgumentParser:
    """The global flags; under a subcommand they default to SUPPRESS so that a flag given
    before the subcommand is not reset after it."""
    c = argparse.ArgumentParser(add_help=False)
    default = os.environ.get("PAZZ_SOCKET") or DEFAULT_SOCKET
    c.add_argument(
        "--socket",
        default=argparse.SUPPRESS if suppress else default,
        metavar="PATH",
        help=f"pazzd's API socket (default: $PAZZ_SOCKET, or {DEFAULT_SOCKET})",
    )
    c.add_argument(
        "--json",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="JSON output (errors: a JSON object on stderr)",
    )
    return c


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="pazzctl",
        description="PAZZ operator tool: query pazzd and its model.",
        parents=[_common(False)],
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"pazzctl {version()}")
    common = _common(True)
    sub = p.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        parser_class=_Parser,
        help="the subcommand (COMMAND --help for its flags)",
    )

    def model_args(sp):
        sp.add_argument("--topology", help="topology YAML file (omit both: the live model)")
        sp.add_argument("--rules", help="rules: JSON lines or ovs-ofctl dump-flows text")

    t = sub.add_parser(
        "trace", parents=[common], help="follow one header through the modelled network"
    )
    model_args(t)
    t.add_argument(
        "--in",
        dest="ingress",
        required=True,
        metavar="PORT",
        help="the edge port where the packet enters: SWITCH:PORT or a host's name",
    )
    t.add_argument(
        "--header",
        required=True,
        metavar="MATCH",
        help="the packet, as an ovs-ofctl match with exact values: 'tcp,nw_dst=10.0.1.5,tp_dst=80'",
    )
    t.set_defaults(func=cmd_trace)

    r = sub.add_parser(
        "reach", parents=[common], help="the header space delivered from one edge port to another"
    )
    model_args(r)
    r.add_argument(
        "--from",
        dest="src",
        required=True,
        metavar="PORT",
        help="the edge port where headers enter: SWITCH:PORT or a host's name",
    )
    r.add_argument(
        "--to",
        dest="dst",
        required=True,
        metavar="PORT",
        help="the edge port where they leave: SWITCH:PORT or a host's name",
    )
    r.add_argument(
        "--limit",
        type=_limit,
        default=20,
        help="groups, and with --verbose matches, to list (default 20, at most 100000)",
    )
    r.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="also list the header space as disjoint matches",
    )
    r.set_defaults(func=cmd_reach)
    add_daemon_commands(sub, common)
    return p


def _limit(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= n <= 100000:
        raise argparse.ArgumentTypeError(f"{n} is not from 0 to 100000")
    return n


def _error(args_json: bool, message: str, status: int) -> int:
    if args_json:
        print(json.dumps({"error": message, "status": status}), file=sys.stderr)
    else:
        print(f"pazzctl: {message}", file=sys.stderr)
    return status


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    _Parser.json_errors = "--json" in argv
    args = build_parser().parse_args(argv)
    try:
        rc = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return rc
    except (CliError, ModelError, TopologyError, InputError) as e:
        return _error(args.json, str(e), 2)
    except ApiError as e:  # pazzd cannot be reached, or failed
        return _error(args.json, str(e), 1)
    except BrokenPipeError:
        # The reader went away (`pazzctl faults --json | head`): no traceback, no retry.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
