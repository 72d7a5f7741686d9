"""Flow tables of one switch, split into elements, with an overlap index.

An element is one (dpid, table, in_port) slice of a flow table: in_port None
holds the entries that match any input port, in_port p holds the entries that
match only p. For a packet on port p the table's answer is the higher-priority
of the two elements' answers. Keeping in_port out of the header bits keeps
ingress ports what they are: locations.
"""

from __future__ import annotations

import bisect
import itertools

from .results import RuleRef
from .rules import FlowEntry, Instructions
from .tags import rule_bytes

_seq = itertools.count()


class Behaviour:
    """What an element does with the headers it owns: Verify identity plus instructions.

    Interned by the model, so equal behaviours are the same object. Two entries with
    the same behaviour are indistinguishable by forwarding and by Verify tags.
    """

    __slots__ = ("dpid", "table", "priority", "cookie", "rule_id", "instructions", "ur", "ref")

    def __init__(self, dpid, table, priority, cookie, rule_id, instructions: Instructions):
        self.dpid = dpid
        self.table = table
        self.priority = priority
        self.cookie = cookie
        self.rule_id = rule_id
        self.instructions = instructions
        self.ur = rule_bytes(dpid, table, priority, cookie, rule_id)
        self.ref = RuleRef(table, priority, cookie, rule_id)


class Element:
    __slots__ = ("idx", "dpid", "table", "in_port", "entries", "_prefix", "_sorted", "_other")

    def __init__(self, idx: int, dpid: int, table: int, in_port: int | None) -> None:
        self.idx = idx
        self.dpid = dpid
        self.table = table
        self.in_port = in_port
        self.entries: dict[tuple, FlowEntry] = {}  # (match fields, priority) -> entry
        self._prefix: dict[tuple[int, int], list[FlowEntry]] = {}
        self._sorted: list[tuple[int, int, FlowEntry]] = []  # (dst low, seq, entry)
        self._other: list[FlowEntry] = []  # entries whose ipv4_dst mask is not a prefix

    @staticmethod
    def key_of(entry: FlowEntry) -> tuple:
        return (entry.match.fields, entry.priority)

    def add(self, entry: FlowEntry) -> None:
        self.entries[self.key_of(entry)] = entry
        pfx = _dst_prefix(entry)
        if pfx is None:
            self._other.append(entry)
        else:
            self._prefix.setdefault(pfx, []).append(entry)
            bisect.insort(self._sorted, (pfx[1], next(_seq), entry), key=lambda t: t[0])

    def remove(self, entry: FlowEntry) -> None:
        del self.entries[self.key_of(entry)]
        pfx = _dst_prefix(entry)
        if pfx is None:
            self._other.remove(entry)
            return
        bucket = self._prefix[pfx]
        bucket.remove(entry)
        if not bucket:
            del self._prefix[pfx]
        lo = bisect.bisect_left(self._sorted, pfx[1], key=lambda t: t[0])
        while self._sorted[lo][2] is not entry:
            lo += 1
        del self._sorted[lo]

    def overlapping(self, entry: FlowEntry) -> list[FlowEntry]:
        """Other entries of this element whose matches overlap entry's match."""
        pfx = _dst_prefix(entry)
        found: list[FlowEntry] = list(self._other)
        if pfx is None:
            found += [e for _, _, e in self._sorted]
        else:
            plen, value = pfx
            for length in range(plen + 1):  # the prefix itself and its ancestors
                mask = _plen_mask(length)
                found += self._prefix.get((length, value & mask), ())
            hi = value | (~_plen_mask(plen) & 0xFFFFFFFF)
            lo_i = bisect.bisect_left(self._sorted, value, key=lambda t: t[0])
            hi_i = bisect.bisect_right(self._sorted, hi, key=lambda t: t[0])
            found += [e for _, _, e in self._sorted[lo_i:hi_i] if _dst_prefix(e)[0] > plen]
        return [e for e in found if e is not entry and e.match.overlaps(entry.match)]


def _plen_mask(length: int) -> int:
    return (0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF


def _dst_prefix(entry: FlowEntry) -> tuple[int, int] | None:
    """(prefix length, value) of the entry's ipv4_dst, (0, 0) if unset, None if not a prefix."""
    vm = entry.match.get("ipv4_dst")
    if vm is None:
        return (0, 0)
    value, mask = vm
    inv = ~mask & 0xFFFFFFFF
    if inv & (inv + 1):
        return None
    return (32 - inv.bit_length(), value)
