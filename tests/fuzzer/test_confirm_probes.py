"""Confirmation copies: every copy is sent, interleaved with the other probes, never more
than the share of a batch, and an ingress that is not fuzzed is refused."""

from cpc.model import Model
from fuzzer.engine import CONFIRM_SHARE, Fuzzer
from pazzdata.workloads import generate

HDR = {"eth_type": 0x0800, "ipv4_dst": 0x0A000101, "ip_proto": 6, "tp_dst": 80}


def _fuzzer():
    """A fuzzer on a 2x2 grid and its first edge port."""
    wl = generate("grid", 2, 200, rule_ids=True)
    model = Model(wl.topo)
    model.add_entries(wl.entries, wl.groups)
    model.build()
    return Fuzzer(model, rate=1e6, seed=1), wl.topo.edge_ports()[0]


def test_confirm_copies_share_and_refusal():
    fz, ing = _fuzzer()
    hdr = HDR
    assert fz.confirm(ing, hdr, 10)
    assert not fz.confirm((99, 1), hdr, 10)  # no such ingress
    assert not fz.confirm(ing, hdr, 0)
    sent = []
    for _ in range(10):
        batch = fz.next_probes(8)
        mine = [p for p in batch if p.area == "confirm"]
        assert len(mine) <= int(8 * CONFIRM_SHARE)
        assert len(batch) > len(mine)  # the other probes go on
        sent += mine
    assert len(sent) == 10 and fz.confirm_sent == 10
    assert all(p.ingress == ing and p.header == hdr for p in sent)


def test_replays_go_out_as_probes_of_their_area():
    """A lost probe's replay (tester.probeloss): its copies go out with the confirmation
    copies, as delivered probes of the area named, so on_delivered counts them."""
    fz, ing = _fuzzer()
    hdr = HDR
    assert fz.replay(ing, hdr, "delivered X", 8)
    assert not fz.replay((99, 1), hdr, "delivered X", 8)
    handed = []
    fz.on_delivered = lambda i, h, label: handed.append((i, h, label))

    class Sink:
        def inject(self, ingress, frames):
            pass

    for _ in range(10):
        fz.step(Sink(), max_probes=8)
    mine = [x for x in handed if x[2] == "delivered X"]
    assert mine == [(ing, hdr, "delivered X")] * 8
