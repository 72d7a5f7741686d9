"""Entry confirmation on the lab: the os-ken controller app's FlowMods go through pazzd's
proxy to patched OVS; each accepted entry is probed in the data plane. An entry the
switch holds as accepted is confirmed; one removed, or widened, behind the controller's
back right after the commit becomes an agent finding whose probes show it."""

from __future__ import annotations

import re
import time

import pytest
import yaml

from cpc.ofctl import parse_flow
from pazzapi import call
from tests.pazzd.test_intents_lab import lab_run, wait_for  # noqa: F401

pytestmark = [pytest.mark.ovs, pytest.mark.slow]

H4 = "10.0.3.0/24"  # routed to h4 (s4:5)


def agents(sock: str) -> dict:
    return call(sock, "status")["agents"]


def open_agent(sock: str) -> list[dict]:
    return call(sock, "findings", kind="agent", state="open")


def route_actions(lab, dpid: int) -> str:
    """s1's actions for h4's /24, without the proxy's rule-ID action."""
    for f in lab.dump_flows(dpid):
        if f"nw_dst={H4}" in f and "priority=" in f:
            acts = f.split("actions=", 1)[1]
            return re.sub(r"set_verify_rule:\d+,?", "", acts).strip(",")
    raise AssertionError(lab.dump_flows(dpid))


def _entries_log(workdir) -> str:
    lines = (workdir / "pazzd.log").read_text(errors="replace").splitlines()
    return "\n".join(ln for ln in lines if "pazzd.entries" in ln or "fault #" in ln)[-6000:]


def entry_line(lab, dpid: int, match: str) -> str | None:
    return next((f for f in lab.dump_flows(dpid) if match in f), None)


def widened(lab, run, ctl, workdir, flow: str, acts: str, wider: str, timeout: float) -> dict:
    """The controller adds `flow` on s1; right after the switch has it, the switch's entry
    becomes `wider` (the same actions, the proxy's rule ID among them) behind the
    controller's back. Returns the detail of the agent finding that follows."""
    ctl.send((1, f"{flow},actions={acts}", "add"))
    match = flow.split(",", 1)[1]
    line = wait_for(lambda: entry_line(lab, 1, match), timeout=10, every=0.05)
    assert line
    installed = line.split("actions=", 1)[1]  # with the proxy's rule ID
    lab.ofctl(1, "add-flow", f"{wider},actions={installed}")
    lab.ofctl(1, "del-flows", "--strict", flow)
    found = wait_for(lambda: open_agent(run.sock), timeout=timeout)
    if not found:
        print(agents(run.sock), _entries_log(workdir), *lab.dump_flows(1), sep="\n")
    assert found
    return found[0]["detail"]


def same_entry(d: dict, lab, dpid: int, flow: str) -> bool:
    """The finding's detail names `flow` (priority and match) on switch `dpid`."""
    mine = parse_flow(f"{flow},actions=drop", dpid)
    theirs = parse_flow(f"priority={d['priority']},{d['match']},actions=drop", dpid)
    return (
        d["switch"] == lab.topo.switches[dpid].name
        and int(d["dpid"], 16) == dpid
        and (theirs.priority, theirs.match) == (mine.priority, mine.match)
    )


def start_up_confirmed(sock: str) -> int:
    """The controller app's start-up entries are all checked, none diverged: the count
    confirmed."""
    assert wait_for(lambda: agents(sock).get("pending") == 0, timeout=120), agents(sock)
    st = agents(sock)
    assert st["diverged"] == 0, (
        st,
        [
            (f["key"], f["detail"]["reason"], [(p["kind"], p["fate"], p["rounds"], p["reports"])
             for p in f["detail"]["probes"]])
            for f in open_agent(sock)
        ],
    )  # fmt: skip
    assert st["confirmed"] > 0, st
    return st["confirmed"]


def split_confirmed(sock: str, ctl, acts: str, c0: int) -> tuple[float, dict]:
    """The controller splits h4's /24 on s1: the entry is confirmed. Returns the seconds
    it took and the agents' status."""
    t0 = time.time()
    ctl.send((1, f"priority=5000,ip,nw_dst=10.0.3.0/25,actions={acts}", "add"))
    assert wait_for(lambda: agents(sock)["confirmed"] > c0, timeout=60), agents(sock)
    first = time.time() - t0
    st = agents(sock)
    assert st["diverged"] == 0 and st["confirm_seconds_median"] is not None, st
    assert open_agent(sock) == []
    return first, st


def delay_probes(run) -> None:
    """The probes of the next entries go out 4 s after the commit (plus tester.settle):
    time for the test to change the switch behind the controller's back first."""
    cfg = yaml.safe_load(run.config.read_text())
    cfg["agents"] = {"delay": 4.0}
    cfg["log_level"] = "debug"
    run.config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    assert call(run.sock, "reload", timeout=20)["ok"]


def lost_drop(lab, sock: str, ctl, workdir) -> None:
    """A drop for TCP port 8080 to h4; s1 loses it right after the commit: an agent
    finding for exactly that entry, whose inside probes reached h4."""
    drop = "priority=6000,tcp,nw_dst=10.0.3.0/24,tp_dst=8080"
    ctl.send((1, f"{drop},actions=drop", "add"))
    assert wait_for(lambda: entry_line(lab, 1, "tp_dst=8080"), timeout=10, every=0.05)
    lab.ofctl(1, "del-flows", "--strict", drop)
    found = wait_for(lambda: open_agent(sock), timeout=60)
    assert found, (agents(sock), _entries_log(workdir))
    (f,) = found
    d = f["detail"]
    assert d["reason"] == "not-there" and same_entry(d, lab, 1, drop), d
    inside = [p for p in d["probes"] if p["kind"] == "inside"]
    # The model drops them; the switch sent them on to h4 with other tags.
    assert all(p["expected_exits"] == [] for p in inside)
    assert any(r["egress"] == "s4:5" and not r["allowed"] for p in inside for r in p["reports"])
    ctl.send((1, drop, "delete_strict"))
    assert wait_for(lambda: open_agent(sock) == [], timeout=20)


def widened_route(lab, run, ctl, workdir, acts: str) -> None:
    """A /26 of h4's net; s1's entry is widened to the /25 behind the back: the probe just
    outside the /26 finds it."""
    narrow = "priority=7000,ip,nw_dst=10.0.3.64/26"
    d = widened(lab, run, ctl, workdir, narrow, acts, "priority=7000,ip,nw_dst=10.0.3.0/25", 60)
    assert d["reason"] == "wider" and same_entry(d, lab, 1, narrow), d
    bad = [p for p in d["probes"] if p["verdict"] == "other-tags"]
    assert [(p["kind"], p["field"]) for p in bad] == [("outside", "ipv4_dst")], bad
    # 10.0.3.0/26: outside the /26, inside the /25 the switch holds.
    assert "ipv4_dst=10.0.3." in bad[0]["header"]
    lab.ofctl(1, "del-flows", "--strict", "priority=7000,ip,nw_dst=10.0.3.0/25")
    ctl.send((1, narrow, "delete_strict"))
    assert wait_for(lambda: open_agent(run.sock) == [], timeout=20)


def test_entries_confirmed_missing_and_wider(lab_run):  # noqa: F811
    lab, run, ctl, workdir = lab_run
    sock = run.sock
    acts = route_actions(lab, 1)
    c0 = start_up_confirmed(sock)
    first, st = split_confirmed(sock, ctl, acts, c0)  # 1.
    delay_probes(run)
    lost_drop(lab, sock, ctl, workdir)  # 2.
    widened_route(lab, run, ctl, workdir, acts)  # 3.

    # 4. A drop of TCP port 9090 to h4; the switch's drop is widened to all TCP to h4
    # behind the back: a probe outside the match, which the model forwards, never arrives.
    d9090 = "priority=6500,tcp,nw_dst=10.0.3.0/24,tp_dst=9090"
    d = widened(lab, run, ctl, workdir, d9090, "drop", "priority=6500,tcp,nw_dst=10.0.3.0/24", 90)
    assert d["reason"] == "wider" and same_entry(d, lab, 1, d9090), d
    bad = [p for p in d["probes"] if p["fate"] == "dropped"]
    assert ("outside", "tp_dst") in [(p["kind"], p["field"]) for p in bad], d["probes"]
    assert all(p["reports"] == [] and p["rounds"] == 2 for p in bad)
    print(f"entry confirmed {first:.1f} s after the controller wrote it; {st}")
