"""Byte formatting: GB and GiB rounded half up exactly."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.receipts.display import gb, gib, integer, percent_bp


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (14 * 10**9, "14.00 GB"),
        (112 * 10**9, "112.00 GB"),
        (1_750_000_000, "1.75 GB"),
        (700_000_000, "0.70 GB"),
        (0, "0.00 GB"),
        (5_000_000, "0.01 GB"),  # 0.005 GB rounds half up
        (4_999_999, "0.00 GB"),
        (1_234 * 10**9, "1,234.00 GB"),
        (-52 * 10**9, "−52.00 GB"),
        (2**30, "1.07 GB"),  # 1.073741824
    ],
)
def test_gb_exact_rounding(value: int, expected: str) -> None:
    assert gb(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (2**30, "1.00 GiB"),
        (80 * 10**9, "74.51 GiB"),  # 80e9 ÷ 2^30 = 74.5058…
        (14 * 10**9, "13.04 GiB"),  # 13.0385…
        (112 * 10**9, "104.31 GiB"),  # 104.3081…
        (2**29, "0.50 GiB"),
        (5_368_710, "0.01 GiB"),  # half a hundredth is 2^30 ÷ 200 = 5,368,709.12 B: above it rounds up
        (5_368_709, "0.00 GiB"),  # just below it rounds down
        (0, "0.00 GiB"),
    ],
)
def test_gib_exact_rounding(value: int, expected: str) -> None:
    assert gib(value) == expected


def _half_up(value: int, unit: int, label: str) -> str:
    """Independent reference: exact rational arithmetic, then Python's own formatting."""
    magnitude = Fraction(abs(value), unit)
    hundredths = int(magnitude * 100 + Fraction(1, 2))  # floor of a non-negative value: half up
    sign = "−" if value < 0 else ""
    return f"{sign}{hundredths // 100:,}.{hundredths % 100:02d} {label}"


# Where the rounding or the formatting changes branch: zero hundredths, and 999.99 → 1,000.00.
_GIB_1000 = 1000 * 2**30 - 2**29 // 100  # about where 999.995 GiB rounds up to 1,000.00
EDGES = st.sampled_from(
    [
        0,
        4_999_999,
        5_000_000,
        5_368_709,
        5_368_710,
        999_994_999_999,
        999_995_000_000,
        *range(_GIB_1000 - 3, _GIB_1000 + 3),
    ]
).flatmap(lambda v: st.sampled_from([v, -v]))


@given(st.integers(min_value=-(2**53), max_value=2**53) | EDGES)
def test_gb_and_gib_round_half_up_like_exact_fractions(value: int) -> None:
    assert gb(value) == _half_up(value, 10**9, "GB")
    assert gib(value) == _half_up(value, 2**30, "GiB")


def test_binary_never_labelled_gb() -> None:
    assert (gb(80 * 10**9), gib(80 * 10**9)) == ("80.00 GB", "74.51 GiB")
    assert integer(7 * 10**9) == "7,000,000,000"
    assert percent_bp(1_250) == "12.50 %"
    assert percent_bp(5) == "0.05 %"


# --------------------------------------------------------------------------- links
