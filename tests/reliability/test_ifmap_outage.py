"""A reload while a switch's OVSDB is unreachable keeps that switch's sFlow ifIndex map:
its reports are still mapped and judged, the reload answer (pazzctl exit 3) names the
switch, a metric and status say the map is stale, and once the OVSDB answers again the
map read from it (here with other ifIndexes) is in force. The OVSDB is a stand-in
ovs-vsctl in ovs.bin_dir that answers from files, or fails as an unreachable one does."""

from __future__ import annotations

import json
import socket
import time

from cpc.fields import parse_header
from cpc.refdp import RefDataPlane
from pazzdata import workloads
from pazzlab.demo import metrics_of
from pazzlab.flowhash import select_bucket
from tester.emit import ReferenceEmitter, agent_of
from tests.pazzd.helpers import Pazzd, base_config, pazzctl, wait_for, write_config

OLD_BASE, NEW_BASE = 100, 300  # ifIndex = BASE + OpenFlow port, before and after

VSCTL = """#!/bin/sh
for a; do table=$a; done
if [ -e {d}/down ]; then
  echo "ovs-vsctl: unix:{d}/db.sock: database connection failed (Connection refused)" >&2
  exit 1
fi
cat {d}/$table.json
"""


def _write_ovsdb(d, dpid: int, ports: list[int], base: int) -> None:
    """Bridge, Port and Interface tables as `ovs-vsctl --format=json list` prints them."""

    def table(heads, rows):
        (d / f"{heads[0]}.json").write_text(json.dumps({"headings": heads[1:], "data": rows}))

    table(
        ["Bridge", "_uuid", "datapath_id", "ports"],
        [[["uuid", "br"], f"{dpid:016x}", ["set", [["uuid", f"p{p}"] for p in ports]]]],
    )
    table(["Port", "_uuid", "interfaces"], [[["uuid", f"p{p}"], ["uuid", f"i{p}"]] for p in ports])
    table(
        ["Interface", "_uuid", "name", "ofport", "ifindex", "other_config"],
        [[["uuid", f"i{p}"], f"eth{p}", p, base + p, ["map", []]] for p in ports],
    )


def _traffic(wl):
    """(ingress, header, delivery) of flows the reference data plane delivers."""
    ref = RefDataPlane(wl.topo, wl.entries, wl.groups, select=select_bucket)
    out = []
    for src in sorted(wl.hosts):
        for i, net in enumerate(sorted(wl.prefixes)):
            if wl.prefixes[net] == src:
                continue
            ip = net + 9 + i
            h = parse_header(
                f"tcp_dst=80,tcp_src={2000 + i},nw_src=10.0.{int(src[1:]) - 1}.9,"
                f"nw_dst={ip >> 24}.{(ip >> 16) & 255}.{(ip >> 8) & 255}.{ip & 255}"
            )
            for dl, final in ref.send_with_headers(wl.hosts[src], h):
                if dl.kind == "egress" and dl.egress is not None:
                    out.append((dl, final))
    return out


def test_reload_during_an_ovsdb_outage_keeps_the_switch_mapped(tmp_path):
    wl = workloads.generate("grid", 2, 40, rule_ids=True, acls=1)  # as base_config's
    deliveries = _traffic(wl)
    dpid = deliveries[0][0].egress[0]  # the switch whose map comes from its OVSDB
    mine = [(dl, h) for dl, h in deliveries if dl.egress[0] == dpid]
    assert len(mine) >= 4
    name = wl.topo.switches[dpid].name
    ovsdb = tmp_path / "ovsdb"
    ovsdb.mkdir()
    _write_ovsdb(ovsdb, dpid, wl.topo.ports_of(dpid), OLD_BASE)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ovs-vsctl").write_text(VSCTL.format(d=ovsdb))
    (bin_dir / "ovs-vsctl").chmod(0o755)
    cfg = base_config(tmp_path)
    cfg["ovs"] = {"bin_dir": str(bin_dir)}
    cfg["switches"] = [{"switch": name, "ovsdb": f"unix:{ovsdb}/db.sock", "agent": agent_of(dpid)}]
    d = Pazzd(write_config(tmp_path / "pazzd.yaml", cfg))
    em = ReferenceEmitter(base=OLD_BASE)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        st = d.wait_ready()
        host, port = st["sflow"].rsplit(":", 1)
        metrics = st["metrics"]

        def tester():
            return d.call("status")["tester"]

        def send(base: int, want: int) -> dict:
            """Reports of `mine` at ifIndex base + port; waits until pazzd counted them."""
            em.base = base
            for dl, h in mine:
                em.add_delivery(dl, h)
            for dg in em.flush(per_datagram=4):
                sock.sendto(dg, (host, int(port)))
            return wait_for(lambda: (t := tester())["reports"] >= want and t) or tester()

        n = len(mine)
        t = send(OLD_BASE, n)
        assert (t["consistent"], t["unknown_interface"]) == (n, 0), t
        assert d.call("status")["ifmap"]["stale"] == []

        (ovsdb / "down").touch()
        rl = pazzctl(d.sock, "reload", check=False)
        assert rl.returncode == 3, (rl.stdout, rl.stderr)
        assert "reloaded with warnings" in rl.stdout and f"switch {name}:" in rl.stdout
        assert "database connection failed" in rl.stdout
        (stale,) = d.call("status")["ifmap"]["stale"]
        assert stale["switches"] == [name] and stale["interfaces"] == len(wl.topo.ports_of(dpid))
        assert metrics_of(metrics)[f'pazz_sflow_ifmap_stale{{switch="{name}"}}'] == 1
        assert f"sFlow ifIndex map of switch {name} not refreshed" in d.log_text()

        # During the outage: the switch's reports are still mapped and judged.
        t = send(OLD_BASE, 2 * n)
        assert (t["consistent"], t["unknown_interface"]) == (2 * n, 0), t

        # The OVSDB answers again, with other ifIndexes: the retry puts them in force.
        _write_ovsdb(ovsdb, dpid, wl.topo.ports_of(dpid), NEW_BASE)
        (ovsdb / "down").unlink()
        assert wait_for(lambda: d.call("status")["ifmap"]["stale"] == [], timeout=15)
        assert metrics_of(metrics)[f'pazz_sflow_ifmap_stale{{switch="{name}"}}'] == 0
        assert f"sFlow ifIndex map of switch {name} refreshed" in d.log_text()
        t = send(NEW_BASE, 3 * n)
        assert (t["consistent"], t["unknown_interface"]) == (3 * n, 0), t
        t = send(OLD_BASE, 4 * n)  # the old ifIndexes are gone
        assert (t["consistent"], t["unknown_interface"]) == (3 * n, n), t
        time.sleep(0.2)
        assert pazzctl(d.sock, "reload").stdout.strip() == "config reloaded"
    finally:
        sock.close()
        assert d.stop() == 0, d.log_text()
