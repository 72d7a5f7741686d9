"""Interference findings (cpc.interference) and cross-application writes, in the fault store.

Each finding is a row of the findings table, kind "interference", stored, logged and probed
through the finding sink (pazzd.services). Two sorts:
- entries of two applications that meet (cpc.interference: shadowing, overrides, ...),
  keyed by the two entries; detail: the entries with their owners, the relation, the
  witness header and in_port, and the entry the model picks for it. The witness is probed
  from an edge port whose path reaches the switch, and the verdict says which
  application's entry the data plane obeyed;
- overwrites: a DELETE or MODIFY (strict or not), or an ADD replacing an entry, from one
  application that removes or changes entries another owns. The finding names both
  applications, the entries and the FlowMod; it resolves when the owner writes each of
  those entries again. A pair (writer, owner) in `apps[].may_overwrite` is allowed.
"""

from __future__ import annotations

import logging

import ofwire as of
from cpc.interference import (
    RELATIONS,
    UNKNOWN,
    Apps,
    Finding,
    InterferenceChecker,
    connection_source,
)
from cpc.ofctl import format_match
from cpc.rules import ModelError
from tester.store import OPEN

from .findings import exits, header_text
from .probes import Probe
from .records import InterferenceFinding, OverwriteFinding

__all__ = ["INTERFERENCE", "OVERWRITE", "InterferenceFindings", "overwrites"]

log = logging.getLogger("pazzd.interference")
INTERFERENCE = "interference"
OVERWRITE = "overwrite"
MAX_ENTRIES = 32  # entries named in one overwrite finding (the count says how many in all)


def finding_record(topo, f: Finding) -> InterferenceFinding:
    d = f.to_json()
    return InterferenceFinding(
        key=f.key,
        name=f.apps,
        severity=f.severity,
        summary=f.summary(),
        relation=d["relation"],
        dpid=d["dpid"],
        apps=d["apps"],
        a=d["a"],
        b=d["b"],
        witness=d["witness"],
        in_port=d["in_port"],
        winner=d["winner"],
        switch=topo.switches[f.dpid].name if f.dpid in topo.switches else str(f.dpid),
        witness_text=header_text(f.witness),
        extra={"severity": d["severity"]},
    )


class InterferenceFindings:
    """Keeps the findings table in step with an InterferenceChecker, and turns committed
    changes into overwrite findings."""

    def __init__(self, sink, topo, checker: InterferenceChecker, model) -> None:
        self.sink = sink
        self.store = sink.store
        self.topo = topo
        self.checker = checker
        self.model = model
        self.allowed: set[tuple[str, str]] = set()  # (writer, owner) pairs allowed to
        # overwrite key -> (owner, the entry keys it has not written again)
        self._restore: dict[str, tuple[str, set]] = {}

    def sync(self) -> None:
        """After a full scan: open what is open now, resolve what a previous run left open."""
        self.checker.drain()
        self._open(self.checker.findings.values())
        for key in self.store.open_finding_keys(INTERFERENCE):
            if key not in self.checker.findings and not key.startswith(OVERWRITE):
                self.sink.resolve(INTERFERENCE, key)

    def apply(self) -> None:
        """Store what the checker opened and resolved since the last call."""
        opened, resolved = self.checker.drain()
        self._open(opened)
        for key in resolved:
            self.sink.resolve(INTERFERENCE, key)

    def _open(self, findings) -> None:
        for f in findings:
            probe = self.probe(f)
            side = {"a": f.a, "b": f.b}.get(f.winner)
            self.sink.open(
                finding_record(self.topo, f),
                probes=[probe] if probe is not None else None,
                extra={"model_winner": side.owner if side is not None else "another entry"},
                log_text=f"{f.summary()}; witness {header_text(f.witness)}",
                level=logging.INFO if f.severity == "info" else logging.WARNING,
            )

    def probe(self, f: Finding) -> Probe | None:
        """The witness from an edge port whose path reaches the finding's switch (at its
        in_port), or None when no edge port's path does."""
        for ing in self.topo.edge_ports():
            paths = self.model.trace(ing, f.witness)
            if any(
                h.dpid == f.dpid and (f.in_port is None or h.in_port == f.in_port)
                for d in paths
                for h in d.hops
            ):
                return Probe("witness", ing, f.witness, exits(paths))
        return None

    # --- overwrites ---------------------------------------------------------------------------
    def committed(self, dpid: int, changes) -> None:
        """A committed batch of the proxy: open an overwrite finding per (FlowMod, owner)
        that removed or changed another application's entries; resolve those whose entries
        their owner wrote again."""
        for rec, keys in overwrites(self.checker.apps, dpid, changes, self.allowed):
            self._restore[rec.key] = (rec.owner, keys)
            rec.switch = self.topo.switches[dpid].name
            self.sink.open(rec)
        self._restored(dpid, changes)

    def _restored(self, dpid: int, changes) -> None:
        if not self._restore:
            return
        apps = self.checker.apps
        for ch in changes:
            if ch.kind == "delete" or ch.by is None:
                continue
            writer = apps.owner(ch.by.fm.cookie, connection_source(ch.by.conn))
            ek = entry_key(dpid, ch.entry)
            for key, (owner, left) in list(self._restore.items()):
                if ek in left and owner == writer:
                    left.discard(ek)
                    if not left:
                        del self._restore[key]
                        self.sink.resolve(INTERFERENCE, key)

    def open_counts(self) -> dict[tuple[str, str], int]:
        """Open findings per (apps, relation), every pair of owners and relation present (a
        bounded label set: the configured apps and unknown)."""
        names = sorted(self.checker.apps.names)
        out = {
            (",".join((a, b)), r): 0
            for i, a in enumerate(names)
            for b in names[i + 1 :]
            for r in (*RELATIONS, OVERWRITE)
        }
        for row in self.store.findings(INTERFERENCE, OPEN):
            rel = getattr(row, "relation", None)
            if (row.name, rel) in out:
                out[(row.name, rel)] += 1
        return out


def entry_key(dpid: int, e) -> str:
    return f"{dpid:#x}/{e.table}/{e.priority}/{match_text(e.mkey)}"


def overwrites(apps: Apps, dpid: int, changes, allowed=frozenset()) -> list[tuple]:
    """The overwrites in one committed batch of a switch: (OverwriteFinding, the keys of
    its entries) per (FlowMod, owner) whose entries another application's FlowMod
    deleted, modified or replaced."""
    groups: dict[tuple, dict] = {}
    for ch in changes:
        if ch.by is None:  # the proxy's own re-ID
            continue
        was = ch.entry if ch.kind == "delete" else ch.old
        if was is None:
            continue
        owner = apps.owner(was.cookie, connection_source(was.conn))
        writer = apps.owner(ch.by.fm.cookie, connection_source(ch.by.conn))
        if owner in (UNKNOWN, writer) or (writer, owner) in allowed:
            continue
        g = groups.setdefault((id(ch.by), owner), {"by": ch.by, "writer": writer, "entries": []})
        g["entries"].append((ch.kind, was))
    out = []
    for (_, owner), g in groups.items():
        by, writer = g["by"], g["writer"]
        fm = by.fm
        entries = [
            {
                "change": "replace" if kind == "add" else kind,
                "table": e.table,
                "priority": e.priority,
                "cookie": f"0x{e.cookie:x}",
                "match": match_text(e.mkey),
            }
            for kind, e in g["entries"]
        ]
        n = len(entries)
        command = fm.command_name
        match = match_text(fm.mkey)
        rec = OverwriteFinding(
            key=f"{OVERWRITE}|{dpid:#x}|{by.conn}|{writer}|{owner}|{by.xid}|{command}",
            name=",".join(sorted((writer, owner))),
            severity="critical",
            summary=f"{writer} {command} ({match}) "
            f"{'removed' if command.startswith('delete') else 'changed'} {n} "
            f"entr{'y' if n == 1 else 'ies'} of {owner}",
            writer=writer,
            owner=owner,
            switch_dpid=f"{dpid:#x}",
            flowmod={
                "command": command,
                "controller": by.conn,
                "xid": by.xid,
                "table": fm.table,
                "priority": fm.priority,
                "cookie": f"0x{fm.cookie:x}",
                "cookie_mask": f"0x{fm.cookie_mask:x}",
                "match": match,
            },
            entries=entries[:MAX_ENTRIES],
            count=n,
        )
        out.append((rec, {entry_key(dpid, e) for _, e in g["entries"]}))
    return out


def match_text(mkey: bytes) -> str:
    """A canonical match in ovs-ofctl syntax; its bytes in hex when the model cannot say."""
    try:
        return format_match(of.cpc_match(mkey))
    except (ModelError, of.ProtocolError):
        return mkey.hex()
