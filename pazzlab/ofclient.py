"""Blocking clients of one ovs-vswitchd, for the agent comparison (pazzlab.agents):

OfClient   OpenFlow 1.3 over a bridge's management socket (RUNDIR/BRIDGE.mgmt, the one
           ovs-ofctl uses): send messages, collect the errors that answer them, dump the
           flow table.
Unixctl    the daemon's control socket (JSON-RPC, what ovs-appctl speaks), for
           ofproto/trace without a process per packet.
"""

from __future__ import annotations

import json
import socket
import struct

import ofwire as of

OFPGC_DELETE, OFPG_ALL = 2, 0xFFFFFFFC


class OfClient:
    def __init__(self, path: str, timeout: float = 10.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = bytearray()
        self.xid = 0x100
        self.sock.sendall(of.hello((of.OFP13,)))
        hello = self._read()
        if of.header(hello)[1] != of.OFPT_HELLO or of.OFP13 not in of.hello_versions(hello):
            raise RuntimeError(f"{path}: the switch does not speak OpenFlow 1.3")

    def close(self) -> None:
        self.sock.close()

    def _read(self) -> bytes:
        while True:
            if len(self.buf) >= 8:
                ln = of.header(self.buf)[2]
                if len(self.buf) >= ln:
                    msg = bytes(self.buf[:ln])
                    del self.buf[:ln]
                    return msg
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the switch closed the OpenFlow connection")
            self.buf += data

    def next_xid(self) -> int:
        self.xid += 1
        return self.xid

    def exchange(self, msgs: list[bytes]) -> tuple[dict[int, tuple[int, int]], list[bytes]]:
        """Send msgs (their xids as given) and a barrier; return {xid: (type, code)} of the
        errors and the other replies received before the barrier's."""
        bxid = self.next_xid()
        self.sock.sendall(b"".join(msgs) + of.message(of.OFP13, of.OFPT_BARRIER_REQUEST, bxid))
        errors, other = {}, []
        while True:
            msg = self._read()
            _, t, _, xid = of.header(msg)
            if t == of.OFPT_BARRIER_REPLY and xid == bxid:
                return errors, other
            if t == of.OFPT_ERROR:
                errors[xid] = struct.unpack_from("!HH", msg, 8)
            elif t == of.OFPT_ECHO_REQUEST:
                self.sock.sendall(of.message(of.OFP13, of.OFPT_ECHO_REPLY, xid, msg[8:]))
            else:
                other.append(msg)

    def clear(self) -> None:
        """Delete every flow entry and group."""
        fm = of.flow_mod(self.next_xid(), of.OFPTT_ALL, of.FC_DELETE, 0, b"", b"")
        gm = of.message(
            of.OFP13,
            of.OFPT_GROUP_MOD,
            self.next_xid(),
            of.GROUP_MOD.pack(OFPGC_DELETE, 0, OFPG_ALL),
        )
        errors, _ = self.exchange([fm, gm])
        if errors:
            raise RuntimeError(f"clearing the switch failed: {errors}")

    def dump_flows(self) -> list[of.FlowStat]:
        xid = self.next_xid()
        self.sock.sendall(of.flow_stats_request(xid))
        out: list[of.FlowStat] = []
        while True:
            msg = self._read()
            _, t, _, rxid = of.header(msg)
            if rxid != xid:
                continue
            if t == of.OFPT_ERROR:
                raise RuntimeError(
                    f"flow-stats request refused: {struct.unpack_from('!HH', msg, 8)}"
                )
            mtype, flags = struct.unpack_from("!HH", msg, 8)
            stats, _ = of.parse_flow_stats_body(msg[16:], strip=True)
            out += stats
            if not flags & of.OFPMPF_REPLY_MORE:
                return out


class Unixctl:
    """JSON-RPC over a unixctl socket: call(method, *params) -> the reply's text."""

    def __init__(self, path: str, timeout: float = 10.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.dec = json.JSONDecoder()
        self.buf = ""
        self.id = 0

    def close(self) -> None:
        self.sock.close()

    def call(self, method: str, *params: str) -> str:
        self.id += 1
        req = {"method": method, "params": list(params), "id": self.id}
        self.sock.sendall(json.dumps(req).encode())
        while True:
            text = self.buf.lstrip()
            if text:
                try:
                    reply, end = self.dec.raw_decode(text)
                except json.JSONDecodeError:
                    pass
                else:
                    self.buf = text[end:]
                    if reply.get("id") != self.id:
                        continue
                    if reply.get("error") is not None:
                        raise RuntimeError(f"{method} {params}: {reply['error']}")
                    return reply["result"]
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the daemon closed its control socket")
            self.buf += data.decode()
