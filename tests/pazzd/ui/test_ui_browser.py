"""The web view in headless Chromium at 1280 px on the larger networks, without OVS: the
16-switch grid, the k=4 fat-tree and the 64-switch grid, each with one misroute made by
changing a route's output (tests/pazzd/ui/fakeview.py: the reference data plane sends the
header through the changed tables, which gives the report's tags and the packet's real
path). The page is opened by a deep link to the fault, and from its DOM:

- the red arrows drawn solid are exactly the packet's real path (every hop it entered by,
  and its egress), and no other arrow is solid red;
- only the expected paths from the packet's own ingress are drawn;
- the callout names the changed field with the intended value;
- the map keeps its size on selection, zoom and pan change only the viewBox;
- "trace this header" lists each hop's match and actions, those of the model's entries
  that the reference data plane's linear scan finds, and its deep link reopens it;
- the console has no error.

Screenshots of the three networks go to docs/ui/ when PAZZ_UI_SHOTS=1."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from cpc.fields import parse_header
from cpc.ofctl import format_actions, format_match
from cpc.refdp import RefDataPlane
from cpc.tags import port_bits

from .browser import chrome, console_errors, css, wait_for
from .fakeview import make_misroute, network, serve

DOCS = Path(__file__).resolve().parents[3] / "docs" / "ui"


def _keys(elements) -> set[str]:
    return {e.get_attribute("data-at") for e in elements}


def _box(drv) -> tuple:
    return tuple(
        drv.execute_script(
            "const r = document.querySelector('#topology svg').getBoundingClientRect();"
            "return [r.width, r.height];"
        )
    )


def _viewbox(drv) -> list[float]:
    vb = drv.execute_script(
        "return document.querySelector('#topology svg').getAttribute('viewBox')"
    )
    return [float(x) for x in vb.split()]


@pytest.mark.parametrize(
    "kind,size,name", [("grid", 4, "grid16"), ("fattree", 4, "fattree"), ("grid", 8, "grid64")]
)
def test_a_misroute_on_a_large_network(tmp_path, kind, size, name):
    wl, model = network(kind, size)
    m = make_misroute(wl, model)
    gone = dict(m.fault, id=2, state="resolved", resolved_at=m.fault["last_seen"] + 1)
    ui = serve(wl, [m.fault, gone], model)
    drv = chrome(tmp_path / "profile", (1280, 800))
    try:
        base = ui.url
        drv.get(base)
        wait_for(drv, lambda d: d.execute_script("return document.body.dataset.ready"), 20, "page")
        wait_for(drv, lambda d: css(d, "#switches .badge"), 10, "the fault's badge")
        size0 = _box(drv)
        assert size0[0] > 600, size0  # the map takes the width the side panel leaves
        # The deep link opens the fault.
        drv.get(base + "#fault=1")
        wait_for(drv, lambda d: css(d, '#callout[data-fault="1"]'), 20, "the callout of fault 1")
        time.sleep(0.3)
        assert _box(drv) == size0, "the map changed size on selection"

        real_in = {f"{d}:{i}" for d, i, _ in m.real_hops}
        egress = "{}:{}".format(*m.fault["egress"])
        solid_in = _keys(css(drv, "#overlay line.ov-actual.solid[data-dir=in]"))
        solid_out = _keys(css(drv, "#overlay line.ov-actual.solid[data-dir=out]"))
        assert solid_in == real_in and solid_out == {egress}
        # No other solid red: the rest of the Bloom-filter hits are faded "possible".
        red = css(drv, "#overlay line.ov-actual")
        assert all("solid" in e.get_attribute("class") for e in red)
        assert len(red) == len(real_in) + 1
        vp = m.fault["actual"]["verify_port"]
        hits = {
            f"{d}:{p}"
            for d, sw in wl.topo.switches.items()
            for p in sw.ports
            if port_bits(d, p) & vp == port_bits(d, p)
            and ((d, p) in wl.topo.links or (d, p) in wl.topo.edges)  # drawable
        }
        assert _keys(css(drv, "#overlay line.ov-possible")) == hits - real_in
        # Expected paths: only those from the packet's ingress.
        ingress = (m.real_hops[0][0], m.real_hops[0][1])
        want = {
            f"{d}:{i}"
            for e in m.fault["expected"]
            if tuple(e["ingress"]) == ingress
            for d, i, _ in e["path"]
        }
        assert want and _keys(css(drv, "#overlay line.ov-expected[data-dir=in]")) == want
        # The callout names the changed output and the intended one.
        text = css(drv, "#callout .diff")[0].text
        assert f"output:{m.got_port}" in text and "intended" in text, text
        assert "nw_dst=" in text, text
        if DOCS.is_dir() and os.environ.get("PAZZ_UI_SHOTS"):
            drv.save_screenshot(str(DOCS / f"fault-{name}.png"))

        # Zoom and pan change the viewBox, not the map's size.
        vb = _viewbox(drv)
        css(drv, "#zoom-in")[0].click()
        vb2 = _viewbox(drv)
        assert vb2[2] < vb[2] and _box(drv) == size0
        css(drv, "#zoom-fit")[0].click()
        assert _viewbox(drv)[2] >= vb[2]

        # Trace this header: per hop, the entry's match and actions.
        css(drv, "#callout button.trace-this")[0].click()
        tables = wait_for(drv, lambda d: css(d, "#trace-result table[data-outcome]"), 10, "trace")
        assert drv.current_url.split("#", 1)[1].startswith("trace=")
        hdr = parse_header(m.fault["header"])
        scan = RefDataPlane(wl.topo, wl.entries, wl.groups).tables
        rows = 0
        for t in tables:
            dpid = None
            for tr in t.find_elements("css selector", "tr.hop, tr.entry"):
                if tr.get_attribute("class") == "hop":
                    if tr.get_attribute("data-dpid"):
                        dpid = int(tr.get_attribute("data-dpid"))
                        in_port = int(tr.find_element("css selector", "[data-col=in_port]").text)
                    table = int(tr.find_element("css selector", "[data-col=table]").text)
                    continue
                match = tr.find_element("css selector", "[data-col=match]").text
                actions = tr.find_element("css selector", "[data-col=actions]").text
                e = next(e for e in scan[(dpid, table)] if e.match.contains(hdr, in_port))
                assert match == format_match(e.match) and actions == format_actions(
                    e.instructions, e.rule_id
                )
                rows += 1
        assert rows >= 2
        if DOCS.is_dir() and os.environ.get("PAZZ_UI_SHOTS") and name == "fattree":
            drv.save_screenshot(str(DOCS / "trace-fattree.png"))
        # Its deep link reopens the trace in a new page.
        url = drv.current_url
        drv.get(base)
        drv.get(url)
        wait_for(drv, lambda d: css(d, "#trace-result table[data-outcome]"), 10, "trace by link")
        # A resolved fault by its link: drawn the same, faded.
        drv.get(base + "#fault=2")
        wait_for(drv, lambda d: css(d, '#callout[data-fault="2"]'), 20, "the resolved fault")
        assert "resolved" in css(drv, "#callout")[0].get_attribute("class")
        assert "resolved" in css(drv, "#overlay")[0].get_attribute("class")
        assert _keys(css(drv, "#overlay line.ov-actual.solid[data-dir=in]")) == real_in
        assert console_errors(drv) == []
    finally:
        drv.quit()
        ui.close()
