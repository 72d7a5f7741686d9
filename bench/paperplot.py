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

    for letter, key in zip("bcde", nets, strict=False):
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for system, (color, label) in STYLE.items():
            for n in samplings:
                xs = _times(rows, net=key, system=system, sampling=n)
                _cdf(ax, xs, horizon, color=color, ls=LINE.get(n, ":"), label=f"{label}, 1/{n}")
        _paper_marks(ax)
        ax.set(title=f"{key}: 28 faults", xlabel="detection time (s)", ylabel="CDF")
        ax.set_xlim(0, horizon)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
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
