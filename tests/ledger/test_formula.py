"""Formulas as structured values: the text a page shows, the arithmetic the CSV's ``formula`` column
holds and the remarks its ``detail`` column holds, from the parts a rule wrote, never read back."""

from __future__ import annotations

import csv
import io

import pytest

from app.ledger.estimate import estimate
from app.ledger.formula import Formula, Remark
from app.ledger.scenario import parse_scenario
from app.receipts.csv_rows import csv_text


def test_text_puts_each_remark_in_place() -> None:
    f = Formula.of("4 × 2 B = 8 B", Remark("one unit at a time"))
    assert f.text == str(f) == "4 × 2 B = 8 B (one unit at a time)"
    assert f.arithmetic == "4 × 2 B = 8 B"
    assert f.remarks == ("one unit at a time",)


def test_a_remark_mid_line_and_a_bare_one_at_its_end() -> None:
    f = Formula.lines(
        Formula.of(
            "per layer",
            Remark("attention core recomputed", "per layer"),
            " = s·b·h × 2 B with t=2",
            Remark("with sequence parallelism", "per layer", bare=True),
        ),
        Formula.of("  = 8 × 2 B = 16 B"),
    )
    assert f.text == (
        "per layer (attention core recomputed) = s·b·h × 2 B with t=2 with sequence parallelism\n  = 8 × 2 B = 16 B"
    )
    assert f.arithmetic == "per layer = s·b·h × 2 B with t=2\n  = 8 × 2 B = 16 B"
    assert f.remarks == ("per layer: attention core recomputed", "per layer: with sequence parallelism")


def test_a_statement_is_all_remark() -> None:
    f = Formula.words("all-gather not counted")
    assert (f.text, f.arithmetic, f.remarks) == ("all-gather not counted", "", ("all-gather not counted",))
    assert not Formula.words("") and not Formula() and Formula().text == ""


def test_remarks_are_said_once() -> None:
    f = Formula.of("a", Remark("same"), " = b", Remark("same"))
    assert f.text == "a (same) = b (same)" and f.remarks == ("same",)


def test_parentheses_that_are_arithmetic_stay_in_it() -> None:
    """Words never move by their shape: a parenthesised sum, a tag and a nested remark stay where the rule
    put them."""
    f = Formula.of("9 × (2 + 4 + 2 × 4) B = 126 B (checkpoint)")
    assert f.arithmetic == f.text and f.remarks == ()


# --------------------------------------------------------------------------- the rules' own formulas


def _csv_row(query: dict[str, object], ledger: str, category: str, stage: str = "") -> dict[str, str]:
    rows = csv.DictReader(io.StringIO(csv_text(estimate(parse_scenario(query)))))
    return next(r for r in rows if (r["ledger"], r["category"], r["stage"]) == (ledger, category, stage))


def test_a_pipeline_stages_total_keeps_its_words_out_of_the_arithmetic() -> None:
    """The first of 4 pipeline stages holds 4 micro batches (1F1B): the words, nested parentheses and all,
    are the total's remark; the formula column is arithmetic only."""
    e = estimate(parse_scenario({"model": "llama-2-70b", "dp": 32, "pp": 4, "pp_stage": "first", "tp": 2}))
    assert e.model is not None
    f = e.model.activations.formula
    total = f.text.splitlines()[-1]
    assert total.startswith("total (the first of 4 pipeline stages, 4 micro batches in flight (1F1B)) = 4 × (")
    assert f.arithmetic.splitlines()[-1].startswith("total = 4 × (20 layers × ")
    assert "total: the first of 4 pipeline stages, 4 micro batches in flight (1F1B)" in f.remarks
    row = _csv_row({"model": "llama-2-70b", "dp": 32, "pp": 4, "pp_stage": "first", "tp": 2}, "activations", "total")
    assert row["formula"] == f.arithmetic and row["detail"].startswith("total: the first of 4 pipeline stages")


@pytest.mark.parametrize(
    ("query", "ledger", "category", "stage", "formula", "detail_has"),
    [
        # ZeRO++'s hpZ secondary partition: ⌈N ÷ D⌉ + ⌈N ÷ hpz⌉ elements, the remark in the detail
        ({"model": "llama-2-7b", "dp": 16, "hpz": 8}, "persistent", "parameters", "3",
         "⌈6,738,415,616 ÷ 16⌉ + ⌈6,738,415,616 ÷ 8⌉ = 1,263,452,928 elements × 2 B × 1 copy = 2,526,905,856 B",
         "hpZ secondary partition"),
        # gathering one unit at a time to save a full checkpoint
        ({"model": "llama-2-7b"}, "checkpoint", "full_params.device", "",
         "202,383,360 × 2 B = 404,766,720 B", "one unit at a time"),
        # stages 0–2 gather nothing: a statement, no arithmetic
        ({}, "declared_peak", "gather", "0", "", "stages 0–2 hold full parameters: nothing to gather"),
    ],
)  # fmt: skip
def test_csv_columns_come_from_the_parts(
    query: dict[str, object], ledger: str, category: str, stage: str, formula: str, detail_has: str
) -> None:
    row = _csv_row(query, ledger, category, stage)
    assert row["formula"] == formula
    assert detail_has in row["detail"]
