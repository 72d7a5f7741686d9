"""A pure-Python reference emitter: what patched OVS sends, for tests and benchmarks.

Given deliveries (from the model, the reference data plane, or built by hand), it
builds the egress frame with the Verify header as the packet leaves, wraps it in
a report flow sample, and packs samples into sFlow v5 datagrams with per-agent
sequence numbers, the way an sFlow agent on each switch would.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

from cpc.results import Delivery, Port

from .ifmap import IfMap
from .packet import build_frame
from .sflow import FlowSample, encode_datagram, encode_flow_sample

__all__ = ["synthetic_ifmap", "ReferenceEmitter"]


def agent_of(dpid: int) -> str:
    return f"10.{(dpid >> 16) & 255}.{(dpid >> 8) & 255}.{dpid & 255}"


def synthetic_ifmap(ports: Iterable[Port], base: int = 100) -> IfMap:
    """One agent per switch (10.x.y.z from the dpid), ifIndex = base + OpenFlow port."""
    m = IfMap()
    for dpid, port in ports:
        m.add(agent_of(dpid), base + port, (dpid, port), 0)
    return m


class ReferenceEmitter:
    def __init__(
        self,
        sampling_rate: int = 1,
        base: int = 100,
        expanded: bool = False,
        ovs_marking: bool = False,
    ) -> None:
        """ovs_marking: mark reports the way patched OVS does (data source 2:0x820000)."""
        self.ovs_marking = ovs_marking
        self.sampling_rate = sampling_rate
        self.base = base
        self.expanded = expanded
        self._dg_seq: dict[str, int] = {}
        self._sample_seq: dict[tuple[str, int], int] = {}
        self._pending: dict[str, list[bytes]] = {}

    def report_sample(
        self,
        egress: Port,
        header: dict,
        verify_port: int,
        verify_rule: int,
        in_if: int = 0,
        marked: bool = False,
    ) -> FlowSample:
        """marked: a probe's report, as patched OVS sends it for every marked packet
        (the shim keeps the mark, sampling rate 1)."""
        agent = agent_of(egress[0])
        ifi = self.base + egress[1]
        n = self._sample_seq.get((agent, ifi), 0) + 1
        self._sample_seq[(agent, ifi)] = n
        frame = build_frame(header, (verify_port, verify_rule), marked=marked)
        stype, sidx = (2, 0x820000) if self.ovs_marking else (0, ifi)
        rate = 1 if marked else self.sampling_rate
        return FlowSample(
            n,
            stype,
            sidx,
            rate,
            n * rate,
            0,
            0,
            in_if,
            0,
            ifi,
            1,
            len(frame) + 4,
            4,
            frame[:128],
            self.expanded,
        )

    def ingress_sample(
        self, ingress: Port, header: dict, verify: tuple[int, int] | None = None
    ) -> FlowSample:
        """An ordinary ingress sample; verify: the (Verify_Port, Verify_Rule) a packet
        carries when it arrives over a link (a per-hop sample), None for a host's."""
        ifi = self.base + ingress[1]
        frame = build_frame(header, verify)
        stype, sidx = (2, 1000) if self.ovs_marking else (0, ifi)
        key = (agent_of(ingress[0]), -ifi)  # numbered per data source, apart from reports
        n = self._sample_seq.get(key, 0) + 1
        self._sample_seq[key] = n
        return FlowSample(
            n,
            stype,
            sidx,
            self.sampling_rate,
            n * self.sampling_rate,
            0,
            0,
            ifi,
            2,
            0x3FFFFFFF,
            1,
            len(frame) + 4,
            4,
            frame[:128],
            self.expanded,
        )

    def add_delivery(self, d: Delivery, header: dict) -> bool:
        """Queue the report of a Delivery that left the network; False for other kinds."""
        if d.kind != "egress" or d.egress is None:
            return False
        self.add(d.egress, header, d.verify_port, d.verify_rule)
        return True

    def add_arrivals(self, arrivals) -> int:
        """Queue a per-hop sample of each arrival over a link (cpc.refdp.RefDataPlane.
        arrivals: (port, header, Verify_Port, Verify_Rule, hops)); returns how many."""
        n = 0
        for port, header, vp, vr, _ in arrivals:
            self.add_ingress(port, header, (vp, vr))
            n += 1
        return n

    def add(
        self,
        egress: Port,
        header: dict,
        verify_port: int,
        verify_rule: int,
        marked: bool = False,
    ) -> None:
        s = self.report_sample(egress, header, verify_port, verify_rule, marked=marked)
        self._pending.setdefault(agent_of(egress[0]), []).append(encode_flow_sample(s))

    def add_ingress(
        self, ingress: Port, header: dict, verify: tuple[int, int] | None = None
    ) -> None:
        s = self.ingress_sample(ingress, header, verify)
        self._pending.setdefault(agent_of(ingress[0]), []).append(encode_flow_sample(s))

    def flush(self, per_datagram: int = 8) -> list[bytes]:
        """The queued samples as datagrams (each agent's in order, seq numbers consecutive)."""
        out = []
        for agent, samples in self._pending.items():
            for i in range(0, len(samples), per_datagram):
                seq = self._dg_seq.get(agent, 0) + 1
                self._dg_seq[agent] = seq
                out.append(encode_datagram(agent, 0, seq, seq * 10, samples[i : i + per_datagram]))
        self._pending.clear()
        return out

    def send(self, addr: tuple[str, int], datagrams: Iterable[bytes]) -> int:
        family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        n = 0
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            for d in datagrams:
                s.sendto(d, addr)
                n += 1
        return n
