"""NICE's invariants over the controller's traffic: DirectPaths, StrictDirectPaths and
NoForgottenPackets, from what the proxy relays.

direct_paths         a PACKET_IN for a header that the intended rules, at that switch and
                     port, deliver end to end (every outcome leaves the network): the
                     switch asks the controller about traffic it has a path for.
strict_direct_paths  the same, where the reply (addresses and ports swapped) is delivered
                     back end to end too: both directions are installed.
no_forgotten_packets a PACKET_IN with a buffer_id that no PACKET_OUT or FLOW_MOD of the
                     controller releases within `forgotten_after` seconds.

A path counts as installed once every switch on it has had no committed change for
`grace` seconds: packets already in flight when the controller installs a path still
reach it, which is not a fault. Findings are keyed by the switch and the entry that should
have forwarded the header (or the switch, for buffers); each resolves after
`resolve_after` seconds without another occurrence.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

from cpc.intents import reply_header
from cpc.model import Model
from cpc.topology import Topology
from tester.packet import parse_frame

__all__ = ["PacketInWatch", "Occurrence"]

NO_BUFFER = 0xFFFFFFFF


@dataclass
class Occurrence:
    """An open finding of the watch: what an IntentFindings row is made from."""

    key: str
    name: str
    summary: str
    detail: dict
    last: float
    count: int = 1
    stored: bool = field(default=False, compare=False)


class PacketInWatch:
    def __init__(
        self,
        model: Model,
        topo: Topology,
        grace: float = 1.0,
        forgotten_after: float = 5.0,
        resolve_after: float = 60.0,
        clock=time.monotonic,
    ) -> None:
        self.model = model
        self.topo = topo
        self.grace = grace
        self.forgotten_after = forgotten_after
        self.resolve_after = resolve_after
        self.clock = clock
        self.changed: dict[int, float] = {}  # dpid -> when its table last changed
        self.buffers: OrderedDict[tuple[int, int], tuple[float, dict, int]] = OrderedDict()
        self.open: dict[str, Occurrence] = {}
        self.packet_ins = 0
        self.unparsed = 0

    # --- what the proxy sees ------------------------------------------------------------------
    def committed(self, dpid: int) -> None:
        self.changed[dpid] = self.clock()

    def packet_in(self, dpid: int, buffer_id: int, in_port: int | None, frame: bytes) -> None:
        now = self.clock()
        self.packet_ins += 1
        pf = parse_frame(frame)
        if in_port is None or not pf.complete or dpid not in self.topo.switches:
            self.unparsed += 1
            return
        hdr = pf.header
        if buffer_id != NO_BUFFER:
            self.buffers[(dpid, buffer_id)] = (now, hdr, in_port)
            while len(self.buffers) > 65536:  # a switch's buffers are far fewer
                self.buffers.popitem(last=False)
        self._direct(dpid, in_port, hdr, now)

    def released(self, dpid: int, buffer_id: int) -> None:
        if buffer_id != NO_BUFFER:
            self.buffers.pop((dpid, buffer_id), None)

    # --- the invariants -----------------------------------------------------------------------
    def _installed(self, ingress, hdr, now: float):
        """The outcomes if every one leaves the network on a path that has settled."""
        outs = self.model.trace(ingress, hdr)
        if not outs or any(o.kind != "egress" for o in outs):
            return None
        for o in outs:
            for h in o.hops:
                if now - self.changed.get(h.dpid, -1e18) < self.grace:
                    return None
        return outs

    def _direct(self, dpid: int, in_port: int, hdr: dict, now: float) -> None:
        outs = self._installed((dpid, in_port), hdr, now)
        if outs is None:
            return
        sw = self.topo.switches[dpid].name
        first = outs[0].hops[0].rules
        rule = (
            f"table={first[0].table} priority={first[0].priority} cookie=0x{first[0].cookie:x}"
            if first
            else "no entry"
        )
        where = f"{sw}:{in_port}"
        detail = {"switch": sw, "in_port": in_port, "header": hdr, "entry": rule, "paths": outs}
        self._occur(
            f"direct_paths|{sw} {rule}",
            "direct_paths",
            f"direct_paths: {sw} sent a packet to the controller that its entry {rule} "
            f"forwards (from {where})",
            detail,
            now,
        )
        egress = outs[0].egress
        rep = reply_header(hdr)
        back = self._installed(egress, rep, now)
        if back is not None and any(o.egress == (dpid, in_port) for o in back):
            d2 = dict(detail, reply=rep, reply_paths=back)
            self._occur(
                f"strict_direct_paths|{sw} {rule}",
                "strict_direct_paths",
                f"strict_direct_paths: {sw} sent a packet to the controller though both "
                f"directions are installed (from {where})",
                d2,
                now,
            )

    def _occur(self, key: str, name: str, summary: str, detail: dict, now: float) -> None:
        occ = self.open.get(key)
        if occ is None:
            self.open[key] = Occurrence(key, name, summary, detail, now)
        else:
            occ.count += 1
            occ.last = now

    def tick(self) -> list[Occurrence]:
        """Raise forgotten buffers; resolve the quiet findings. Returns those resolved."""
        now = self.clock()
        while self.buffers:
            (dpid, buf), (t, hdr, in_port) = next(iter(self.buffers.items()))
            if now - t < self.forgotten_after:
                break
            del self.buffers[(dpid, buf)]
            sw = self.topo.switches[dpid].name
            self._occur(
                f"no_forgotten_packets|{sw}",
                "no_forgotten_packets",
                f"no_forgotten_packets: {sw} buffered a packet (buffer {buf}) that the "
                f"controller did not release within {self.forgotten_after:g} s",
                {"switch": sw, "in_port": in_port, "buffer_id": buf, "header": hdr, "paths": []},
                now,
            )
        gone = [o for o in self.open.values() if now - o.last >= self.resolve_after]
        for o in gone:
            del self.open[o.key]
        return gone
