"""Pinning a fault to a switch and a flow entry: poll candidate flow tables, diff them
against the intended entries for the fault's header.

For each candidate switch (the tester's candidates, most likely first, then the switches
on the model's expected paths) the poller reads the switch's table: through the proxy's
`dump_flows` when the switch is connected to it, else `ovs-ofctl dump-flows` on the
configured target. All candidates are polled concurrently. For the fault's header (and the
in_port on the expected path, when the switch is on it) it follows the pipeline from table
0 through goto_table in both the actual and the intended table and compares the entries
that win. The first switch where they differ is the answer:

- ``unexpected``: the switch applies an entry that the controller never installed
  (a hidden rule, a higher-priority fat-finger);
- ``changed``: same table, priority and match, other instructions, cookie or rule ID
  (a misroute: for path faults this switch is the misrouting hop);
- ``missing``: the intended entry is absent and the packet falls through (a blackhole).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from cpc.ofctl import format_flow, parse_flow
from cpc.rules import FlowEntry, ModelError

__all__ = ["Localizer", "winning_entries"]

log = logging.getLogger("pazzd.localize")
STAT_PREFIXES = ("duration=", "n_packets=", "n_bytes=", "idle_age=", "hard_age=")


def _clean(line: str) -> str:
    parts = [p for p in line.strip().split(", ") if not p.startswith(STAT_PREFIXES)]
    return ", ".join(parts)


def winning_entries(entries: Iterable[FlowEntry], header: dict, in_port: int | None) -> list:
    """The entries a packet with header (arriving on in_port; None = any) hits, table by
    table from table 0 along goto_table. An empty list is a table-miss in table 0."""
    by_table: dict[int, list[FlowEntry]] = {}
    for e in entries:
        by_table.setdefault(e.table, []).append(e)
    out, table = [], 0
    while table is not None and table in by_table:
        best = None
        for e in by_table[table]:
            m = e.match
            if m.in_port is not None and in_port is not None and m.in_port != in_port:
                continue
            if not all((header.get(f, 0) & mk) == v for f, v, mk in m.fields):
                continue
            if best is None or e.priority > best.priority:
                best = e
        if best is None:
            break
        out.append(best)
        table = best.instructions.goto
    return out


def _same(a: FlowEntry, b: FlowEntry) -> bool:
    return (
        a.table == b.table
        and a.priority == b.priority
        and a.match == b.match
        and a.cookie == b.cookie
        and a.rule_id == b.rule_id
        and a.instructions == b.instructions
    )


class Localizer:
    """intended(dpid) -> FlowEntry list; targets: dpid -> ovs-ofctl target; proxy optional."""

    def __init__(
        self,
        intended: Callable[[int], list[FlowEntry]],
        targets: dict[int, str],
        *,
        ofctl: str = "ovs-ofctl",
        proxy=None,
        names: dict[int, str] | None = None,
        timeout: float = 5.0,
    ) -> None:
        self.intended = intended
        self.targets = dict(targets)
        self.ofctl = ofctl
        self.proxy = proxy
        self.names = names or {}
        self.timeout = timeout

    async def dump(self, dpid: int) -> list[tuple[FlowEntry, str]]:
        """The switch's actual entries with their text."""
        px = self.proxy
        if px is not None and dpid in getattr(px, "switches", {}):
            out = []
            for fs in await px.dump_flows(dpid):
                try:
                    e = fs.entry(dpid)
                except ModelError as ex:
                    log.warning("dpid %d: entry not modelled: %s", dpid, ex)
                    continue
                out.append((e, format_flow(e)))
            return out
        target = self.targets.get(dpid)
        if target is None:
            raise LookupError(f"no ovs-ofctl target or proxy connection for dpid {dpid}")
        proc = await asyncio.create_subprocess_exec(
            self.ofctl, "-O", "OpenFlow13", "--no-names", "dump-flows", target,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            so, se = await asyncio.wait_for(proc.communicate(), self.timeout)
        except TimeoutError:
            proc.kill()
            raise
        if proc.returncode != 0:
            raise RuntimeError(f"ovs-ofctl dump-flows {target}: {se.decode().strip()}")
        out = []
        for line in so.decode().splitlines():
            if "actions=" not in line:
                continue
            try:
                out.append((parse_flow(line, dpid).entry(), _clean(line)))
            except ModelError as ex:
                out.append((None, _clean(line)))
                log.debug("dpid %d: unparsed entry %s: %s", dpid, line.strip(), ex)
        return out

    def candidates(self, row) -> tuple[list[int], dict[int, int | None]]:
        """Switches to poll, most likely first, and the in_port each sees on the path."""
        loc = row.localization or {}
        order: list[int] = []
        culprit = loc.get("culprit")
        if isinstance(culprit, int):
            order.append(culprit)
        if isinstance(row.location, str) and row.location.startswith("dpid:"):
            order.append(int(row.location[5:]))
        order += [int(d) for d in loc.get("candidates") or []]
        in_ports: dict[int, int | None] = {}
        for alt in row.expected or []:
            for dpid, in_port, _out in alt.get("path", []):
                order.append(int(dpid))
                in_ports.setdefault(int(dpid), int(in_port))
        seen = list(dict.fromkeys(order))
        return seen, in_ports

    async def localize(self, row) -> dict:
        """Poll and diff; returns the answer (also when nothing differs)."""
        t0 = time.monotonic()
        header = {k: v for k, v in (row.header or {}).items() if k != "text"}
        cands, in_ports = self.candidates(row)
        dumps = await asyncio.gather(*(self.dump(d) for d in cands), return_exceptions=True)
        findings, errors = [], {}
        for dpid, dump in zip(cands, dumps, strict=True):
            if isinstance(dump, BaseException):
                errors[str(dpid)] = str(dump) or type(dump).__name__
                continue
            f = self._diff(dpid, dump, header, in_ports.get(dpid))
            if f is not None:
                findings.append(f)
        answer = {
            "fault": row.id,
            "kind": row.kind,
            "polled": cands,
            "errors": errors,
            "findings": findings,
            "seconds": round(time.monotonic() - t0, 4),
        }
        if findings:
            first = findings[0]
            answer.update(dpid=first["dpid"], switch=first["switch"], entry=first["entry"],
                          finding=first["finding"], intended=first["intended"])  # fmt: skip
            if row.kind == "type_p_action":
                answer["misrouting_hop"] = first["switch"]
        return answer

    def _diff(self, dpid: int, dump, header: dict, in_port: int | None) -> dict | None:
        actual = [e for e, _ in dump if e is not None]
        text = {id(e): t for e, t in dump if e is not None}
        want = winning_entries(self.intended(dpid), header, in_port)
        got = winning_entries(actual, header, in_port)
        name = self.names.get(dpid, str(dpid))
        for i in range(max(len(want), len(got))):
            w = want[i] if i < len(want) else None
            g = got[i] if i < len(got) else None
            if w is not None and g is not None and _same(w, g):
                continue
            if g is None:
                kind = "missing"
            elif w is not None and (w.table, w.priority, w.match) == (g.table, g.priority, g.match):
                kind = "changed"
            else:
                kind = "unexpected"
            return {
                "dpid": dpid,
                "switch": name,
                "finding": kind,
                "in_port": in_port,
                "entry": text.get(id(g), format_flow(g)) if g is not None else None,
                "intended": format_flow(w) if w is not None else None,
            }
        return None


def ofctl_path(bin_dir: str) -> str:
    p = Path(bin_dir) / "ovs-ofctl"
    return str(p) if p.exists() else "ovs-ofctl"
