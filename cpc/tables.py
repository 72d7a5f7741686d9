"""Flow tables of one switch, split into elements, and which entry each header matches.

An element is one (dpid, table, in_port) slice of a flow table: in_port None holds the
entries that match any input port; in_port p exists once some entry matches on p, and
holds those entries plus every wildcard entry of the table, so it alone answers for
packets arriving on p. Keeping in_port out of the header bits keeps ingress ports what
they are: locations.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from operator import itemgetter

from .fields import PREFIX_LENGTH
from .fields import PREFIX_MASKS as _MASKS
from .partition import Labels
from .results import RuleRef
from .routes import is_route
from .rules import FlowEntry, Instructions
from .space import CLASS_ID_BITS
from .tags import rule_bytes

_seq = itertools.count()


class Forwarding:
    """What an element does with the headers it owns (the entry's instructions), without
    the entry's identity: the "action" that keeps classes apart (cpc.partition). Not
    cpc.rules.OfpAction, one OpenFlow action of an instruction list.

    Interned by the model. The network's classes are kept apart only where their
    actions differ (cpc.partition); which entry a header matched is the element's
    concern (Identities), asked per header when the tags are needed.
    """

    __slots__ = ("dpid", "table", "instructions")

    def __init__(self, dpid: int, table: int, instructions: Instructions) -> None:
        self.dpid = dpid
        self.table = table
        self.instructions = instructions


class Behaviour:
    """An entry as the Verify tags see it: identity (table, priority, cookie, rule_id), its
    action and the bytes it adds to the Verify_Rule chain. One per entry and element."""

    __slots__ = (
        "dpid",
        "table",
        "priority",
        "cookie",
        "rule_id",
        "instructions",
        "action",
        "_ur",
        "_ref",
    )

    def __init__(self, dpid, table, priority, cookie, rule_id, instructions, action: Forwarding):
        self.dpid = dpid
        self.table = table
        self.priority = priority
        self.cookie = cookie
        self.rule_id = rule_id
        self.instructions = instructions
        self.action = action
        self._ur = None
        self._ref = None

    @property
    def ur(self) -> bytes:
        """u_r, the bytes this entry adds to the Verify_Rule chain (made on first use: a
        bulk load creates one Behaviour per entry, and most are never asked)."""
        ur = self._ur
        if ur is None:
            ur = self._ur = rule_bytes(
                self.dpid, self.table, self.priority, self.cookie, self.rule_id
            )
        return ur

    @property
    def ref(self) -> RuleRef:
        ref = self._ref
        if ref is None:
            ref = self._ref = RuleRef(self.table, self.priority, self.cookie, self.rule_id)
        return ref


class Element:
    """One (dpid, table, in_port) slice of a flow table.

    `entries` holds the entries that live here (match on this in_port, or on none for
    in_port None). `ident` holds every entry a packet on this port can match: an in_port
    element also holds the table's wildcard entries, so its answer is the whole table's.
    """

    __slots__ = ("idx", "dpid", "table", "in_port", "entries", "ident")

    def __init__(self, idx: int, dpid: int, table: int, in_port: int | None, space) -> None:
        self.idx = idx
        self.dpid = dpid
        self.table = table
        self.in_port = in_port
        self.entries: dict[tuple, FlowEntry] = {}  # (match fields, priority) -> entry
        self.ident = Identities(space)

    @staticmethod
    def key_of(entry: FlowEntry) -> tuple:
        return (entry.match.fields, entry.priority)


def _ikey(entry: FlowEntry) -> tuple:
    """An entry's key among an element's identities: an in_port element also holds the
    table's wildcard entries, which may share fields and priority with its own."""
    return (entry.match.fields, entry.priority, entry.match.in_port)


class Identities(Labels):
    """Which entry of one element each header matches: the entries' effective regions.

    An entry's effective region is its match minus what higher-priority entries take
    (an earlier entry wins a tie). Regions are labelled (cpc.partition.Labels), so the
    entry a header matches is one short walk, and changes come out as transfers of a
    region from one entry (or the table-miss, None) to another.
    """

    def __init__(self, space) -> None:
        super().__init__(space)
        self.miss_id = self._new_id()
        self.label = self._cube_of(self.miss_id)
        self._miss = space.true
        self._below: dict[tuple[int, int], list[FlowEntry]] | None = None  # see begin_bulk
        self._bulk_lengths: list[int] = []
        # In bulk mode: where routes go (cpc.routes), this element's index, and the keys of
        # the other entries.
        self._routes: dict[tuple[int, int], list] = {}
        self._idx = 0
        self._bulk_other: list[tuple] = []
        self.eff: dict[tuple, object] = {}  # entry key -> effective region
        self.beh: dict[int, Behaviour] = {}  # region id -> the entry's behaviour
        self._id: dict[tuple, int] = {}  # entry key -> region id
        self._key: dict[int, tuple] = {}  # region id -> entry key
        self._entry: dict[tuple, FlowEntry] = {}
        self._seq: dict[tuple, int] = {}
        self._prefix: dict[tuple[int, int], list[FlowEntry]] = {}
        self._sorted: list[tuple[int, int, FlowEntry]] = []  # (dst low, seq, entry): _by_dst()
        self._sorted_stale = False
        self._other: list[FlowEntry] = []  # entries whose ipv4_dst mask is not a prefix
        self._length_count: dict[int, int] = {}
        self._prio_count: dict[int, int] = {}
        self._low: int | None = None  # the lowest priority here (None: to be recomputed)
        # The label is built on first use (a routing table identifies headers from its prefix
        # index and may never need it), then kept up to date.
        self._label_stale = True
        self._lengths: list[int] = []  # the destination prefix lengths present

    def __len__(self) -> int:
        return len(self._entry)

    @property
    def miss(self):
        """The headers no entry here matches (after a bulk load: derived when first read)."""
        if self._below is not None:
            self._end_bulk_miss(self.space.union(self.eff.values()))
        return self._miss

    def begin_bulk(self, lengths: set[int | None], routes: dict, idx: int) -> None:
        """A bulk load is about to add entries with these destination prefix lengths (0: no
        ipv4_dst, None: a mask that is not a prefix).

        Into an empty element, without entries that key on anything but a destination
        prefix: an entry overlapping nothing already here takes exactly its match, and the
        prefix index tells which entries overlap. The table-miss is then derived once, after
        the load, instead of shrinking by one entry at a time (3 BDD operations an entry).
        Routes are collected into `routes` (prefix -> [(idx, priority, -seq, action)]), for
        cpc.routes to cut the classes of every element at once.
        """
        if None in lengths:
            return  # a non-prefix mask: entries take their regions from the miss
        if not self._entry:
            self._bulk_lengths = sorted(lengths)
            self._below = {}
            self._routes, self._idx, self._bulk_other = routes, idx, []
            self._sorted_stale = self._label_stale = True  # made once, after the load

    @property
    def in_bulk(self) -> bool:
        return self._below is not None

    def finish_bulk(self, routed) -> list[tuple[Forwarding | None, object]]:
        """End bulk mode, given the headers that the routes here match (cpc.routes).

        Returns (action, region) of the entries that are not routes, by action, for the
        model to move its classes: the routes' classes are cut already.
        """
        out = self._by_action(self._bulk_other)
        self._end_bulk_miss(routed | self.space.union([r for _, r in out]))
        return out

    def _end_bulk_miss(self, matched) -> None:
        """Leave the bulk mode of begin_bulk: the miss is what no entry's region holds, and
        the counts bulk_add left out are made from the entries."""
        self._below = None
        self._routes, self._bulk_other = {}, []
        self._miss = ~matched
        self._prio_count = dict(Counter(map(itemgetter(1), self._entry)))
        lengths = Counter(map(itemgetter(0), self._prefix))  # an entry per prefix
        if len(self._prefix) < len(self._entry):  # and prefixes with more than one
            for (n, _), bucket in self._prefix.items():
                lengths[n] += len(bucket) - 1
        self._length_count = dict(lengths)
        self._lengths = sorted(lengths)
        self._low = None

    def bulk_add(self, entry: FlowEntry, beh: Behaviour, m, pfx: tuple[int, int]):
        """insert() in begin_bulk's mode, for an entry with a destination prefix: it takes
        its match minus the matches of the overlapping entries already here (all of them
        higher or equal in priority, and earlier). Returns the region it took."""
        key = (entry.match.fields, entry.priority, entry.match.in_port)
        plen, value = pfx
        prefix, below = self._prefix, self._below
        earlier = list(below.get(pfx, ()))  # the longer prefixes under this one
        for n in self._bulk_lengths:  # this prefix itself and the shorter ones above it
            if n > plen:
                break
            k = (n, value & _MASKS[n])
            earlier += prefix.get(k, ())
            if n < plen:
                below.setdefault(k, []).append(entry)
        if earlier:
            match = entry.match
            earlier = [o.match.fields for o in earlier if o.match.overlaps(match)]
            if earlier:
                space = self.space
                m = m & ~space.union([space.match_bdd(f) for f in earlier])
        seq = next(_seq)
        if is_route(entry.match.fields):
            routes = self._routes.get(pfx)
            if routes is None:
                routes = self._routes[pfx] = []
            routes.append((self._idx, entry.priority, -seq, beh.action))
        else:
            self._bulk_other.append(key)
        self._entry[key] = entry
        self._seq[key] = seq
        prefix.setdefault(pfx, []).append(entry)
        self._sorted.append((value, seq, entry))
        if self._free:
            ident = self._new_id()
        else:  # _new_id() without the call: a bulk load makes one id per entry
            ident = self._next
            if ident >> CLASS_ID_BITS:
                raise OverflowError("too many header regions for the label width")
            self._next = ident + 1
            self._cube[ident] = None
        self._id[key] = ident
        self._key[ident] = key
        self.beh[ident] = beh
        self.eff[key] = m
        return m

    def identify(self, header) -> Behaviour | None:
        """The behaviour of the entry a concrete header matches here (None: table-miss).

        A routing table answers fastest from its destination prefixes: the buckets along
        the header's destination, highest priority wins (then the earlier entry, as in the
        effective regions). Tables with many entries that do not key on a destination
        prefix walk the labelled regions instead.
        """
        if not self._scannable():
            return self.beh.get(self.classify(header))
        get = header.get
        best = None
        best_p, best_seq = -1, 0
        seq = self._seq
        for bucket in self._along(get("ipv4_dst", 0)):
            for e in bucket or ():
                p = e.priority
                if p < best_p:
                    continue
                for f, v, m in e.match.fields:
                    if (get(f, 0) & m) != v:
                        break
                else:
                    k = (e.match.fields, p, e.match.in_port)
                    if p > best_p or seq[k] < best_seq:
                        best, best_p, best_seq = e, p, seq[k]
        if best is None:
            return None
        return self.beh[self._id[_ikey(best)]]

    def _scannable(self) -> bool:
        """Few enough entries key on something other than a destination prefix that a
        concrete destination's candidates are found by scanning its prefix buckets."""
        return len(self._other) + len(self._prefix.get((0, 0), ())) <= _SCAN_MAX

    def _along(self, dst: int) -> list:
        """The entries that can match destination dst, in buckets (None: empty): those of
        each prefix length along it, then those whose ipv4_dst mask is not a prefix."""
        prefix = self._prefix
        return [prefix.get((n, dst & _MASKS[n])) for n in self._lengths] + [self._other]

    def split(self, hdr) -> list[tuple[Behaviour | None, object]]:
        """The header set hdr cut by entry: [(behaviour or None for the miss, part)]."""
        by_dst = self._split_by_dst(hdr)
        return by_dst if by_dst is not None else self._split_by_label(hdr)

    def _split_by_label(self, hdr) -> list[tuple[Behaviour | None, object]]:
        out = []
        false = self.space.false
        for ident in self.candidates(hdr):
            region = self.miss if ident == self.miss_id else self.eff[self._key[ident]]
            part = hdr & region
            if part != false:
                out.append((self.beh.get(ident), part))
        return out

    def _split_by_dst(self, hdr) -> list[tuple[Behaviour | None, object]] | None:
        """split() from the prefix index, for a header set with one destination address
        (a trace's header, a critical flow's): only the entries along that address can
        meet it. None when hdr spans several destinations or too many entries key on other
        fields. A trace then never builds the label, which every later update would have
        to keep up to date (3,000 traces made updates 1.7x slower for good on the 100k-rule
        fat-tree: docs/benchmarks.md)."""
        if not self._scannable():
            return None
        dst = self.space.one_dst(hdr)
        if dst is None:
            return None
        false = self.space.false
        out = []
        for bucket in self._along(dst):
            for e in bucket or ():
                key = _ikey(e)
                part = hdr & self.eff[key]
                if part != false:
                    out.append((self.beh[self._id[key]], part))
        part = hdr & self.miss
        if part != false:
            out.append((None, part))
        return out

    def insert(
        self, entry: FlowEntry, beh: Behaviour, m, bulk: bool = False
    ) -> list[tuple[object, Behaviour | None]]:
        """Add an entry (match BDD m); returns the regions it took, with who had them.

        bulk=True (many entries, highest priority first) leaves the label to its first use.
        """
        false = self.space.false
        if self._below is not None:  # the model calls bulk_add for entries with a prefix
            self.miss  # noqa: B018 - any other entry ends bulk mode
        key = _ikey(entry)
        upper = None
        if self._entry and entry.priority > self._lowest():
            over = self.overlapping(entry)
            lower = [o for o in over if o.priority < entry.priority]
            # The pieces taken are the lower entries' and the miss's: more than _UNION_MAX
            # of them once lower has _UNION_MAX. Then the entries above may be fewer to OR.
            if len(lower) >= _UNION_MAX:
                upper = [o for o in over if o.priority >= entry.priority]
        else:
            lower = []  # nothing here has a lower priority (bulk loads go highest first)
        self._index(entry, bulk=bulk)
        taken = []
        g = self._miss & m
        if g != false:
            self._miss = self._miss & ~g
            taken.append((g, None))
        for o in lower:
            ok = _ikey(o)
            g = self.eff[ok] & m
            if g != false:
                self.eff[ok] = self.eff[ok] & ~g
                taken.append((g, self.beh[self._id[ok]]))
        ident = self._new_id()
        self._id[key] = ident
        self._key[ident] = key
        self.beh[ident] = beh
        if len(taken) <= _UNION_MAX or upper is None or len(upper) >= len(taken):
            region = taken[0][0] if len(taken) == 1 else self.space.union(g for g, _ in taken)
        else:  # what the entries above do not win: fewer ORs than the pieces taken
            region = m & ~self.space.union([self.eff[_ikey(o)] for o in upper])
        self.eff[key] = region
        if bulk:
            self._label_stale = True  # rebuilt once, on first use
        elif region != false:
            self._relabel(region, ident)
        return taken

    def _relabel(self, region, ident: int) -> None:
        if not self._label_stale:
            super()._relabel(region, ident)

    def _fresh_label(self) -> None:
        if self._label_stale:
            self._label_stale = False
            self.label = self._cube_of(self.miss_id)
            for key, region in self.eff.items():
                super()._relabel(region, self._id[key])

    def classify(self, header) -> int:
        self._fresh_label()
        return super().classify(header)

    def candidates(self, pred) -> list[int]:
        self._fresh_label()
        return super().candidates(pred)

    def remove(self, entry: FlowEntry) -> list[tuple[object, Behaviour | None]]:
        """Drop an entry; returns its region's pieces with the entries (or None) that get them."""
        key = _ikey(entry)
        seq = self._seq[key]
        lower = sorted(
            (o for o in self.overlapping(entry) if o.priority <= entry.priority),
            key=lambda o: (-o.priority, self._seq[_ikey(o)]),
        )
        lower = [o for o in lower if o.priority < entry.priority or self._seq[_ikey(o)] > seq]
        self._unindex(entry)
        ident = self._id.pop(key)
        del self._key[ident]
        del self.beh[ident]
        rest = self.eff.pop(key)
        false = self.space.false
        given = []
        for o in lower:
            if rest == false:
                break
            g = rest & self.space.match_bdd(o.match.fields)
            if g == false:
                continue
            ok = _ikey(o)
            oid = self._id[ok]
            self.eff[ok] = self.eff[ok] | g
            self._relabel(g, oid)
            given.append((g, self.beh[oid]))
            rest = rest & ~g
        if rest != false:
            self._miss = self.miss | rest
            self._relabel(rest, self.miss_id)
            given.append((rest, None))
        self._drop_id(ident)
        self.release_ids()
        return given

    def _lowest(self) -> int:
        low = self._low
        if low is None:
            low = self._low = min(self._prio_count)
        return low

    def action_regions(self) -> list[tuple[object, object]]:
        """(action, the headers this element applies it to), for every action in use."""
        out = self._by_action(self.eff)
        if self._below is not None:  # in bulk mode: the miss is what no region holds
            self._end_bulk_miss(self.space.union([region for _, region in out]))
        return out

    def _by_action(self, keys) -> list[tuple[Forwarding | None, object]]:
        """(action, the union of these entries' regions) for every action among them."""
        by: dict[Forwarding | None, list] = {}
        for key in keys:
            by.setdefault(self.beh[self._id[key]].action, []).append(self.eff[key])
        return [(act, self.space.union(regions)) for act, regions in by.items()]

    def behaviour_of(self, entry: FlowEntry) -> Behaviour:
        """The behaviour identify() returns for headers this entry wins."""
        return self.beh[self._id[_ikey(entry)]]

    def region(self, entry: FlowEntry):
        """The entry's effective region here: the headers it wins."""
        return self.eff[_ikey(entry)]

    def entries(self) -> list[FlowEntry]:
        """Every entry here, oldest first."""
        return sorted(self._entry.values(), key=lambda e: self._seq[_ikey(e)])

    def replace(self, entry: FlowEntry, beh: Behaviour):
        """Same match and priority, new behaviour; returns the entry's effective region."""
        if self._below is not None:
            self.miss  # noqa: B018 - a bulk load's duplicate: leave bulk mode, counts made
        key = _ikey(entry)
        old = self._entry[key]
        self._unindex(old)
        self._index(entry, self._seq[key])
        self.beh[self._id[key]] = beh
        return self.eff[key]

    # --- overlap index ------------------------------------------------------------------------
    def _index(self, entry: FlowEntry, seq: int | None = None, bulk: bool = False) -> None:
        key = _ikey(entry)
        seq = next(_seq) if seq is None else seq
        self._entry[key] = entry
        self._seq[key] = seq
        p = entry.priority
        self._prio_count[p] = self._prio_count.get(p, 0) + 1
        if self._low is not None and p < self._low:
            self._low = p
        pfx = dst_prefix(entry)
        if pfx is None:
            self._other.append(entry)
        else:
            self._prefix.setdefault(pfx, []).append(entry)
            if bulk:  # sorted once, when next needed
                self._sorted.append((pfx[1], seq, entry))
                self._sorted_stale = True
            else:
                bisect.insort(self._by_dst(), (pfx[1], seq, entry))  # seq is unique
            n = self._length_count.get(pfx[0], 0)
            self._length_count[pfx[0]] = n + 1
            if not n:
                self._lengths = sorted(self._length_count)

    def _unindex(self, entry: FlowEntry) -> None:
        key = _ikey(entry)
        del self._entry[key]
        p = entry.priority
        n = self._prio_count[p] - 1
        if n:
            self._prio_count[p] = n
        else:
            del self._prio_count[p]
            if p == self._low:
                self._low = None
        pfx = dst_prefix(entry)
        if pfx is None:
            self._other.remove(entry)
            return
        bucket = self._prefix[pfx]
        bucket.remove(entry)
        if not bucket:
            del self._prefix[pfx]
        n = self._length_count[pfx[0]] - 1
        if n:
            self._length_count[pfx[0]] = n
        else:
            del self._length_count[pfx[0]]
            self._lengths = sorted(self._length_count)
        by_dst = self._by_dst()
        lo = bisect.bisect_left(by_dst, (pfx[1],))  # (v,) sorts before every (v, seq, e)
        while by_dst[lo][2] is not entry:
            lo += 1
        del by_dst[lo]

    def end_bulk(self) -> None:
        """After a bulk load: order the destination index now, not in the first update."""
        self._by_dst()

    def _by_dst(self) -> list[tuple[int, int, FlowEntry]]:
        """The prefix entries by destination value (then age)."""
        if self._sorted_stale:
            self._sorted.sort()  # seq is unique: entries are never compared
            self._sorted_stale = False
        return self._sorted

    def overlapping(self, entry: FlowEntry) -> list[FlowEntry]:
        """Other entries here whose matches overlap entry's match."""
        pfx = dst_prefix(entry)
        found: list[FlowEntry] = list(self._other)
        by_dst = self._by_dst()
        if pfx is None:
            found += [e for _, _, e in by_dst]
        else:
            plen, value = pfx
            for length in self._lengths:  # the prefix itself and its ancestors
                if length > plen:
                    break
                found += self._prefix.get((length, value & _MASKS[length]), ())
            hi = value | (~_MASKS[plen] & 0xFFFFFFFF)
            lo_i = bisect.bisect_left(by_dst, (value,))
            hi_i = bisect.bisect_left(by_dst, (hi + 1,))
            found += [e for _, _, e in by_dst[lo_i:hi_i] if dst_prefix(e)[0] > plen]
        key = _ikey(entry)
        return [e for e in found if _ikey(e) != key and e.match.overlaps(entry.match)]


_SCAN_MAX = 8  # entries without a destination prefix that identify() would scan
_UNION_MAX = 16  # pieces an insert ORs into the new entry's region before it asks above


def _fields_match(entry: FlowEntry, header) -> bool:
    # The element already stands for one in_port: only the header fields remain.
    get = header.get
    return all((get(f, 0) & m) == v for f, v, m in entry.match.fields)


def dst_prefix(entry: FlowEntry) -> tuple[int, int] | None:
    """(prefix length, value) of the entry's ipv4_dst, (0, 0) if unset, None if not a prefix."""
    fields = entry.match.fields
    if not fields or fields[0][0] != "ipv4_dst":  # ipv4_dst comes first (cpc.fields)
        return (0, 0)
    _, value, mask = fields[0]
    n = PREFIX_LENGTH.get(mask)
    return None if n is None else (n, value)
