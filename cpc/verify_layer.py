"""The Verify shim header (docs/verify-header.md) as a scapy layer: for crafting test
packets, reading captures and debugging. The hot paths (tester.packet.parse_frame, the
fuzzer's template patching) do not use it; tests check them against it.

    from cpc.verify_layer import Verify
    pkt = Ether(src=..., dst=...) / Verify(port=0, rule=1) / IP(...) / TCP(...)
    Ether(data)[Verify].rule

Importing this module binds the layer: Ether type 0x0820 carries a Verify header, whose
own `type` field is the EtherType or TPID that follows (IPv4, ARP, 802.1Q, 802.1ad).
Ether type 0x0821 carries the same header with the probe mark; a built `Ether()/Verify()`
is unmarked unless its Ether type is set:

    Ether(src=..., dst=..., type=VERIFY_ETHERTYPE_MARKED) / Verify(port=0, rule=1) / ...
"""

from __future__ import annotations

from scapy.fields import XIntField, XShortEnumField, XShortField
from scapy.layers.inet import IP
from scapy.layers.l2 import ARP, ETHER_TYPES, Dot1AD, Dot1Q, Ether
from scapy.packet import Packet, bind_layers

from .tags import VERIFY_ETHERTYPE, VERIFY_ETHERTYPE_MARKED, VERIFY_PORT_INIT, VERIFY_RULE_INIT

__all__ = ["Verify", "is_marked"]


class Verify(Packet):
    """Verify_Port (Bloom filter of the ports crossed), Verify_Rule (the rule chain), and
    the EtherType of what follows. The layer's own EtherType, 0x0820 or marked 0x0821, is
    its parent's."""

    name = "Verify"
    fields_desc = [
        XIntField("port", VERIFY_PORT_INIT),
        XShortField("rule", VERIFY_RULE_INIT),
        XShortEnumField("type", 0, ETHER_TYPES),
    ]

    def mysummary(self):
        return self.sprintf("Verify port=%Verify.port% rule=%Verify.rule%")


def is_marked(pkt) -> bool:
    """True when pkt's Verify header carries the probe mark (its Ether type is 0x0821)."""
    return Verify in pkt and pkt[Ether].type == VERIFY_ETHERTYPE_MARKED


# The marked binding first: the last one is what a built Ether()/Verify() gets (0x0820).
bind_layers(Ether, Verify, type=VERIFY_ETHERTYPE_MARKED)
bind_layers(Ether, Verify, type=VERIFY_ETHERTYPE)
for _layer, _type in ((IP, 0x0800), (ARP, 0x0806), (Dot1Q, 0x8100), (Dot1AD, 0x88A8)):
    bind_layers(Verify, _layer, type=_type)
