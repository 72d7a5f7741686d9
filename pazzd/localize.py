"""Pinning a fault to a switch and a flow entry: poll candidate flow tables, diff them
against the intended entries for the fault's headers.

For each candidate switch (the tester's candidates, most likely first, then the switches
on the model's expected paths) the poller reads the switch's table: through the proxy's
`dump_flows` when the switch is connected to it, else `ovs-ofctl dump-flows` on the
configured target. All candidates are polled concurrently, once. For a header of the fault
(and the in_port on the expected path, when the switch is on it) it follows the pipeline
from table 0 through goto_table in both the actual and the intended table and compares
the entries that win. Where they first differ, the finding names the cause:

- ``changed``: the winners have the same table, priority and match but other
  instructions, cookie or rule ID (a misroute: for path faults this switch is the
  misrouting hop); names the entry on the switch;
- ``unexpected``: the switch's winner is an entry the controller never installed
  (a hidden rule, a higher-priority fat-finger); names that entry;
- ``missing``: the intended winner is absent from the switch, and the packet falls
  through to the table-miss or to another intended entry that also matches (a covering
  route such as a /8 under a deleted /24): names the missing intended entry (a blackhole).
- ``changed_group``: the winners are the intended entries, but a group they send the
  packet to differs on the switch: other buckets, bucket order (a SELECT group's pick
  follows it), weights or type, or the group is gone (``missing_group``). Names the group
  as the switch has it, beside the intended one. The groups are read (group-desc through
  the proxy, else `ovs-ofctl dump-groups`) only when a switch's winners name one.

The fault's headers are tried one by one (the latest first, then the others the store
kept). A finding whose entry was changed through the controller after the fault opened
(`ChangeLog`) is a benign update's doing, not the fault's: it is set aside under
``ignored``. The answer is the first header's real findings.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import ofwire as of
from cpc.fields import format_header
from cpc.ofctl import format_flow, format_group, parse_flow, parse_group
from cpc.rules import FlowEntry, Group, Match, ModelError

__all__ = ["ChangeLog", "Localizer", "winning_entries"]

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


def _key(e: FlowEntry) -> tuple:
    """An entry's identity in its switch: OpenFlow's (table, priority, match)."""
    return (e.table, e.priority, e.match)


def _same(a: FlowEntry, b: FlowEntry) -> bool:
    return (
        a.table == b.table
        and a.priority == b.priority
        and a.match == b.match
        and a.cookie == b.cookie
        and a.rule_id == b.rule_id
        and a.instructions == b.instructions
    )


class ChangeLog:
    """When intended entries were last changed through the controller (bounded).

    The daemon notes every committed add, modify and delete: (time, dpid, table,
    priority, match). Localization asks whether a finding's entry was changed after the
    fault opened: such a difference comes from a benign update (say, the switch's dump
    was read just before the change reached it), not from the fault.
    """

    def __init__(self, maxlen: int = 100_000, clock: Callable[[], float] = time.time) -> None:
        # Wall time by default: the tester's clock, which fault times (first_seen) are on.
        self.clock = clock
        self._log: collections.deque = collections.deque()
        self._maxlen = maxlen
        self._last: dict[tuple, float] = {}  # (dpid, table, priority, match) -> latest time

    def __len__(self) -> int:
        return len(self._log)

    def note(self, dpid: int, table: int, priority: int, match: Match, when: float | None = None):
        t = self.clock() if when is None else when
        key = (dpid, table, priority, match)
        self._log.append((t, key))
        self._last[key] = t
        if len(self._log) > self._maxlen:
            old_t, old_key = self._log.popleft()
            if self._last.get(old_key) == old_t:
                del self._last[old_key]

    def committed(self, dpid: int, changes) -> None:
        """Note the entries a committed batch of the proxy changed (EntryChange; a match
        the model cannot represent is in no intended table: never a finding)."""
        for ch in changes:
            for e in (getattr(ch, "entry", None), getattr(ch, "old", None)):
                if e is None:
                    continue
                with contextlib.suppress(ModelError, of.ProtocolError):
                    self.note(dpid, e.table, e.priority, of.cpc_match(e.mkey))

    def changed_since(self, dpid: int, entry: FlowEntry, since: float) -> bool:
        """Was this entry (its table, priority and match) changed at or after `since`?"""
        t = self._last.get((dpid, *_key(entry)))
        return t is not None and t >= since


def fault_headers(row) -> list[dict]:
    """The headers to localize with: the latest first, then the others the store kept
    (oldest first), without duplicates and without the "text" field."""
    out, seen = [], set()
    for h in [row.header, *(getattr(row, "headers", None) or [])]:
        if not isinstance(h, dict):
            continue
        h = {k: v for k, v in h.items() if k != "text"}
        key = json.dumps(h, sort_keys=True)
        if h and key not in seen:
            seen.add(key)
            out.append(h)
    return out or [{}]


class Localizer:
    """intended(dpid) -> FlowEntry list; targets: dpid -> ovs-ofctl target; proxy optional;
    changes: the ChangeLog of committed controller changes (None: ignore nothing);
    intended_group(dpid, group_id) -> the intended Group or None (None: groups not compared)."""

    def __init__(
        self,
        intended: Callable[[int], list[FlowEntry]],
        targets: dict[int, str],
        *,
        ofctl: str = "ovs-ofctl",
        proxy=None,
        names: dict[int, str] | None = None,
        timeout: float = 5.0,
        changes: ChangeLog | None = None,
        intended_group: Callable[[int, int], Group | None] | None = None,
    ) -> None:
        self.intended = intended
        self.intended_group = intended_group
        self.changes = changes
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
        out = []
        for line in (await self._ofctl("dump-flows", dpid)).splitlines():
            if "actions=" not in line:
                continue
            try:
                out.append((parse_flow(line, dpid).entry(), _clean(line)))
            except ModelError as ex:
                out.append((None, _clean(line)))
                log.debug("dpid %d: unparsed entry %s: %s", dpid, line.strip(), ex)
        return out

    async def dump_groups(self, dpid: int) -> dict[int, Group]:
        """The switch's groups by id (a group the model cannot hold is left out)."""
        px = self.proxy
        if px is not None and dpid in getattr(px, "switches", {}):
            return {g.group_id: g for g in await px.dump_groups(dpid)}
        out = {}
        for line in (await self._ofctl("dump-groups", dpid)).splitlines():
            if "group_id=" not in line:
                continue
            try:
                g = parse_group(line.strip(), dpid)
            except ModelError as ex:
                log.debug("dpid %d: unparsed group %s: %s", dpid, line.strip(), ex)
                continue
            out[g.group_id] = g
        return out

    async def _ofctl(self, command: str, dpid: int) -> str:
        """The output of `ovs-ofctl COMMAND TARGET` for the switch, within the timeout."""
        target = self.targets.get(dpid)
        if target is None:
            raise LookupError(f"no ovs-ofctl target or proxy connection for dpid {dpid}")
        proc = await asyncio.create_subprocess_exec(
            self.ofctl,
            "-O",
            "OpenFlow13",
            "--no-names",
            command,
            target,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            so, se = await asyncio.wait_for(proc.communicate(), self.timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()  # reap it: no zombie, no transport left to the loop's end
            raise TimeoutError(
                f"ovs-ofctl {command} {target} did not answer within {self.timeout:g} s"
            ) from None
        if proc.returncode != 0:
            raise RuntimeError(f"ovs-ofctl {command} {target}: {se.decode().strip()}")
        return so.decode()

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
        headers = fault_headers(row)
        cands, in_ports = self.candidates(row)
        dumps = await asyncio.gather(*(self.dump(d) for d in cands), return_exceptions=True)
        errors = {}
        polled = []
        for dpid, dump in zip(cands, dumps, strict=True):
            if isinstance(dump, BaseException):
                errors[str(dpid)] = str(dump) or f"the poll failed ({type(dump).__name__})"
            else:  # the intended table once per switch, whatever the number of headers
                polled.append((dpid, dump, self.intended(dpid)))
        findings, ignored, tried = [], [], 0
        opened = getattr(row, "first_seen", None)
        group_dumps: dict[int, dict | BaseException] = {}
        for header in headers:  # the first header with a real finding is the answer
            tried += 1
            for dpid, dump, intended in polled:
                found = self._diff(dpid, dump, intended, header, in_ports.get(dpid))
                if found is None:
                    found = await self._group_diff(
                        dpid, dump, header, in_ports.get(dpid), group_dumps, errors
                    )
                if found is None:
                    continue
                finding, cause = found
                if cause is not None and self._benign(dpid, cause, opened):
                    ignored.append(finding)
                else:
                    findings.append(finding)
            if findings:
                break
        answer = {
            "fault": row.id,
            "kind": row.kind,
            "polled": cands,
            "errors": errors,
            "findings": findings,
            "ignored": ignored,
            "headers_tried": tried,
            "seconds": round(time.monotonic() - t0, 4),
        }
        if findings:
            first = findings[0]
            for k in ("dpid", "switch", "finding", "entry", "intended", "cause", "header"):
                answer[k] = first[k]
            if row.kind == "type_p_action":
                answer["misrouting_hop"] = first["switch"]
        return answer

    def _benign(self, dpid: int, cause: FlowEntry, opened: float | None) -> bool:
        """Was the finding's entry changed through the controller after the fault opened?"""
        if self.changes is None or opened is None:
            return False
        return self.changes.changed_since(dpid, cause, opened)

    def _diff(self, dpid: int, dump, intended: list, header: dict, in_port: int | None):
        """The first difference of the winning entries: (finding, the entry it names)."""
        actual = [e for e, _ in dump if e is not None]
        text = {id(e): t for e, t in dump if e is not None}
        want = winning_entries(intended, header, in_port)
        got = winning_entries(actual, header, in_port)
        for i in range(max(len(want), len(got))):
            w = want[i] if i < len(want) else None
            g = got[i] if i < len(got) else None
            if w is not None and g is not None and _same(w, g):
                continue
            kind, cause = _classify(w, g, intended, actual)
            if kind is None:
                return None
            return {
                "dpid": dpid,
                "switch": self.names.get(dpid, str(dpid)),
                "finding": kind,
                "in_port": in_port,
                "header": format_header(header),
                # the entry the finding names: on the switch, or the missing intended one
                "cause": text.get(id(cause)) or format_flow(cause),
                "entry": text.get(id(g), format_flow(g)) if g is not None else None,
                "intended": format_flow(w) if w is not None else None,
            }, cause
        return None

    async def _group_diff(self, dpid, dump, header, in_port, cache: dict, errors: dict):
        """The first group the switch's winning entries send header to that differs from
        the intended one: (finding, None); groups read once per switch (cache)."""
        if self.intended_group is None:
            return None
        actual = [e for e, _ in dump if e is not None]
        gids = sorted(
            {g for e in winning_entries(actual, header, in_port) for g in e.instructions.groups()}
        )
        if not gids:
            return None
        if dpid not in cache:
            try:
                cache[dpid] = await self.dump_groups(dpid)
            except Exception as ex:  # noqa: BLE001 - the answer names the failed poll
                cache[dpid] = ex
                errors[str(dpid)] = str(ex) or f"the group poll failed ({type(ex).__name__})"
        have = cache[dpid]
        if isinstance(have, BaseException):
            return None
        for gid in gids:
            want, got = self.intended_group(dpid, gid), have.get(gid)
            if want is None or _same_group(want, got):
                continue  # a group the controller never made: the flow diff's business
            return {
                "dpid": dpid,
                "switch": self.names.get(dpid, str(dpid)),
                "finding": "changed_group" if got is not None else "missing_group",
                "in_port": in_port,
                "header": format_header(header),
                "cause": format_group(got if got is not None else want),
                "entry": format_group(got) if got is not None else None,
                "intended": format_group(want),
            }, None
        return None


def _same_group(a: Group, b: Group | None) -> bool:
    return b is not None and a.type == b.type and a.buckets == b.buckets and a.weights == b.weights


def _classify(w: FlowEntry | None, g: FlowEntry | None, intended, actual):
    """(finding, the entry it names) for differing winners w (intended) and g (actual)."""
    if g is None:
        return "missing", w  # falls through to the table-miss
    if w is None:
        # Same pipeline so far, and no intended entry matches in this table: g is not one.
        return "unexpected", g
    if _key(w) == _key(g):
        return "changed", g
    if _key(g) not in {_key(e) for e in intended}:
        return "unexpected", g
    if _key(w) not in {_key(e) for e in actual}:
        # g is an intended entry that w outranks (a covering route): w is gone.
        return "missing", w
    # Both are intended and present: equal priorities that overlap, where OpenFlow leaves
    # the choice to the switch. Not a fault of this switch.
    return None, None


def ofctl_path(bin_dir: str) -> str:
    p = Path(bin_dir) / "ovs-ofctl"
    return str(p) if p.exists() else "ovs-ofctl"
