"""Figures of bench/paper.py's report (matplotlib, the `pazz[eval]` extra), PNG and SVG.

fig9-SETTING  small multiples, one row per topology, one column per (observation mode,
              sampling): the CDF of detection time of the 28 faults and the fat-fingers,
              one curve per prober, with the paper's two marks (50 % by 40 s, 100 % by
              160 s; the only numbers of its Figure 9 this page uses) at 1/100;
fig10-SETTING per-fault median detection time with quartiles on the fat-tree (or the last
              topology), one panel per (mode, sampling), PAZZ beside the baselines, log y.
Undetected runs sit at +inf: a CDF that stops below 1 did not find them within the horizon.
"""

from __future__ import annotations

import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {
    "pazz": ("C0", "PAZZ"),
    "random": ("C3", "uniform random (paper's baseline)"),
    "acl_uncovered": ("C2", "uniform over ACL deny sets + uncovered"),
    "pazz_dense": ("C4", "PAZZ, dense-sampling shares"),
}
VARIANT_COLORS = ("C1", "C5", "C6", "C7")
MIX = ("p", "a", "hard")


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


def _style(systems) -> dict:
    style = {s: STYLE[s] for s in STYLE if s in systems}
    others = [s for s in systems if s not in STYLE]
    for v, color in zip(others, VARIANT_COLORS, strict=False):
        share = v.split("_r")[1] if "_r" in v else v
        style[v] = (color, f"PAZZ, random share {int(share) / 100:g}")
    return style


def _columns(report) -> list[tuple[str, int]]:
    samplings = [int(s.split("/")[1]) for s in report["config"]["samplings"]]
    return [(m, n) for m in report["config"].get("modes", ["U"]) for n in samplings]


def draw(report: dict, outdir: str) -> list[str]:
    os.makedirs(outdir, exist_ok=True)
    rows = [r for r in report["runs"] if r["type"] in MIX]
    horizon = report["config"]["horizon_s"]
    nets = list(report["networks"])
    cols = _columns(report)
    style = _style(list(dict.fromkeys(r["system"] for r in rows)))
    files = []
    for setting in report["config"].get("settings", ["all"]):
        sel = [r for r in rows if r.get("setting", "all") == setting]
        if not sel:
            continue
        fig, axes = plt.subplots(
            len(nets),
            len(cols),
            figsize=(3.2 * len(cols), 2.6 * len(nets)),
            squeeze=False,
            sharex=True,
            sharey=True,
        )
        for i, key in enumerate(nets):
            for j, (mode, n) in enumerate(cols):
                ax = axes[i][j]
                for system, (color, label) in style.items():
                    xs = _times(sel, net=key, mode=mode, sampling=n, system=system)
                    _cdf(ax, xs, horizon, color=color, label=label)
                if n == 100:
                    ax.plot([40], [0.5], "k^", ms=6, label="paper: 50 % by 40 s")
                    ax.plot([160], [1.0], "kv", ms=6, label="paper: 100 % by 160 s")
                ax.set_title(f"{key}, {mode}, 1/{n}", fontsize=8)
                ax.set_xlim(0, horizon)
                ax.set_ylim(0, 1.02)
                ax.grid(alpha=0.3)
                ax.tick_params(labelsize=7)
        for ax in axes[-1]:
            ax.set_xlabel("detection time (s)", fontsize=8)
        for row in axes:
            row[0].set_ylabel("CDF", fontsize=8)
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
        fig.suptitle(
            f"28 faults and the fat-fingers, setting '{setting}' (U: the paper's "
            "observation, P: probes reported 1/1 and per-hop samples)",
            fontsize=9,
        )
        fig.tight_layout(rect=(0, 0.06, 1, 0.97))
        files += _save(fig, outdir, f"fig9-{setting}")
        files += _fig10(report, sel, setting, cols, style, horizon, outdir)
    return files


def _fig10(report, rows, setting, cols, style, horizon, outdir) -> list[str]:
    nets = list(report["networks"])
    key = "fattree4" if "fattree4" in nets else nets[-1]
    info = report["networks"][key]
    faults = info["settings"][setting]["faults"] if "settings" in info else info["faults"]
    faults = [f for f in faults if f["type"] in MIX]
    systems = list(style)
    fig, axes = plt.subplots(
        len(cols), 1, figsize=(12, 2.8 * len(cols)), squeeze=False, sharex=True, sharey=True
    )
    width = 0.8 / max(len(systems), 1)
    for ax, (mode, n) in zip(axes[:, 0], cols, strict=True):
        for k, system in enumerate(systems):
            color, label = style[system]
            for j, f in enumerate(faults):
                xs = sorted(
                    _times(rows, net=key, mode=mode, sampling=n, system=system, fault=f["name"])
                )
                if not xs:
                    continue
                q = [xs[min(len(xs) - 1, round(p * (len(xs) - 1)))] for p in (0.25, 0.5, 0.75)]
                q = [min(v, horizon) for v in q]
                x = j - 0.4 + (k + 0.5) * width
                ax.errorbar(
                    [x],
                    [q[1]],
                    yerr=[[q[1] - q[0]], [q[2] - q[1]]],
                    fmt="o",
                    color=color,
                    ms=3,
                    lw=0.8,
                    label=label if j == 0 else None,
                )
        ax.axhline(horizon, color="grey", lw=0.8, ls=":")
        ax.set_yscale("log")
        ax.set_ylim(0.8, horizon * 1.3)
        ax.set_title(f"{key}, setting '{setting}', {mode}, 1/{n}", fontsize=8)
        ax.set_ylabel("detection time (s)", fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    axes[-1][0].set_xticks(range(len(faults)), [f["name"] for f in faults], rotation=90, fontsize=7)
    axes[0][0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(
        "per fault: median and quartiles of 'runs' runs (at the dotted line: not found "
        f"within {horizon:.0f} s)",
        fontsize=8,
    )
    fig.tight_layout()
    return _save(fig, outdir, f"fig10-{setting}")


def _fmt(v) -> str:
    if v is None:
        return "> horizon"
    if v == math.inf:
        return "inf"
    return f"{v:g}"


def markdown(report: dict) -> str:
    """The tables of docs/evaluation.md, from a report: per network, setting, mode,
    sampling and prober, the mix (28 faults and the fat-fingers), Type-p and Type-a."""
    out = [
        "| network | setting | mode | sampling | prober | mix: median, mean s, ≤ 10 s, ≤ 60 s "
        "| Type-p median s | Type-a median s, ≤ 120 s | fat-fingers found, ≤ 240 s "
        "| faults with median ≤ 60 s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, per_setting in report["summary"].items():
        for setting, per_mode in per_setting.items():
            for mode, per_samp in per_mode.items():
                for samp, by_sys in per_samp.items():
                    for system, d in by_sys.items():
                        m, p, a, ff = d["mix"], d["type_p"], d["type_a"], d["fat_finger"]
                        meds = [
                            v["median_s"]
                            for name, v in d["faults"].items()
                            if not name.startswith("heldout")
                        ]
                        ok = sum(v is not None and v <= 60 for v in meds)
                        ffs = (
                            f"{ff['detected']}/{ff['runs']}, {ff['within_240_s']:.0%}"
                            if ff.get("runs")
                            else "-"
                        )
                        out.append(
                            f"| {key} | {setting} | {mode} | {samp} | {system} "
                            f"| {_fmt(m['median_s'])}, {m['mean_s']:g}, {m['within_10_s']:.0%}, "
                            f"{m['within_60_s']:.0%} | {_fmt(p['median_s'])} "
                            f"| {_fmt(a['median_s'])}, {a['within_120_s']:.0%} | {ffs} "
                            f"| {ok}/{len(meds)} |"
                        )
    out += ["", _families(report)]
    return "\n".join(out)


def _families(report: dict) -> str:
    """Per fault family: median s (runs found of runs), every prober, per mode."""
    out = []
    for key, per_setting in report["summary"].items():
        for setting, per_mode in per_setting.items():
            for samp in sorted({s for pm in per_mode.values() for s in pm}):
                cols = [
                    (mode, system)
                    for mode, per_samp in per_mode.items()
                    for system in per_samp.get(samp, {})
                ]
                fams = list(
                    dict.fromkeys(f for m, s in cols for f in per_mode[m][samp][s]["families"])
                )
                out += [
                    f"{key}, setting '{setting}', {samp}: median s (found/runs)",
                    "",
                    "| family | " + " | ".join(f"{m} {s}" for m, s in cols) + " |",
                    "|---|" + "---|" * len(cols),
                ]
                for fam in fams:
                    cells = []
                    for m, s in cols:
                        st = per_mode[m][samp][s]["families"].get(fam)
                        cells.append(
                            "-"
                            if st is None
                            else f"{_fmt(st['median_s'])} ({st['detected']}/{st['runs']})"
                        )
                    out.append(f"| {fam} | " + " | ".join(cells) + " |")
                out.append("")
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
