"""The topology as SVG, drawn on the server: switches, links with their port numbers,
edge ports with their hosts. The page's script finds the parts by id and data attributes
and draws faults, paths and coverage over them:

- a switch: ``<g class="switch" id="sw-DPID" data-dpid data-name data-x data-y>``, with
  an empty ``<g class="badges">`` for its faults;
- a link: ``<line class="link" data-a="DPID:PORT" data-b="DPID:PORT">`` (a < b);
- a host: ``<g class="host" id="host-DPID-PORT" data-port="DPID:PORT" data-name>``, and
  its edge ``<line class="edge-link" data-port="DPID:PORT">``;
- empty layers ``#overlay`` (under the switches) and ``#callouts`` (on top).
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from cpc.topology import Topology

from .layout import BOX_H, BOX_W, Layout, layout

__all__ = ["render"]

SW_W, SW_H = BOX_W, BOX_H
HOST_R = 9.0


def _num(v: float) -> str:
    return f"{v:g}"


def _along(a: tuple[float, float], b: tuple[float, float], f: float) -> tuple[float, float]:
    return a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f


def render(topo: Topology, lay: Layout | None = None) -> str:
    lay = lay or layout(topo)
    out = [
        '<svg xmlns="http://www.w3.org/2000/svg" class="topology" '
        f'viewBox="0 0 {_num(lay.width)} {_num(lay.height)}" '
        f'width="{_num(lay.width)}" height="{_num(lay.height)}" data-layout="{lay.kind}">',
        '<g id="links">',
    ]
    labels = []
    for a, b in sorted((a, b) for a, b in topo.links.items() if a < b):
        pa, pb = lay.switches[a[0]], lay.switches[b[0]]
        out.append(
            f'<line class="link" data-a="{a[0]}:{a[1]}" data-b="{b[0]}:{b[1]}" '
            f'x1="{_num(pa[0])}" y1="{_num(pa[1])}" x2="{_num(pb[0])}" y2="{_num(pb[1])}"/>'
        )
        for (dpid, port), here, there in ((a, pa, pb), (b, pb, pa)):
            x, y = _along(here, there, 0.3)
            labels.append(
                f'<text class="port" data-at="{dpid}:{port}" x="{x:.1f}" y="{y:.1f}">{port}</text>'
            )
    out.append("</g>")
    out.append('<g id="edges">')
    for p in sorted(topo.edges):
        s, h = lay.switches[p[0]], lay.hosts[p]
        out.append(
            f'<line class="edge-link" data-port="{p[0]}:{p[1]}" x1="{_num(s[0])}" '
            f'y1="{_num(s[1])}" x2="{_num(h[0])}" y2="{_num(h[1])}"/>'
        )
        x, y = _along(s, h, 0.45)
        labels.append(
            f'<text class="port" data-at="{p[0]}:{p[1]}" x="{x:.1f}" y="{y:.1f}">{p[1]}</text>'
        )
    out.append("</g>")
    out.append('<g id="port-labels">' + "".join(labels) + "</g>")
    out.append('<g id="overlay"></g>')
    out.append('<g id="hosts">')
    for p in sorted(topo.edges):
        x, y = lay.hosts[p]
        name = topo.edges[p]
        port = topo.port_name(p)
        out.append(
            f'<g class="host" id="host-{p[0]}-{p[1]}" data-port="{p[0]}:{p[1]}" '
            f'data-name={quoteattr(name)} data-x="{_num(x)}" data-y="{_num(y)}">'
            f"<title>{escape(name)} ({escape(port)})</title>"
            f'<circle cx="{_num(x)}" cy="{_num(y)}" r="{_num(HOST_R)}"/>'
            f'<text x="{_num(x)}" y="{_num(y + HOST_R + 11)}">{escape(name)}</text></g>'
        )
    out.append("</g>")
    out.append('<g id="switches">')
    for dpid in sorted(topo.switches):
        sw = topo.switches[dpid]
        x, y = lay.switches[dpid]
        out.append(
            f'<g class="switch" id="sw-{dpid}" data-dpid="{dpid}" data-name={quoteattr(sw.name)} '
            f'data-x="{_num(x)}" data-y="{_num(y)}">'
            f"<title>{escape(sw.name)} (dpid {dpid})</title>"
            f'<rect x="{_num(x - SW_W / 2)}" y="{_num(y - SW_H / 2)}" width="{_num(SW_W)}" '
            f'height="{_num(SW_H)}" rx="6"/>'
            f'<text x="{_num(x)}" y="{_num(y + 4)}">{escape(sw.name)}</text>'
            f'<g class="badges" transform="translate({_num(x + SW_W / 2 - 4)},'
            f'{_num(y - SW_H / 2 - 4)})"></g></g>'
        )
    out.append("</g>")
    out.append('<g id="callouts"></g>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
