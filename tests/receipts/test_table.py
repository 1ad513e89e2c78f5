"""The terminal table: the worked example, the parallelism block and its warning."""

from __future__ import annotations

import pytest

from app.ledger.estimate import Estimate, estimate
from app.ledger.scenario import parse_scenario
from app.receipts.receipt import receipt
from app.receipts.table import render_table


def test_the_table_warns_when_the_budgeted_end_is_not_the_busier() -> None:
    """GPT-2 on two stages with full recomputation: the last stage's logits outweigh the first's embedding."""
    e = estimate(parse_scenario({"model": "gpt2", "pp": 2, "act_policy": "full"}), with_kill_lists=False)
    pipe = receipt(e)["parallelism"]["pipeline"]
    assert (pipe["budgeted"], pipe["busier"], pipe["budgeted_is_busier"]) == ("first", "last", False)
    text = render_table(e)
    assert "WARNING: the last stage is busier than the budgeted first stage" in text
    assert "--pp-stage last" in text


@pytest.mark.parametrize("raw", [{"dp": 16, "hpz": 8}, {"dp": 16, "shard_group": 8}, {"tp": 2}])
def test_the_table_shows_parallelism_for_any_non_trivial_layout(raw: dict[str, object]) -> None:
    e = estimate(parse_scenario(raw), with_kill_lists=False)
    text = render_table(e)
    assert "Parallelism: world size" in text
    par = receipt(e)["parallelism"]
    assert par["replicas"] == par["dp"] // par["shard_group"]


# --------------------------------------------------------------------------- CSV


# --------------------------------------------------------------------------- table


def test_table_shows_the_worked_example(seed_estimate: Estimate) -> None:
    text = render_table(seed_estimate)
    for figure in ("112.00 GB", "38.50 GB", "26.25 GB", "14.00 GB", "700,000,000 B", "DOES NOT FIT", "74.51 GiB"):
        assert figure in text
    assert "FLAGGED" in text
