"""The core's formula text split into the arithmetic and its remarks."""

from __future__ import annotations

import pytest

from app.receipts.formula_text import split_formula


@pytest.mark.parametrize(
    ("text", "formula", "remarks"),
    [
        ("⌈1 ÷ 2⌉ = 1 B", "⌈1 ÷ 2⌉ = 1 B", ()),
        ("all-gather not counted", "", ("all-gather not counted",)),
        ("", "", ()),
        ("4 × 2 B = 8 B (one unit at a time)", "4 × 2 B = 8 B", ("one unit at a time",)),
        ("9 × (2 + 4 + 2 × 4) B = 126 B", "9 × (2 + 4 + 2 × 4) B = 126 B", ()),
        (
            "per layer (attention core recomputed) = s·b·h × 2 B with s=8, t=2 with sequence parallelism\n"
            "  = 8 × 2 B = 16 B = 34·s·b·h (Korthikanti et al. 2022, Table 2)\nlogits = 4 B",
            "per layer = s·b·h × 2 B with s=8, t=2\n  = 8 × 2 B = 16 B = 34·s·b·h\nlogits = 4 B",
            (
                "per layer: attention core recomputed",
                "per layer: with sequence parallelism",
                "per layer: Korthikanti et al. 2022, Table 2",
            ),
        ),
    ],
)
def test_split_formula(text: str, formula: str, remarks: tuple[str, ...]) -> None:
    assert split_formula(text) == (formula, remarks)


# --------------------------------------------------------------------------- absolute URL
