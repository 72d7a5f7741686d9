"""The web view on the lab's larger networks, in headless Chromium at 1280 px: the 4-switch
grid, the 16-switch grid and the k=4 fat-tree of patched OVS, the controller app feeding
pazzd through its proxy, production traffic. A misroute is injected with ovs-ofctl behind
the controller's back; the page is then opened by a deep link to the fault, and from its
DOM (one snapshot, so that a redraw between two reads cannot mix two samples):

- the red arrows drawn solid are exactly the ports the packet really entered by: the
  reference data plane (cpc.refdp) over the flow tables dumped from OVS, sending the
  fault's header in at every edge port, keeping the outcomes at the fault's egress (or,
  for a per-hop sample, the arrivals where the sample was taken) with the Verify_Port the
  page shows; no other red arrow is solid;
- the callout names the changed output with the intended one;
- the console has no error.

Screenshots go to docs/ui/ when PAZZ_UI_SHOTS=1, else to the test's tmp path."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from cpc.fields import parse_header
from cpc.ofctl import parse_flow
from cpc.refdp import RefDataPlane
from pazzapi import call
from pazzlab.demo import bring_up
from pazzlab.lab import Lab
from pazzlab.ovs import free_tcp_port, stop_processes
from tests.pazzd.helpers import lab_prefix, pazzctl

from .browser import chrome, console_errors, css, wait_for

pytestmark = pytest.mark.ovs

DOCS = Path(__file__).resolve().parents[3] / "docs" / "ui"
SNAPSHOT = """
const vp = document.querySelector('#fault-detail tr[data-field="actual"] td');
const keys = (sel) => [...document.querySelectorAll(sel)].map((e) => e.dataset.at);
return {
  actual: vp ? vp.textContent : null,
  solid_in: keys('#overlay line.ov-actual.solid[data-dir=in]'),
  solid_out: keys('#overlay line.ov-actual.solid[data-dir=out]'),
  other_red: keys('#overlay line.ov-actual:not(.solid)'),
  diff: [...document.querySelectorAll('#callout .diff')].map((e) => e.textContent),
};
"""


@pytest.mark.parametrize(
    "kind,size,rules,name",
    [("grid", 2, 100, "grid4"), ("grid", 4, 300, "grid16"), ("fattree", 4, 300, "fattree")],
)
def test_the_drawn_path_is_the_packets_own(tmp_path, kind, size, rules, name):
    prefix = lab_prefix("tcpreplay")
    shots = DOCS if os.environ.get("PAZZ_UI_SHOTS") and DOCS.is_dir() else tmp_path
    workdir = Path(tempfile.mkdtemp(prefix="pazz-ui-paths-"))
    lab = Lab(prefix, workdir / "lab", kind=kind, size=size, rules=rules, acls=2, sampling=1)
    procs: list = []
    drv = None
    try:
        lab.start()
        run = bring_up(
            lab,
            workdir,
            procs,
            controller=True,
            pps=100,
            fuzz_rate=100.0,
            resolve_after=30.0,
            settle=1.5,
            ui_listen=f"127.0.0.1:{free_tcp_port()}",
        )
        url = call(run.sock, "ui-url", timeout=10)["url"]  # with the view's token
        drv = chrome(tmp_path / "profile", (1280, 800))
        drv.get(url)
        wait_for(drv, lambda d: d.execute_script("return document.body.dataset.ready"), 30, "page")
        f = next(x for x in run.faults if x.key == "misroute")
        for cmd, *a in f.inject:
            lab.ofctl(f.dpid, cmd, *a)
        badge = wait_for(
            drv,
            lambda d: css(d, f"#sw-{f.dpid} .badges .badge.kind-type_p_action"),
            60,  # a loaded machine: the 2-core CI runs it beside the whole suite
            f"a misroute badge on dpid {f.dpid}",
        )[0]
        fid = int(badge.get_attribute("data-fault"))
        drv.get(url + f"#fault={fid}")  # the deep link, in a fresh page
        wait_for(
            drv,
            lambda d: d.execute_script(SNAPSHOT)["diff"],
            20,
            "the fault's callout with the localized difference",
        )
        time.sleep(1)
        snap = drv.execute_script(SNAPSHOT)
        shown = json.loads(pazzctl(run.sock, "faults", "show", str(fid), "--json").stdout)
        vp = int(snap["actual"].split("Verify_Port ")[1].split(",")[0], 16)
        entries = [parse_flow(ln, d).entry() for d in lab.topo.switches for ln in lab.dump_flows(d)]
        dp = RefDataPlane(lab.topo, entries, lab.wl.groups)
        header = parse_header(shown["header"])
        egress = tuple(shown["egress"])
        if (shown["localization"] or {}).get("sampled_at") == "hop":
            # A per-hop sample, taken where a link arrives at egress: the hops before it
            # and that arrival.
            crossed = {
                f"{h.dpid}:{h.in_port}"
                for p in lab.topo.edge_ports()
                for at, _, avp, _, before in dp.arrivals(p, header)
                if at == egress and avp == vp
                for h in before
            }
            crossed |= {"{}:{}".format(*egress)} if crossed else set()
            out = []
        else:
            crossed = {
                f"{h.dpid}:{h.in_port}"
                for p in lab.topo.edge_ports()
                for d in dp.send(p, header)
                if d.egress == egress and d.verify_port == vp
                for h in d.hops
            }
            out = ["{}:{}".format(*egress)]
        assert crossed, (shown, vp)
        print(f"{name}: path {shown['path']['status']}: {shown['path']['chains'][0]['text']}")
        print(f"{name}: {len(shown['path']['possible'])} other Bloom-filter hits drawn faded")
        assert set(snap["solid_in"]) == crossed, (snap, crossed)
        assert snap["solid_out"] == out, (snap, out)
        assert snap["other_red"] == [], snap
        assert f.expect_entry in snap["diff"][0] and "intended" in snap["diff"][0], snap
        drv.save_screenshot(str(shots / f"lab-{name}.png"))
        assert console_errors(drv) == []
    finally:
        if drv is not None:
            drv.quit()
        stop_processes(procs, timeout=10)
        lab.stop()
        shutil.rmtree(workdir, ignore_errors=True)
