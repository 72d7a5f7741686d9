"""How probes enter the network.

    class Injector(Protocol):
        def inject(self, ingress: Port, frames: Sequence[bytes]) -> int   # frames sent

Two injectors:
  * PacketOutInjector: OpenFlow PACKET_OUT on the ingress switch, in_port = the edge
    port, actions = output:TABLE, so the probe goes through the flow tables exactly like a
    packet arriving on that port (the patched OVS tags only entries, not packet-out
    actions). The daemon passes its switch connections as a callable
    `send_packet_out(dpid, in_port, data)`; `ofp13_packet_out()` is the wire message
    such a callable sends, and `OsKenPacketOut` adapts os-ken datapaths.
    Frames should carry the initial Verify shim (Crafter(pretag=True)): the switch does
    not see a packet-out arrive on its edge port, so its edge push_verify may not run;
    push_verify leaves a present header alone, so a pre-tagged probe is tagged the same
    either way.
  * RawSocketInjector: AF_PACKET on a host-side interface (testbeds: the frame really
    arrives on the edge port). Use untagged frames (Crafter(pretag=False)).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from cpc.results import Port
from cpc.rules import OFPP_TABLE

__all__ = [
    "Injector",
    "OsKenPacketOut",
    "PacketOutInjector",
    "RawSocketInjector",
    "RecordingInjector",
    "ofp13_packet_out",
]

SendPacketOut = Callable[[int, int, bytes], None]


@runtime_checkable
class Injector(Protocol):
    def inject(self, ingress: Port, frames: Sequence[bytes]) -> int: ...


class PacketOutInjector:
    def __init__(self, send_packet_out: SendPacketOut) -> None:
        self.send = send_packet_out
        self.sent = 0

    def inject(self, ingress: Port, frames: Sequence[bytes]) -> int:
        dpid, port = ingress
        for f in frames:
            self.send(dpid, port, f)
        self.sent += len(frames)
        return len(frames)


def ofp13_packet_out(in_port: int, data: bytes, xid: int = 0) -> bytes:
    """OpenFlow 1.3 PACKET_OUT (no buffer, in_port, actions=[output:TABLE]), serialized by
    os-ken's parser."""
    from os_ken.ofproto import ofproto_v1_3 as ofp
    from os_ken.ofproto import ofproto_v1_3_parser as parser

    class _Dp:  # the serializer only needs these two attributes
        ofproto = ofp
        ofproto_parser = parser

    dp = _Dp()
    msg = parser.OFPPacketOut(
        dp,
        buffer_id=ofp.OFP_NO_BUFFER,
        in_port=in_port,
        actions=[parser.OFPActionOutput(OFPP_TABLE, 0)],
        data=data,
    )
    msg.set_xid(xid)
    msg.serialize()
    return bytes(msg.buf)


class OsKenPacketOut:
    """send_packet_out(dpid, in_port, data) over os-ken Datapath objects {dpid: datapath}."""

    def __init__(self, datapaths: Mapping[int, object]) -> None:
        self.datapaths = datapaths

    def __call__(self, dpid: int, in_port: int, data: bytes) -> None:
        dp = self.datapaths[dpid]
        ofp, parser = dp.ofproto, dp.ofproto_parser
        dp.send_msg(
            parser.OFPPacketOut(
                dp,
                buffer_id=ofp.OFP_NO_BUFFER,
                in_port=in_port,
                actions=[parser.OFPActionOutput(ofp.OFPP_TABLE, 0)],
                data=data,
            )
        )


class RawSocketInjector:
    """AF_PACKET on the host-side interface of each edge port: {ingress: ifname}.

    A socket is opened per interface on first use (in the caller's network namespace);
    `sockets` may supply already-open sockets instead (e.g. opened inside a namespace)."""

    def __init__(
        self,
        ifaces: Mapping[Port, str] | None = None,
        sockets: Mapping[Port, socket.socket] | None = None,
    ) -> None:
        self.ifaces = dict(ifaces or {})
        self._socks: dict[Port, socket.socket] = dict(sockets or {})
        self.sent = 0

    def _sock(self, ingress: Port) -> socket.socket:
        s = self._socks.get(ingress)
        if s is None:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            s.bind((self.ifaces[ingress], 0))
            self._socks[ingress] = s
        return s

    def inject(self, ingress: Port, frames: Sequence[bytes]) -> int:
        s = self._sock(ingress)
        n = 0
        for f in frames:
            s.send(f)
            n += 1
        self.sent += n
        return n

    def close(self) -> None:
        for s in self._socks.values():
            s.close()
        self._socks.clear()


class RecordingInjector:
    """Keeps (ingress, frame) pairs; for tests and simulations."""

    def __init__(self) -> None:
        self.frames: list[tuple[Port, bytes]] = []

    def inject(self, ingress: Port, frames: Sequence[bytes]) -> int:
        self.frames.extend((ingress, f) for f in frames)
        return len(frames)
