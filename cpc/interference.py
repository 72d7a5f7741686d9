"""Interference between controller applications: entries of different owners on one switch
whose matches meet, found on every committed update.

Owners are cookie ranges (Apps: Faucet and ONOS encode an application in the cookie) or
controller connections: an entry's owner is the app whose cookie range matches, else the app
of the controller connection that added it (FlowEntry.source "controller NAME", as pazzd's
proxy sets it), else "unknown". Relations, per header h at one switch, in_port
and table that h reaches (table 0, or through the goto of the entry that wins an earlier
table):
  override       A is the only top-priority entry matching h and B is at the next priority
                 level (B would take h without A). Conflicting instructions: "shadowing" if
                 B is never the only top entry for any header that reaches its table, else
                 "partial_override"; the same instructions: "redundancy".
  same_priority  A and B are both at the top priority for h (OpenFlow leaves the choice
                 undefined; the model takes the older); the same instructions: "redundancy".
  cross_table    A wins h in table t1 and does not go to table t2, while the entry that
                 would take h without A goes to t2, where B is the only top entry for h.
An (A, B) pair is one finding, with a witness header and the entry the model picks there.
Rewrites before a goto are ignored when deciding which headers reach a table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from .rules import FlowEntry, Match, ModelError
from .witness import representative

UNKNOWN = "unknown"
RELATIONS = ("shadowing", "partial_override", "same_priority", "redundancy", "cross_table")
SEVERITY = {"redundancy": "info"}  # every other relation: "warning"
_COOKIE_MAX = (1 << 64) - 1


CONNECTION = "controller "  # FlowEntry.source of an entry a controller connection added


def connection_source(conn: str) -> str:
    """The FlowEntry.source of an entry that controller connection `conn` added."""
    return CONNECTION + conn if conn else ""


@dataclass(frozen=True)
class App:
    name: str
    cookie: int | None = None  # with mask: a cookie range
    mask: int | None = None
    controller: str | None = None  # the name of a controller connection


class Apps:
    """Owners: the first app whose (cookie, mask) the entry's cookie matches, else the app
    of the controller connection that added it."""

    def __init__(self, apps: Iterable[App] = ()) -> None:
        self.apps = tuple(apps)
        self._by_conn: dict[str, str] = {}  # controller name -> app
        seen = set()
        for i, a in enumerate(self.apps):
            where = f"apps[{i}]"
            if not isinstance(a.name, str) or not a.name or a.name == UNKNOWN:
                raise ModelError(f"{where}.name: a non-empty name other than {UNKNOWN!r}")
            if a.name in seen:
                raise ModelError(f"{where}.name: {a.name!r} is named twice")
            seen.add(a.name)
            if a.controller is not None:
                if not isinstance(a.controller, str) or not a.controller:
                    raise ModelError(
                        f"{where}.controller: a controller's name, not {a.controller!r}"
                    )
                if a.controller in self._by_conn:
                    raise ModelError(
                        f"{where}.controller: {a.controller!r} belongs to "
                        f"{self._by_conn[a.controller]!r} already"
                    )
                self._by_conn[a.controller] = a.name
            if a.cookie is None and a.mask is None:
                if a.controller is None:
                    raise ModelError(f"{where}: needs a cookie and mask, or a controller")
                continue
            for f in ("cookie", "mask"):
                v = getattr(a, f)
                if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= _COOKIE_MAX:
                    raise ModelError(f"{where}.{f}: {v!r} is not a 64-bit unsigned integer")
            if a.cookie & ~a.mask:
                raise ModelError(
                    f"{where}.cookie: 0x{a.cookie:x} has bits outside mask 0x{a.mask:x}"
                )
        self._pairs = tuple((a.cookie, a.mask, a.name) for a in self.apps if a.mask is not None)

    @property
    def names(self) -> tuple[str, ...]:
        return (*(a.name for a in self.apps), UNKNOWN)

    def owner(self, cookie: int, source: str = "") -> str:
        """The owner of an entry with this cookie and FlowEntry.source."""
        for value, mask, name in self._pairs:
            if cookie & mask == value:
                return name
        if self._by_conn and source.startswith(CONNECTION):
            return self._by_conn.get(source[len(CONNECTION) :], UNKNOWN)
        return UNKNOWN


def ekey(e: FlowEntry) -> tuple:
    """An entry's key on its switch: what OpenFlow's strict selection tells apart."""
    return (e.dpid, e.table, e.match.fields, e.priority, e.match.in_port)


@dataclass(frozen=True)
class Side:
    """One entry of a finding, as an operator reads it."""

    owner: str
    table: int
    priority: int
    cookie: int
    rule_id: int
    match: str
    actions: str

    @staticmethod
    def of(e: FlowEntry, owner: str) -> Side:
        return Side(
            owner, e.table, e.priority, e.cookie, e.rule_id, str(e.match), str(e.instructions)
        )

    def to_json(self) -> dict:
        return {
            "owner": self.owner,
            "table": self.table,
            "priority": self.priority,
            "cookie": f"0x{self.cookie:x}",
            "rule_id": self.rule_id,
            "match": self.match,
            "actions": self.actions,
        }


@dataclass(frozen=True)
class Finding:
    key: str
    relation: str
    dpid: int
    a: Side  # the higher priority, the earlier table, or (same priority) the first by key
    b: Side
    entries: tuple[tuple, tuple]  # (ekey of a, ekey of b)
    witness: dict  # a header where the two meet
    in_port: int | None  # the witness's in_port; None: any port without in_port entries
    # The entry the model picks for the witness: "a", "b", or "other" (a third entry of the
    # same priority, older than both).
    winner: str

    @property
    def severity(self) -> str:
        return SEVERITY.get(self.relation, "warning")

    @property
    def apps(self) -> str:
        """The two owners, sorted: a label with a bounded set of values."""
        return ",".join(sorted((self.a.owner, self.b.owner)))

    def summary(self) -> str:
        w = {"a": self.a.owner, "b": self.b.owner}.get(self.winner, "another entry")
        return (
            f"{self.relation.replace('_', ' ')} on switch 0x{self.dpid:x}: {self.a.owner}"
            f" (table {self.a.table}, priority {self.a.priority}) against {self.b.owner}"
            f" (table {self.b.table}, priority {self.b.priority}); {w} wins"
        )

    def to_json(self) -> dict:
        return {
            "relation": self.relation,
            "dpid": self.dpid,
            "apps": self.apps,
            "a": self.a.to_json(),
            "b": self.b.to_json(),
            "witness": dict(self.witness),
            "in_port": self.in_port,
            "winner": self.winner,
            "severity": self.severity,
        }


def _side_key(k: tuple) -> str:
    _, table, fields, priority, in_port = k
    return f"t{table}/p{priority}/{Match(fields, in_port)}"


def pair_key(a: tuple, b: tuple) -> str:
    return f"{a[0]:016x}|{_side_key(a)}|{_side_key(b)}"


class InterferenceChecker:
    """Keeps the interference findings of a Model up to date, one committed update at a time.

        checker = InterferenceChecker(model, Apps([...]))
        checker.attach()              # scan what the model holds, then follow its updates
        opened, resolved = checker.drain()

    A witness is a packet a host could send (cpc.witness).
    """

    def __init__(self, model, apps: Apps) -> None:
        self.model = model
        self.space = model.space
        self.apps = apps
        self.findings: dict[str, Finding] = {}
        self._pair: dict[str, tuple[tuple, tuple]] = {}  # key -> the entries' ekeys
        self._by_entry: dict[tuple, set[str]] = {}
        self._by_table: dict[tuple[int, int], set[str]] = {}  # same-table findings
        self._cross: dict[int, set[str]] = {}  # cross-table findings by switch
        self._entries: dict[tuple, FlowEntry] = {}
        self._owner: dict[tuple, str] = {}
        self._owners_at: dict[tuple[int, int], Counter] = {}  # (dpid, table) -> owners
        self._reach: dict[tuple[int, int, int | None], object] = {}
        self._opened: dict[str, Finding] = {}
        self._resolved: set[str] = set()

    # --- feeding --------------------------------------------------------------------------
    def attach(self) -> None:
        self.model.subscribe(self.on_update, weak=True)
        self.scan()

    def scan(self) -> None:
        """Recompute every finding from the model's entries (after a bulk load)."""
        self._entries.clear()
        self._owner.clear()
        self._owners_at.clear()
        self._reach.clear()
        for e in self.model.entries():
            self._remember(e)
        for key in list(self.findings):
            self._set(key, None)
        for d in sorted({k[0] for k in self._entries}):
            for t in sorted({el.table for el in self.model.switch_elements(d)}):
                self._recompute_table(d, t)
            if self._multi(d):
                self._reach_changed(d)
                self._recompute_cross(d)

    def on_update(self, upd) -> None:
        if not upd.changes:
            return
        switches = {(n or o).dpid for o, n in upd.changes}
        # Multi-table switches: which tables' reach the batch changed (before any pair is
        # looked at: that would cache the new reach).
        multi = {
            d: self._reach_changed(d) for d in switches if self._multi(d) or self._cross.get(d)
        }
        for old, new in upd.changes:  # first the entries as the model now holds them
            if new is None:
                self._forget(ekey(old))
            else:
                self._remember(new)
        for old, new in upd.changes:
            self._change(old, new)
        for d, tables in multi.items():
            for t in sorted(tables):
                self._recompute_table(d, t)
            self._recompute_cross(d)

    def drain(self) -> tuple[list[Finding], list[str]]:
        """The findings opened or changed, and the keys resolved, since the last drain."""
        opened = [f for k, f in self._opened.items() if k in self.findings]
        resolved = sorted(k for k in self._resolved if k not in self.findings)
        self._opened, self._resolved = {}, set()
        return opened, resolved

    def counts(self) -> Counter:
        """(apps, relation) -> number of findings."""
        return Counter((f.apps, f.relation) for f in self.findings.values())

    # --- bookkeeping ----------------------------------------------------------------------
    def _remember(self, e: FlowEntry) -> None:
        k = ekey(e)
        self._forget(k)
        self._entries[k] = e
        o = self._owner[k] = self.apps.owner(e.cookie, e.source)
        c = self._owners_at.setdefault((e.dpid, e.table), Counter())
        c[o] += 1

    def _forget(self, k: tuple) -> None:
        if self._entries.pop(k, None) is not None:
            c = self._owners_at[(k[0], k[1])]
            o = self._owner.pop(k)
            c[o] -= 1
            if not c[o]:
                del c[o]

    def _set(self, key: str, f: Finding | None) -> None:
        old = self.findings.get(key)
        if f is None:
            if old is None:
                return
            del self.findings[key]
            a, b = self._pair.pop(key)
            for k in (a, b):
                s = self._by_entry.get(k)
                if s is not None:
                    s.discard(key)
                    if not s:
                        del self._by_entry[k]
            if a[1] == b[1]:
                self._by_table[(a[0], a[1])].discard(key)
            else:
                self._cross[a[0]].discard(key)
            self._opened.pop(key, None)
            self._resolved.add(key)
            return
        if old is None:
            a, b = f.entries
            self._pair[key] = f.entries
            self._by_entry.setdefault(a, set()).add(key)
            self._by_entry.setdefault(b, set()).add(key)
            if a[1] == b[1]:
                self._by_table.setdefault((a[0], a[1]), set()).add(key)
            else:
                self._cross.setdefault(a[0], set()).add(key)
        self.findings[key] = f
        if old is None or old.relation != f.relation or old.a != f.a or old.b != f.b:
            self._opened[key] = f

    # --- one change -----------------------------------------------------------------------
    def _change(self, old: FlowEntry | None, new: FlowEntry | None) -> None:
        x = new if new is not None else old
        k = ekey(x)
        d, t = x.dpid, x.table
        pairs: set[tuple[tuple, tuple]] = set(self._pair[f] for f in self._by_entry.get(k, ()))
        if len(self._owners_at.get((d, t), ())) < 2:  # one owner in this table: no new pair
            for a, b in pairs:
                if a[1] == b[1]:
                    self._update_pair(a, b)
            return
        owner = self._owner.get(k)
        near: list[tuple[object, FlowEntry]] = []  # (element, entry overlapping x there)
        seen = set()
        for el in self._elements(d, t, x.match.in_port):
            for y in el.ident.overlapping(x):
                near.append((el, y))
                yk = ekey(y)
                if yk in seen:
                    continue
                seen.add(yk)
                if new is not None and self._owner.get(yk) != owner:
                    pairs.add((k, yk))
                for f in self._by_entry.get(yk, ()):
                    pairs.add(self._pair[f])
        if new is None:
            # Headers x took may now show pairs below it that it hid.
            xm = x.match
            for el, y in near:
                if y.priority >= x.priority:
                    continue
                yk = ekey(y)
                yo = self._owner.get(yk)
                for z in el.ident.overlapping(y):
                    zk = ekey(z)
                    if self._owner.get(zk) != yo and z.match.overlaps(xm):
                        pairs.add((yk, zk))
        for a, b in pairs:
            if a[1] == b[1]:
                self._update_pair(a, b)

    def _update_pair(self, a: tuple, b: tuple) -> None:
        a, b = self._order(a, b)
        key = pair_key(a, b)
        self._set(key, self._eval_same(a, b, key))

    def _order(self, a: tuple, b: tuple) -> tuple[tuple, tuple]:
        if a[3] != b[3]:
            return (a, b) if a[3] > b[3] else (b, a)
        return (a, b) if _side_key(a) <= _side_key(b) else (b, a)

    # --- the model's elements -------------------------------------------------------------
    def _elements(self, d: int, t: int, in_port: int | None) -> list:
        """The elements of table t an entry with this in_port takes part in."""
        els = [el for el in self.model.switch_elements(d) if el.table == t]
        if in_port is None:
            return els
        return [el for el in els if el.in_port == in_port]

    def _views(self, d: int) -> list[int | None]:
        """The in_ports that can see different tables: None (any other port) and each port
        that some entry of the switch matches on."""
        ports = {el.in_port for el in self.model.switch_elements(d)}
        ports.discard(None)
        return [None, *sorted(ports)]

    def _multi(self, d: int) -> bool:
        return any(el.table and len(el.ident) for el in self.model.switch_elements(d))

    def _view_el(self, d: int, t: int, p: int | None):
        return self.model.element_for(d, t, p) if p is not None else self._none_el(d, t)

    def _none_el(self, d: int, t: int):
        for el in self.model.switch_elements(d):
            if el.table == t and el.in_port is None:
                return el
        return None

    def _reach_of(self, d: int, t: int, p: int | None):
        if t == 0:
            return self.space.true
        r = self._reach.get((d, t, p))
        if r is None:
            self._reach_changed(d)
            r = self._reach.get((d, t, p), self.space.false)
        return r

    def _reach_changed(self, d: int) -> set[int]:
        """Recompute the headers that reach each table of switch d from each in_port;
        returns the tables whose reach changed for some in_port."""
        tables = sorted({el.table for el in self.model.switch_elements(d)})
        changed = set()
        false = self.space.false
        for p in self._views(d):
            into: dict[int, list] = {}
            for t in tables:
                r = self.space.true if t == 0 else self.space.union(into.get(t, ()))
                if t and self._reach.get((d, t, p)) != r:
                    changed.add(t)
                    self._reach[(d, t, p)] = r
                el = self._view_el(d, t, p)
                if el is None or r == false:
                    continue
                for e in el.ident.entries():
                    g = e.instructions.goto
                    if g is not None:
                        into.setdefault(g, []).append(r & el.ident.region(e))
        return changed

    # --- same-table pairs -----------------------------------------------------------------
    def _recompute_table(self, d: int, t: int) -> None:
        pairs = set()
        for el in self._elements(d, t, None):
            for y in el.ident.entries():
                yk = ekey(y)
                yo = self._owner[yk]
                for z in el.ident.overlapping(y):
                    zk = ekey(z)
                    if self._owner[zk] != yo:
                        pairs.add(self._order(yk, zk))
        keys = {pair_key(a, b): (a, b) for a, b in pairs}
        for key in list(self._by_table.get((d, t), ())):
            if key not in keys:
                self._set(key, None)
        for key, (a, b) in keys.items():
            self._set(key, self._eval_same(a, b, key))

    def _pair_views(self, d: int, *entries: FlowEntry) -> list[int | None]:
        ports = {e.match.in_port for e in entries} - {None}
        if len(ports) > 1:
            return []
        return list(ports) if ports else self._views(d)

    def _eval_same(self, ak: tuple, bk: tuple, key: str) -> Finding | None:
        a, b = self._entries.get(ak), self._entries.get(bk)
        if a is None or b is None or self._owner[ak] == self._owner[bk]:
            return None
        if not a.match.overlaps(b.match):
            return None
        space, false = self.space, self.space.false
        d, t = a.dpid, a.table
        ab = space.match_bdd(a.match.fields) & space.match_bdd(b.match.fields)
        hit = None
        done = set()
        for p in self._pair_views(d, a, b):
            el = self._view_el(d, t, p)
            if el is None:
                continue
            if t == 0:  # every in_port reaches table 0: one look per element
                if el.idx in done:
                    continue
                done.add(el.idx)
            r = ab & self._reach_of(d, t, p)
            if r == false:
                continue
            above = [
                space.match_bdd(c.match.fields)
                for c in el.ident.overlapping(b)
                if c.priority > b.priority and c is not a and c.match.overlaps(a.match)
            ]
            if above:
                r = r & ~space.union(above)
            if r != false:
                hit = (el, p, r)
                break
        if hit is None:
            return None
        conflict = a.instructions != b.instructions
        if not conflict:
            relation = "redundancy"
        elif a.priority == b.priority:
            relation = "same_priority"
        elif self._takes_effect(b):
            relation = "partial_override"
        else:
            relation = "shadowing"
        el, p, r = hit
        witness = self._pick(r)
        beh = el.ident.identify(witness)
        ident = el.ident
        winner = (
            "a"
            if beh is ident.behaviour_of(a)
            else "b"
            if beh is ident.behaviour_of(b)
            else "other"
        )
        return self._finding(key, relation, a, b, witness, p, winner)

    def _takes_effect(self, e: FlowEntry) -> bool:
        """Is e the only top-priority entry for some header that reaches its table?"""
        space, false = self.space, self.space.false
        m = space.match_bdd(e.match.fields)
        done = set()
        for p in self._pair_views(e.dpid, e):
            el = self._view_el(e.dpid, e.table, p)
            if el is None or (e.table == 0 and el.idx in done):
                continue
            done.add(el.idx)
            r = m & self._reach_of(e.dpid, e.table, p)
            above = [
                space.match_bdd(c.match.fields)
                for c in el.ident.overlapping(e)
                if c.priority >= e.priority
            ]
            if above:
                r = r & ~space.union(above)
            if r != false:
                return True
        return False

    def _sole_top(self, el, e: FlowEntry):
        space = self.space
        r = space.match_bdd(e.match.fields)
        above = [
            space.match_bdd(c.match.fields)
            for c in el.ident.overlapping(e)
            if c.priority >= e.priority
        ]
        return r & ~space.union(above) if above else r

    # --- cross-table pairs ----------------------------------------------------------------
    def _recompute_cross(self, d: int) -> None:
        false = self.space.false
        tables = sorted({el.table for el in self.model.switch_elements(d)})
        hits: dict[tuple, tuple] = {}
        for p in self._views(d):
            for t1 in tables:
                el1 = self._view_el(d, t1, p)
                if el1 is None:
                    continue
                reach1 = self._reach_of(d, t1, p)
                if reach1 == false:
                    continue
                entries1 = el1.ident.entries()
                targets = {e.instructions.goto for e in entries1} - {None}
                for t2 in sorted(targets):
                    el2 = self._view_el(d, t2, p)
                    if el2 is None:
                        continue
                    for a in entries1:
                        self._cross_from(hits, el1, el2, a, t2, p, reach1)
        keys = {}
        for (ak, bk), (a, b, p, r) in hits.items():
            key = pair_key(ak, bk)
            w = self._pick(r)
            keys[key] = self._finding(key, "cross_table", a, b, w, p, "a")
        for key in list(self._cross.get(d, ())):
            if key not in keys:
                self._set(key, None)
        for key, f in keys.items():
            self._set(key, f)

    def _cross_from(self, hits, el1, el2, a: FlowEntry, t2: int, p, reach1) -> None:
        """Cross-table pairs of entry a (table el1) against the entries of table t2."""
        if a.instructions.goto == t2:
            return
        space, false = self.space, self.space.false
        over = el1.ident.overlapping(a)
        seconds = [s for s in over if s.instructions.goto == t2 and s.priority < a.priority]
        if not seconds:
            return
        ma = space.match_bdd(a.match.fields)
        parts = []
        for s in seconds:
            above = [
                space.match_bdd(c.match.fields)
                for c in over
                if c is not s and c.priority > s.priority and c.match.overlaps(s.match)
            ]
            g = ma & space.match_bdd(s.match.fields)
            parts.append(g & ~space.union(above) if above else g)
        divert = reach1 & space.union(parts)
        if divert == false:
            return
        ak = ekey(a)
        owner = self._owner[ak]
        for b in el2.ident.entries():
            bk = ekey(b)
            if (ak, bk) in hits or self._owner[bk] == owner or not b.match.overlaps(a.match):
                continue
            r = divert & self._sole_top(el2, b)
            if r != false:
                hits[(ak, bk)] = (a, b, p, r)

    # --- findings -------------------------------------------------------------------------
    def _pick(self, r) -> dict:
        return representative(self.space, r)

    def _finding(self, key, relation, a, b, witness, in_port, winner) -> Finding:
        ak, bk = ekey(a), ekey(b)
        return Finding(
            key=key,
            relation=relation,
            dpid=a.dpid,
            a=Side.of(a, self._owner[ak]),
            b=Side.of(b, self._owner[bk]),
            entries=(ak, bk),
            witness=witness,
            in_port=in_port,
            winner=winner,
        )
