"""bench/paper.py --quick and bench/scaling.py --quick: the JSON's shape and the figures."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")  # the `eval` extra; `make test` installs it

from bench import paper, scaling  # noqa: E402


@pytest.mark.slow
def test_paper_quick(tmp_path, capsys):
    out = tmp_path / "paper.json"
    assert paper.main(["--quick", "--out", str(out), "--figures", str(tmp_path)]) == 0
    doc = json.loads(out.read_text())
    horizon = doc["config"]["horizon_s"]
    net = doc["networks"]["grid4"]["settings"]
    assert len(net["all"]["faults"]) == 40  # 28, 6 fat-fingers, 6 held out
    assert len(net["pair"]["faults"]) == 34  # no held-out ones in the pair setting
    cells = len(paper.MODES) * len(paper.SYSTEMS) * len(paper.SAMPLINGS)
    assert len(doc["runs"]) == (40 + 34) * 2 * cells
    for r in doc["runs"]:
        assert r["system"] in paper.SYSTEMS and r["sampling"] in paper.SAMPLINGS
        assert r["mode"] in paper.MODES and r["setting"] in paper.SETTINGS
        assert r["detect_s"] is None or 0 < r["detect_s"] <= horizon + 1
    for mode in paper.MODES:
        s = doc["summary"]["grid4"]["all"][mode]["1/100"]
        assert s["pazz"]["type_p"]["runs"] == 20 and s["pazz"]["type_a"]["runs"] == 36
        assert s["pazz"]["mix"]["runs"] == 68
        assert s["pazz"]["type_p"]["detected"] == 20  # production traffic at 10^6 pps
        assert set(s["pazz"]["faults"]) == {f["name"] for f in net["all"]["faults"]}
    # The clean control: each fault's match with no hidden entry, once per cell; no fault
    # may open there.
    alarms = doc["false_alarms"]["grid4"]
    assert alarms["all"] == {"runs": 40 * cells, "opened": 0}
    assert alarms["pair"] == {"runs": 34 * cells, "opened": 0}
    for name in ("fig9-all", "fig9-pair", "fig10-all", "fig10-pair"):
        for ext in ("png", "svg"):
            assert (tmp_path / f"{name}.{ext}").stat().st_size > 1000


@pytest.mark.slow
def test_scaling_quick(tmp_path, capsys):
    out = tmp_path / "scaling.json"
    assert scaling.main(["--quick", "--out", str(out), "--figures", str(tmp_path)]) == 0
    doc = json.loads(out.read_text())
    assert [p["rules"] for p in doc["rules"]] == [4988, 19988]
    for p in doc["rules"] + doc["switches"]:
        assert "error" not in p, p
        assert p["tester_faults"] == 0  # reports with the model's own tags are consistent
        for m in scaling.METRICS:
            assert p[m] > 0
    assert set(doc["slopes"]["rules"]) == set(scaling.METRICS)
    for name in ("scaling-rules", "scaling-switches"):
        assert (tmp_path / f"{name}.png").stat().st_size > 1000


def test_slope_of_a_power_law():
    xs = [1, 10, 100, 1000]
    assert scaling.slope(xs, [3 * x**1.5 for x in xs]) == pytest.approx(1.5)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--random-shares", "0.5,x"], "--random-shares: not a list of numbers"),
        (["--random-shares", "1.5"], "every share must be in (0, 1)"),
        (["--networks", "grid4,torus"], "unknown network 'torus'"),
        (["--modes", "U,Q"], "--modes: unknown ['Q']"),
        (["--systems", "atpg"], "--systems: unknown ['atpg']"),
    ],
)
def test_bad_arguments_are_named(args, words, capsys):
    with pytest.raises(SystemExit) as e:
        paper.main(args)
    assert e.value.code == 2
    assert words in capsys.readouterr().err


def test_variant_names():
    assert paper.variant(0.5) == "pazz_r50" and paper.variant(0.3) == "pazz_r30"
