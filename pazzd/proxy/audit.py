"""The proxy's audit: a switch's flow table (a flow dump) against the intended one."""

from __future__ import annotations

import collections
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import ofwire as of
from cpc.ofctl import format_flow
from cpc.rules import ModelError
from pazzd.proxy.store import Entry

log = logging.getLogger("pazzd.proxy")


@dataclass(frozen=True)
class AuditFinding:
    """A difference between a switch's actual table and the intended one.

    kind: "unexpected" (on the switch, never sent by the controller), "changed" (same
    table/priority/match, other cookie, instructions or rule ID) or "missing" (intended,
    absent from the switch in two audits in a row). text: the entry on the switch (for
    "missing" the intended one), intended_text: the intended entry ("" for "unexpected"),
    both in ovs-ofctl syntax."""

    dpid: int
    kind: str
    table: int
    priority: int
    match: bytes  # canonical OXM bytes
    actual: of.FlowStat | None = None
    intended: Entry | None = None
    text: str = ""
    intended_text: str = ""

    def __str__(self) -> str:
        return f"dpid {self.dpid:#x}: {self.kind} entry {self.text}"


class Auditor:
    """Audits over the proxy's `dump(dpid)` -> (flow stats, intended entries by key) and
    `barrier(dpid)`; keeps what each switch's last audit reported (see Proxy)."""

    def __init__(
        self,
        dump: Callable[[int], Awaitable[tuple]],
        barrier: Callable[[int], Awaitable[None]],
        config,
        on_finding: Callable[[AuditFinding], None] | None = None,
        on_audit: Callable[[int, list[AuditFinding]], None] | None = None,
    ) -> None:
        self.dump = dump
        self.barrier = barrier
        self.config = config  # its unique_ids: whether rule IDs count
        self.on_finding = on_finding
        self.on_audit = on_audit
        self.reported: dict[int, dict[tuple, AuditFinding]] = collections.defaultdict(dict)
        self.missing_once: dict[int, set] = collections.defaultdict(set)
        # The latest new audit findings (the fault store keeps them all).
        self.findings: collections.deque[AuditFinding] = collections.deque(maxlen=4096)

    async def audit(self, dpid: int) -> list[AuditFinding]:
        """Compare the switch's table with the intended one now; returns the current
        differences and reports the new ones (on_finding + log).

        An unexpected or changed entry that the last audit did not report is confirmed by a
        second dump behind a barrier: a FlowMod in flight can make the two tables differ
        for a moment (seen once in 17,000 benign controller updates on the lab). A missing
        entry needs two audits in a row instead."""
        stats, intended = await self.dump(dpid)
        found, actual = self.differences(dpid, stats, intended)
        if any(k not in self.reported[dpid] for k in found):
            await self.barrier(dpid)
            stats, intended = await self.dump(dpid)
            again, actual = self.differences(dpid, stats, intended)
            found = {k: f for k, f in again.items() if k in found}
        missing_now = set()
        for key, e in intended.items():
            if key in actual or e.idle or e.hard:
                continue
            missing_now.add(key)
            if key in self.missing_once[dpid]:
                text = describe(dpid, e)
                f = AuditFinding(dpid, "missing", *key, intended=e, text=text, intended_text=text)
                found[("missing", key)] = f
        self.missing_once[dpid] = missing_now
        return self.report(dpid, found)

    def differences(self, dpid: int, stats, intended) -> tuple[dict, dict]:
        """The unexpected and changed entries of one dump against the intended table, and
        the dump by (table, priority, match)."""
        ids_on = self.config.unique_ids
        found: dict[tuple, AuditFinding] = {}
        actual = {}
        for st in stats:
            key = (st.table, st.priority, st.mkey)
            actual[key] = st
            e = intended.get(key)
            if e is None:
                f = AuditFinding(dpid, "unexpected", *key, actual=st, text=describe(dpid, st))
            elif (
                st.cookie != e.cookie
                or of.canonical_instructions(st.instr) != of.canonical_instructions(e.instr)
                or (ids_on and (st.rule_id or 0) != e.rule_id)
            ):
                f = AuditFinding(
                    dpid,
                    "changed",
                    *key,
                    actual=st,
                    intended=e,
                    text=describe(dpid, st),
                    intended_text=describe(dpid, e),
                )
            else:
                continue
            found[(f.kind, key, st.cookie, st.instr, st.rule_id)] = f
        return found, actual

    def report(self, dpid: int, found: dict) -> list[AuditFinding]:
        if self.on_audit:
            try:
                self.on_audit(dpid, list(found.values()))
            except Exception:
                log.exception("on_audit callback failed")
        reported = self.reported[dpid]
        for k, f in found.items():
            if k not in reported:
                # With a consumer of on_audit (pazzd's fault store) that one reports the fault.
                log.log(logging.INFO if self.on_audit else logging.WARNING, "audit: %s", f)
                self.findings.append(f)
                if self.on_finding:
                    try:
                        self.on_finding(f)
                    except Exception:
                        log.exception("on_finding callback failed")
        self.reported[dpid] = found
        return list(found.values())


def describe(dpid: int, x) -> str:
    """The entry in ovs-ofctl syntax (what `ovs-ofctl add-flow` takes), with its ID."""
    rid = x.rule_id if isinstance(x, Entry) else (x.rule_id or 0)
    try:
        e = of.raw_entry_to_cpc(dpid, x.table, x.priority, x.mkey, x.cookie, x.instr, rid)
        return format_flow(e)
    except (ModelError, of.ProtocolError):
        return (
            f"table={x.table},priority={x.priority},cookie={x.cookie:#x},"
            f"match={x.mkey.hex()},instructions={x.instr.hex()}"
        )
