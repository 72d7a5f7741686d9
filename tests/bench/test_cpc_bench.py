"""bench/cpc.py on a small grid: the JSON it prints, and which partition the model
chooses for ACL lines in a stage of their own and inside the routing table."""

from __future__ import annotations

import pytest

from bench import cpc


@pytest.mark.parametrize(("mode", "partition"), [("stage", "two labels"), ("inline", "one label")])
def test_wide_acls_bench(mode, partition, capsys):
    out = cpc.main(
        ["--topology", "grid", "--switches", "4", "--rules", "1500", "--updates", "20"]
        + ["--lookups", "40", "--acls", "3", "--wide-acls", mode, "--json"]
    )
    assert out["partition"] == partition
    assert out["wide_acls"] == mode
    assert out["acl_update_us_p50"] > 0 and out["update_us_p50"] > 0
    assert out["lookups_answered"] == 1.0  # every sampled report is allowed by the model
    assert capsys.readouterr().out.strip().startswith("{")
