"""The web view in a real browser on the lab: the 4-switch grid of patched OVS, the os-ken
controller app feeding pazzd's model through its proxy, production traffic, pazzd with its
web view on (the demo's bring_up). Headless Chromium opens the page once and is never
reloaded; a misroute is injected with ovs-ofctl behind the controller's back. From the
page's DOM:

- the fault appears on the switch that was changed, as a misroute, within 20 s;
- its detail shows the localized entry (the changed output) beside the intended one, and
  the callout on that switch names the changed output with the intended one;
- the expected path drawn is the fault's expected path, and the actual path drawn solid
  is exactly the ports the packet really entered by: the reference data plane over the
  flow tables dumped from OVS (cpc.refdp), an oracle that shares nothing with the page;
- a trace typed into the box draws the hops, and lists the rule IDs, that the reference
  data plane finds on the switches' own tables;
- once the tables are restored the fault moves to "resolved lately", still without a
  reload; the coverage view lists every fuzzed ingress.

Screenshots go to the test's tmp path (printed)."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from cpc.fields import parse_header
from cpc.ofctl import parse_flow
from cpc.refdp import RefDataPlane
from pazzlab.demo import bring_up
from pazzlab.lab import Lab, dotted
from pazzlab.ovs import free_tcp_port, stop_processes
from tests.pazzd.helpers import lab_prefix, pazzctl

from .browser import chrome, css, wait_for

pytestmark = pytest.mark.ovs

DETECT_BOUND = 20.0  # seconds from the injection to the fault on its switch in the page


def _switch_dataplane(lab: Lab) -> RefDataPlane:
    entries = [parse_flow(ln, d).entry() for d in lab.topo.switches for ln in lab.dump_flows(d)]
    return RefDataPlane(lab.topo, entries, lab.wl.groups)


def _ports_in(elements) -> set[str]:
    return {e.get_attribute("data-at") for e in elements}


def test_the_web_view_shows_faults_paths_and_traces_live(tmp_path):
    prefix = lab_prefix("tcpreplay")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"screenshots: {shots}")
    workdir = Path(tempfile.mkdtemp(prefix="pazz-ui-lab-"))
    lab = Lab(prefix, workdir / "lab", kind="grid", size=2, rules=100, acls=2, sampling=1)
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
            resolve_after=6.0,
            settle=1.5,
            ui_listen=f"127.0.0.1:{free_tcp_port()}",
        )
        url = json.loads(pazzctl(run.sock, "ui-url", "--json").stdout)["url"]
        assert url.startswith(run.status["ui"] + "?token="), (url, run.status)
        drv = chrome(tmp_path / "profile")
        drv.get(url)
        wait_for(drv, lambda d: d.execute_script("return document.body.dataset.ready"), 20, "page")
        names = {d: s.name for d, s in lab.topo.switches.items()}
        assert {g.get_attribute("data-name") for g in css(drv, "g.switch")} == set(names.values())
        assert len(css(drv, "g.host")) == len(lab.hosts)
        time.sleep(3)
        assert css(drv, "#switches .badge") == [], "a fault before any injection"
        drv.save_screenshot(str(shots / "1-healthy.png"))

        f = next(x for x in run.faults if x.key == "misroute")
        t_inj = time.monotonic()
        for cmd, *a in f.inject:
            lab.ofctl(f.dpid, cmd, *a)
        badge = wait_for(
            drv,
            lambda d: css(d, f"#sw-{f.dpid} .badges .badge.kind-type_p_action"),
            DETECT_BOUND,
            f"a misroute badge on {names[f.dpid]}",
        )[0]
        print(f"fault on {names[f.dpid]} in the page {time.monotonic() - t_inj:.1f} s after")
        fid = int(badge.get_attribute("data-fault"))
        item = css(drv, f'#fault-list li[data-fault="{fid}"]')[0]
        assert item.get_attribute("data-dpid") == str(f.dpid)
        badge.click()
        entry = wait_for(
            drv,
            lambda d: [e for e in css(d, '#fault-detail tr[data-field="entry"] td') if e.text],
            15,
            "the localized entry in the fault's detail",
        )[0].text
        assert f.expect_entry in entry, entry  # the changed output, as on the switch
        intended = css(drv, '#fault-detail tr[data-field="intended"] td')[0].text
        assert f.expect_entry not in intended and "actions=" in intended, intended
        callout = wait_for(
            drv, lambda d: css(d, f'#callout[data-dpid="{f.dpid}"] .diff'), 5, "callout"
        )[0]
        assert f.expect_entry in callout.text and "intended" in callout.text, callout.text

        shown = json.loads(pazzctl(run.sock, "faults", "show", str(fid), "--json").stdout)
        # The oracle: OVS's own tables now, the fault's header sent in at every edge port;
        # the outcomes at the fault's egress with the tags the report carried.
        header = parse_header(shown["header"])
        dp = _switch_dataplane(lab)
        real = [
            d
            for p in lab.topo.edge_ports()
            for d in dp.send(p, header)
            if d.egress == tuple(shown["egress"])
            and d.verify_port == shown["actual"]["verify_port"]
        ]
        assert real, (shown, [dp.send(p, header) for p in lab.topo.edge_ports()])
        crossed = {f"{h.dpid}:{h.in_port}" for d in real for h in d.hops}
        drawn = _ports_in(css(drv, "#overlay line.ov-actual.solid[data-dir=in]"))
        assert crossed == drawn, (crossed, drawn)
        # Expected: the fault's alternatives from the ingress the packet really came in by.
        ingresses = {d.ingress for d in real}
        want = {
            f"{d}:{i}"
            for e in shown["expected"]
            if tuple(e["ingress"]) in ingresses
            for d, i, _ in e["path"]
        }
        assert want and want == _ports_in(css(drv, "#overlay line.ov-expected[data-dir=in]"))
        assert crossed != want  # a misroute: the paths differ
        drv.save_screenshot(str(shots / "2-fault.png"))

        # A trace from h1 to a host of h2's prefix, as pazzctl would be asked.
        h2net = sorted(n for n, o in lab.wl.prefixes.items() if o == "h2")[0]
        text = f"ipv4_src={lab.host_ip('h1')},ipv4_dst={dotted(h2net + 9)},tcp_dst=80"
        h1_port = lab.wl.hosts["h1"]
        css(drv, 'nav button[data-tab="trace"]')[0].click()
        sel = css(drv, "#trace-ingress")[0]
        sel.find_element("css selector", f'option[value="{lab.topo.port_name(h1_port)}"]').click()
        box = css(drv, "#trace-header")[0]
        box.clear()
        box.send_keys(text)
        css(drv, "#trace-go")[0].click()
        tables = wait_for(
            drv, lambda d: css(d, "#trace-result table[data-outcome]"), 10, "the trace's hops"
        )
        oracle = _switch_dataplane(lab).send(h1_port, parse_header(text))
        drawn_hops = sorted(
            (
                t.get_attribute("data-egress"),
                tuple(
                    int(r.get_attribute("data-dpid"))
                    for r in t.find_elements("css selector", "tr[data-dpid]")
                ),
                tuple(
                    int(td.text) for td in t.find_elements("css selector", "td[data-col=rule_id]")
                ),
            )
            for t in tables
        )
        assert drawn_hops == sorted(
            (
                lab.topo.port_name(o.egress) if o.egress else "",
                tuple(h.dpid for h in o.hops),
                tuple(r.rule_id for h in o.hops for r in h.rules),
            )
            for o in oracle
        )
        assert _ports_in(css(drv, "#overlay line.ov-trace[data-dir=in]")) == {
            f"{h.dpid}:{h.in_port}" for o in oracle for h in o.hops
        }
        drv.save_screenshot(str(shots / "3-trace.png"))

        # Restored: the fault resolves, and the page says so without a reload.
        lab.restore()
        css(drv, 'nav button[data-tab="faults"]')[0].click()
        wait_for(
            drv,
            lambda d: (
                css(d, f'#resolved-list li[data-fault="{fid}"]')
                and not css(d, f'#fault-list li[data-fault="{fid}"]')
            ),
            40,
            f"fault {fid} resolved in the page",
        )
        assert not css(drv, f'#switches .badge[data-fault="{fid}"]')
        css(drv, 'nav button[data-tab="coverage"]')[0].click()
        fuzzed = {lab.topo.port_name(h["port"]) for h in lab.hosts.values()}
        wait_for(
            drv,
            lambda d: (
                {r.get_attribute("data-ingress") for r in css(d, "#coverage tr[data-ingress]")}
                == fuzzed
            ),
            15,
            "a coverage row per fuzzed ingress",
        )
        css(drv, f'#coverage tr[data-ingress="{sorted(fuzzed)[0]}"]')[0].click()
        wait_for(drv, lambda d: css(d, "#area-strip .cells span"), 10, "the areas of an ingress")
        drv.save_screenshot(str(shots / "4-coverage.png"))
    finally:
        if drv is not None:
            drv.quit()
        stop_processes(procs, timeout=10)
        lab.stop()
        shutil.rmtree(workdir, ignore_errors=True)
