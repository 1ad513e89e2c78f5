"""Allocated and reserved (issue 26 item 5): the allocator reserve is an input with its source, never a multiplier;
the verdict compares the allocated peak + it with the capacity and says so; a reconciled run offers its measured
reserve as a link that sets it."""

from __future__ import annotations

import json

import pytest

from app.ledger.estimate import estimate
from app.ledger.ledger import compute_ledger
from app.ledger.scenario import ScenarioError, parse_scenario
from app.observed.reconcile import reconcile
from app.observed.records import read_observed
from app.receipts.receipt import receipt
from app.receipts.table import render_table
from tests.support import paths

FSDP2 = {"model": "llama-2-7b", "param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "gather_bytes": 2,
         "act_policy": "full"}  # fmt: skip


def test_the_reserve_moves_the_verdict_not_the_allocated_peak() -> None:
    without = compute_ledger(parse_scenario({**FSDP2, "dp": 8})).stages[3].peak
    reserve = without.headroom + 1  # one byte more than the room left: the reserved estimate no longer fits
    s = parse_scenario({**FSDP2, "dp": 8, "reserve_bytes": reserve, "reserve_source": "measured"})
    peak = compute_ledger(s).stages[3].peak
    assert peak.total == without.total  # the allocated peak is the schedule's, untouched
    assert peak.reserved == without.total + reserve == s.capacity_bytes + 1
    assert (without.fits, peak.fits, peak.headroom) == (True, False, -1)


def test_the_receipt_and_the_table_say_which_figure_meets_the_capacity() -> None:
    s = parse_scenario({**FSDP2, "dp": 8, "reserve_bytes": "4GiB"})
    e = estimate(s, with_kill_lists=False)
    stage = receipt(e)["stages"][3]
    assert stage["reserved_bytes"] == stage["peak"]["total"] + 4 * 2**30
    assert stage["headroom_bytes"] == s.capacity_bytes - stage["reserved_bytes"]
    assert "the reserved estimate against the capacity: the allocated peak + the declared allocator reserve of " \
           "4,294,967,296 B" in render_table(e)  # fmt: skip
    plain = render_table(estimate(parse_scenario(FSDP2), with_kill_lists=False))
    assert "the allocated peak against the capacity (no allocator reserve given)" in plain


def test_a_reserve_above_the_capacity_names_the_field() -> None:
    assert parse_scenario({"reserve_bytes": "80GB"}).reserve_bytes == 80 * 10**9  # the whole device: nothing fits
    with pytest.raises(ScenarioError) as caught:
        parse_scenario({"reserve_bytes": "80000000001"})
    (error,) = caught.value.errors
    assert error.field == "reserve_bytes" and "above capacity_bytes" in error.message


def test_a_reconciled_run_offers_its_measured_reserve() -> None:
    """The fixture's step peak: the highest reserved − allocated across ranks (rank 5's) becomes reserve_bytes."""
    s = parse_scenario({**FSDP2, "dp": 8})
    path = paths.DATA / "observed" / "llama2-7b-dp8.jsonl"
    rec = reconcile(s, read_observed(path.read_bytes()))
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    step = [o for o in lines if o["step"] == 1 and o["instant"] != "start"]
    by_rank = {r: [o for o in step if o["rank"] == r] for r in {o["rank"] for o in step}}
    expected = max(max(o["max_reserved"] for o in mine) - max(o["max_allocated"] for o in mine)
                   for mine in by_rank.values())  # fmt: skip
    assert rec.measured_reserve == expected
    assert rec.reserve_query is not None
    follows = parse_scenario(dict(pair.split("=", 1) for pair in rec.reserve_query.split("&")))
    assert (follows.reserve_bytes, follows.reserve_source, follows.dp) == (expected, "measured", 8)
