"""The answers of the API's `topology` and `coverage` commands, as JSON objects.

`topology`: the switches with their ports, the links and the edge ports, and for every
(switch, in_port) the three Bloom-filter bits that patched OVS sets in Verify_Port when a
packet enters there (cpc.tags.port_bits): a client turns a fault's actual Verify_Port into
the ports it entered by, as the tester does (tester.detect.switches_in_filter).

`coverage`: per ingress, the fuzzer's own figures (areas, probed within the window,
revisit period per group, expected and p99 wait for a hidden rule of 1, 1/256, 1/65536 of
an area) and how long ago its areas were probed, counted in age bands; with `ingress`, the
areas themselves, the longest unprobed first.
"""

from __future__ import annotations

from cpc.tags import port_bits
from cpc.topology import Topology

__all__ = ["AREA_LIMIT", "age_bands", "coverage_json", "topology_json"]

AREA_LIMIT = 5000  # areas listed for one ingress at most


def topology_json(topo: Topology) -> dict:
    switches = []
    for dpid in sorted(topo.switches):
        sw = topo.switches[dpid]
        ports = []
        for p in sorted(sw.ports):
            peer = topo.links.get((dpid, p))
            ports.append(
                {
                    "port": p,
                    "name": sw.ports[p],
                    "bits": f"0x{port_bits(dpid, p):08x}",
                    "peer": None if peer is None else topo.port_name(peer),
                    "edge": topo.edges.get((dpid, p)),
                    "down": (dpid, p) in topo.down,
                }
            )
        switches.append({"dpid": dpid, "name": sw.name, "ports": ports})
    return {
        "switches": switches,
        "links": [
            [topo.port_name(a), topo.port_name(b)] for a, b in sorted(topo.links.items()) if a < b
        ],
        "edges": [{"port": topo.port_name(p), "name": n} for p, n in sorted(topo.edges.items())],
    }


def age_bands(window: float) -> list[float]:
    """Upper bounds (seconds) of the age bands: a quarter window, the window (what the
    fuzzer counts as covered), ten windows; beyond, and never probed, are two more bands."""
    return [window / 4, window, 10 * window]


def _band(age: float | None, bounds: list[float]) -> int:
    if age is None:
        return len(bounds) + 1
    for i, b in enumerate(bounds):
        if age <= b:
            return i
    return len(bounds)


def coverage_json(fuzzer, topo: Topology, ingress: str | None = None) -> dict:
    """fuzzer: a fuzzer.engine.Fuzzer, or None when fuzzing is off."""
    if fuzzer is None:
        return {"enabled": False, "window_s": None, "age_bounds_s": [], "ingresses": []}
    bounds = age_bands(fuzzer.window_s)
    want = None if ingress is None else topo.resolve_port(str(ingress))
    if want is not None and want not in fuzzer.ingresses:
        raise ValueError(f"ingress {topo.port_name(want)} is not fuzzed")
    rows = []
    for i in fuzzer.ingresses:
        if want is not None and i != want:
            continue
        m = fuzzer.ingress_metrics(i)
        areas = fuzzer.area_ages(i)
        counts = [0] * (len(bounds) + 2)
        for _g, _name, _sent, age in areas:
            counts[_band(age, bounds)] += 1
        ages = [a[3] for a in areas if a[3] is not None]
        row = {
            "ingress": topo.port_name(i),
            "host": topo.edges.get(i),
            "areas": m["areas"],
            "areas_recent": m["areas_recent"],
            "probes": m["probes"],
            "age_counts": counts,
            "oldest_s": max(ages, default=None),  # of the areas probed at least once
            "revisit_s": m["revisit_s"],
            "expected_detect_s": m["expected_detect_s"],
            "p99_detect_s": m["p99_detect_s"],
        }
        if want is not None:
            never = [a for a in areas if a[3] is None]
            seen = sorted((a for a in areas if a[3] is not None), key=lambda a: -a[3])
            row["area_list"] = [
                {"group": g, "name": n, "probes": s, "age_s": age}
                for g, n, s, age in (never + seen)[:AREA_LIMIT]
            ]
            row["area_list_truncated"] = len(areas) > AREA_LIMIT
        rows.append(row)
    return {
        "enabled": True,
        "window_s": fuzzer.window_s,
        "age_bounds_s": bounds,
        "ingresses": rows,
    }
