"""Figures of bench/paper.py's report (matplotlib, the `pazz[eval]` extra), PNG and SVG.

fig9a   CDF of detection time of the 28 faults, PAZZ, every topology, 1/100 and 1/1000,
        with the paper's marks (50 % by 40 s, 100 % by 160 s);
fig9b-e one topology each: PAZZ against the paper's random baseline and the ATPG-style one;
fig10   per-fault median detection time with quartiles, fat-tree (or the last topology).
Undetected runs sit at +inf: a CDF that stops below 1 did not find them within the horizon.
"""

from __future__ import annotations

import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"pazz": ("C0", "PAZZ (this)"), "random": ("C3", "random (paper's baseline)")}
STYLE["atpg"] = ("C2", "ATPG-style + random")
VARIANT_COLORS = ("C1", "C4", "C5", "C6")
LINE = {100: "-", 1000: "--"}


def _times(rows, **sel) -> list[float]:
    out = [r["detect_s"] for r in rows if all(r[k] == v for k, v in sel.items())]
    return [math.inf if v is None else v for v in out]


def _cdf(ax, xs: list[float], horizon: float, **kw) -> None:
    xs = sorted(xs)
    n = len(xs)
    if not n:
        return
    fin = [x for x in xs if x != math.inf]
    px = [0.0] + [x for x in fin for _ in (0, 1)] + [horizon]
    py = [0.0]
    for i in range(len(fin)):
        py += [i / n, (i + 1) / n]
    py.append(len(fin) / n)
    ax.plot(px, py, **kw)


def _save(fig, outdir: str, name: str) -> list[str]:
    paths = []
    for ext in ("png", "svg"):
        p = os.path.join(outdir, f"{name}.{ext}")
        fig.savefig(p, dpi=110, bbox_inches="tight")
        paths.append(p)
    plt.close(fig)
    return paths


def _paper_marks(ax) -> None:
    ax.plot([40], [0.5], "k^", ms=8, label="paper: 50 % by 40 s")
    ax.plot([160], [1.0], "kv", ms=8, label="paper: 100 % by 160 s")


def draw(report: dict, outdir: str) -> list[str]:
    os.makedirs(outdir, exist_ok=True)
    rows = [r for r in report["runs"] if r["type"] in ("p", "a")]
    horizon = report["config"]["horizon_s"]
    nets = list(report["networks"])
    samplings = [int(s.split("/")[1]) for s in report["config"]["samplings"]]
    files = []

    fig, axes = plt.subplots(1, len(samplings), figsize=(6 * len(samplings), 4), squeeze=False)
    for ax, n in zip(axes[0], samplings, strict=True):
        for i, key in enumerate(nets):
            _cdf(ax, _times(rows, net=key, system="pazz", sampling=n), horizon, color=f"C{i}")
            ax.lines[-1].set_label(key)
        _paper_marks(ax)
        ax.set(title=f"PAZZ, 28 faults, sFlow 1/{n}", xlabel="detection time (s)", ylabel="CDF")
        ax.set_xlim(0, horizon)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    files += _save(fig, outdir, "fig9a")

    style = dict(STYLE)
    variants = sorted({r["system"] for r in rows} - set(STYLE))
    for v, color in zip(variants, VARIANT_COLORS, strict=False):
        label = (
            "PAZZ, dense-sampling shares"
            if v == "pazz_dense"
            else f"PAZZ, random share {int(v.split('_r')[1]) / 100:g}"
        )
        style[v] = (color, label)
    for letter, key in zip("bcde", nets, strict=False):
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for system, (color, label) in style.items():
            for n in samplings:
                xs = _times(rows, net=key, system=system, sampling=n)
                _cdf(ax, xs, horizon, color=color, ls=LINE.get(n, ":"), label=f"{label}, 1/{n}")
        _paper_marks(ax)
        ax.set(title=f"{key}: 28 faults", xlabel="detection time (s)", ylabel="CDF")
        ax.set_xlim(0, horizon)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        files += _save(fig, outdir, f"fig9{letter}")

    key = "fattree4" if "fattree4" in nets else nets[-1]
    faults = [f for f in report["networks"][key]["faults"] if f["type"] in ("p", "a")]
    fig, ax = plt.subplots(figsize=(11, 4))
    for k, n in enumerate(samplings):
        for j, f in enumerate(faults):
            xs = sorted(_times(rows, net=key, system="pazz", sampling=n, fault=f["name"]))
            q = [xs[min(len(xs) - 1, round(p * (len(xs) - 1)))] for p in (0.25, 0.5, 0.75)]
            q = [min(v, horizon) for v in q]
            x = j + (k - 0.5) * 0.3
            color = "C0" if f["type"] == "p" else "C1"
            mark = "o" if n == samplings[0] else "s"
            ax.errorbar(
                [x], [q[1]], yerr=[[q[1] - q[0]], [q[2] - q[1]]], fmt=mark, color=color, ms=4
            )
    ax.axhline(horizon, color="grey", lw=0.8, ls=":")
    ax.set_xticks(range(len(faults)), [f["name"] for f in faults], rotation=90, fontsize=7)
    ax.set(
        title=f"{key}: PAZZ per fault, median and quartiles "
        f"(circles 1/{samplings[0]}, squares 1/{samplings[-1]}; blue Type-p, orange Type-a; "
        f"at the dotted line: not found within {horizon:.0f} s)",
        ylabel="detection time (s)",
    )
    ax.title.set_fontsize(8)
    ax.grid(alpha=0.3, axis="y")
    files += _save(fig, outdir, "fig10")
    return files


def _fmt(v) -> str:
    return "> horizon" if v is None else f"{v:g}"


def markdown(report: dict) -> str:
    """The tables of docs/evaluation.md, from a report."""
    rows = report["runs"]
    out = [
        "| network | sampling | prober | Type-p found, median, max s "
        "| Type-a found, ≤ 60 s, ≤ 120 s | all 28: median s, ≤ 10 s, ≤ 60 s |",
        "|---|---|---|---|---|---|",
    ]
    for key, per in report["summary"].items():
        for samp, by_sys in per.items():
            for system, d in by_sys.items():
                if not isinstance(d, dict):
                    continue
                p, a, al = d["type_p"], d["type_a"], d["all28"]
                sel = [
                    r["detect_s"]
                    for r in rows
                    if r["net"] == key
                    and r["sampling"] == int(samp[2:])
                    and r["system"] == system
                    and r["type"] in ("p", "a")
                ]
                w10 = sum(v is not None and v <= 10 for v in sel) / len(sel)
                out.append(
                    f"| {key} | {samp} | {system} "
                    f"| {p['detected']}/{p['runs']}, {_fmt(p['median_s'])}, {_fmt(p['max_s'])} "
                    f"| {a['detected']}/{a['runs']}, {a['within_60_s']:.0%}, "
                    f"{a['within_120_s']:.0%} "
                    f"| {_fmt(al['median_s'])}, {w10:.0%}, {al['within_60_s']:.0%} |"
                )
    out += ["", _families(report)]
    return "\n".join(out)


def _families(report: dict) -> str:
    """Per fault family at each sampling: runs found within the horizon and their median."""
    rows = report["runs"]
    systems = list(dict.fromkeys(r["system"] for r in rows))
    fams = list(dict.fromkeys(r["family"] for r in rows))
    out = [
        "| network | sampling | family | " + " | ".join(systems) + " |",
        "|---|---|---|" + "---|" * len(systems),
    ]
    for key in report["networks"]:
        for samp in sorted({r["sampling"] for r in rows}):
            for fam in fams:
                cells = []
                for s in systems:
                    xs = [
                        r["detect_s"]
                        for r in rows
                        if r["net"] == key
                        and r["sampling"] == samp
                        and r["family"] == fam
                        and r["system"] == s
                    ]
                    found = sorted(x for x in xs if x is not None)
                    med = sorted(math.inf if x is None else x for x in xs)[len(xs) // 2]
                    cells.append(
                        f"{len(found)}/{len(xs)}, {_fmt(None if med == math.inf else med)}"
                    )
                out.append(f"| {key} | 1/{samp} | {fam} | " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":  # python bench/paperplot.py REPORT.json[.gz] [FIGURE_DIR]
    import gzip
    import json
    import sys

    with (gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rt") as fh:
        rep = json.load(fh)
    if len(sys.argv) > 2:
        draw(rep, sys.argv[2])
    print(markdown(rep))
