"""Human sizes parse to exact integers or are rejected with a message; never rounded."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.cli import main
from app.ledger.scenario import ScenarioError, parse_scenario
from app.ledger.scenario.sizes import MAX_TEXT, SizeError, parse_bytes, parse_count, parse_plain


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7B", 7 * 10**9),
        ("6.74B", 674 * 10**7),  # 6.74 × 10^9 = 6,740,000,000
        ("400M", 4 * 10**8),
        ("7_000_000_000", 7_000_000_000),
        ("7,000,000,000", 7_000_000_000),
        ("7e9", 7 * 10**9),
        ("7E9", 7 * 10**9),
        ("1.5e3", 1_500),
        ("13b", 13 * 10**9),
        ("2T", 2 * 10**12),
        ("1.5k", 1_500),
        (" 7B ", 7 * 10**9),
        ("0", 0),
        ("7", 7),
        ("10000000000000", 10**13),
    ],
)
def test_counts_parse_exactly(text: str, expected: int) -> None:
    value = parse_count(text)
    assert value == expected
    assert type(value) is int


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("80GB", 80 * 10**9),
        ("80gb", 80 * 10**9),
        ("80 GB", 80 * 10**9),
        ("80GiB", 80 * 2**30),  # 85,899,345,920
        ("512MiB", 512 * 2**20),  # 536,870,912
        ("1KB", 1_000),
        ("1KiB", 1_024),
        ("1TiB", 2**40),
        ("1.5GB", 1_500_000_000),
        ("0.5GiB", 2**29),  # 5 × 2^30 ÷ 10 = 536,870,912 exactly
        ("2000000000", 2_000_000_000),
        ("2e9", 2_000_000_000),
    ],
)
def test_bytes_parse_exactly(text: str, expected: int) -> None:
    value = parse_bytes(text)
    assert value == expected
    assert type(value) is int


def test_80gib_exact_value() -> None:
    assert parse_bytes("80GiB") == 85_899_345_920


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("1e400", "far too large"),
        ("1e31", "far too large"),
        ("NaN", "not a count"),
        ("nan", "not a count"),
        ("inf", "not a count"),
        ("-inf", "not a count"),
        ("Infinity", "not a count"),
        ("7.5", "not a whole number"),
        ("6.7412345678B", "not a whole number"),
        ("1e-1", "not a whole number"),
        ("7B7B", "not a count"),
        ("", "is empty"),
        ("   ", "is empty"),
        ("80GB", "counts elements, not bytes"),
        ("80GiB", "counts elements, not bytes"),
        ("7 billion", "unknown unit"),
        ("0x10", "not a count"),
        ("1" * 41, "too long"),
        ("7..5", "not a count"),
        ("_7", "not a count"),
    ],
)
def test_bad_counts_rejected_with_a_message(text: str, fragment: str) -> None:
    with pytest.raises(SizeError) as info:
        parse_count(text)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("1.5", "not a whole number of bytes"),
        ("0.0001KB", "not a whole number of bytes"),
        ("1.0000000001GiB", "not a whole number of bytes"),
        ("20B", "ambiguous"),
        ("20b", "ambiguous"),
        ("400M", "ambiguous"),
        ("2T", "ambiguous"),
        ("4k", "ambiguous"),
        ("80 gigabytes", "unknown unit"),
        ("1e400", "far too large"),
        ("NaN", "not a size in bytes"),
        ("", "is empty"),
    ],
)
def test_bad_bytes_rejected_with_a_message(text: str, fragment: str) -> None:
    with pytest.raises(SizeError) as info:
        parse_bytes(text)
    assert fragment in str(info.value)


def test_20b_as_bytes_suggests_both_readings() -> None:
    """20B in a byte field could be 20 bytes or 20 billion bytes: the hint offers 20GB and 20GiB."""
    with pytest.raises(SizeError) as info:
        parse_bytes("20B")
    assert "20GB" in str(info.value)
    assert "20GiB" in str(info.value)


def test_ambiguous_hint_keeps_the_fraction() -> None:
    """Regression: the hint for 1.5M used to suggest 1MB, dropping the .5."""
    with pytest.raises(SizeError) as info:
        parse_bytes("1.5M")
    assert "1.5MB" in str(info.value)
    assert "1.5MiB" in str(info.value)


def test_fractions_that_land_on_a_whole_number_are_accepted() -> None:
    """6.74B = 674 × 10^7; 0.25KiB = 256; 1.000M = 1,000,000."""
    assert parse_count("1.000M") == 1_000_000
    assert parse_bytes("0.25KiB") == 256


def test_tiny_negative_exponent_on_zero() -> None:
    assert parse_count("0e-9999") == 0
    with pytest.raises(SizeError):
        parse_count("1e-9999")


def test_sign_is_kept_for_the_bounds_check_to_reject() -> None:
    assert parse_count("-5") == -5
    assert parse_plain("+5") == 5


@pytest.mark.parametrize("text", ["8k", "8B", "8.5", "8GB", "8e-1"])
def test_plain_integers_take_no_suffix_or_fraction(text: str) -> None:
    with pytest.raises(SizeError):
        parse_plain(text)


def test_plain_accepts_exact_decimal_spellings() -> None:
    """Spellings "8.0" and "8e0" are exactly 8; only a value that is not whole is refused."""
    assert parse_plain("8.0") == 8
    assert parse_plain("8e0") == 8
    assert parse_plain("1_024") == 1_024


def test_size_error_is_a_value_error() -> None:
    assert issubclass(SizeError, ValueError)


# --------------------------------------------------------------------------- digit separators
# Regression (issue 11, item 4): commas used to be stripped wherever they stood, so
# ``7,5B`` read as 75B and ``1,,,,0B`` as 10B. A comma is now only a thousands separator.


@pytest.mark.parametrize(
    "text",
    [
        "7,5B",  # a decimal comma: 7.5B, never 75B
        "1,,,,0B",
        ",7B",
        "7,B",
        "70,00B",
        "7,0000",
        "7,00",
        "1,000,00",
        "1,0000,000",
        "1234,567",  # first group longer than three digits
        "0,500",  # a leading zero group: a decimal comma (0.5), not five hundred
        "00,000",
        "1.234,5M",  # a comma in the fraction
        "1,234.5,0M",
        "1,000_000",  # separators mixed
        "1_000,000",
        "7,000e,3",
        "-,7",
    ],
)
def test_stray_commas_are_rejected(text: str) -> None:
    with pytest.raises(SizeError) as info:
        parse_count(text)
    assert "not a count" in str(info.value)


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_bytes, "7,5GB"),
        (parse_bytes, "80,0GiB"),
        (parse_bytes, "1,,024"),
        (parse_plain, "7,5"),
        (parse_plain, "1,,0"),
    ],
)
def test_stray_commas_are_rejected_in_bytes_and_plain_fields(parse: Callable[[str], int], text: str) -> None:
    with pytest.raises(SizeError):
        parse(text)


@pytest.mark.parametrize(
    ("parse", "text", "expected"),
    [
        (parse_count, "7,000,000,000", 7_000_000_000),
        (parse_count, "7,000B", 7 * 10**12),
        (parse_count, "7,000M", 7 * 10**9),
        (parse_count, "1,234.5M", 1_234_500_000),
        (parse_count, "-7,000", -7_000),
        (parse_count, "999,999", 999_999),
        (parse_count, "0", 0),
        (parse_bytes, "80,000MB", 80 * 10**9),
        (parse_bytes, "1,024KiB", 2**20),
        (parse_bytes, "85,899,345,920", 80 * 2**30),
        (parse_plain, "1,024", 1_024),
    ],
)
def test_thousands_grouping_is_accepted(parse: Callable[[str], int], text: str, expected: int) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize("text", ["1__0", "7__000_000_000", "7_B", "1_,000", "1,_000", "7_.5B", "7._5B", "7_e9"])
def test_stray_underscores_are_rejected(text: str) -> None:
    """Underscores follow Python's rule for ``int()``: one at a time, between two digits."""
    with pytest.raises(SizeError) as info:
        parse_count(text)
    assert "not a count" in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"), [("1_0", 10), ("7_000_000_000", 7 * 10**9), ("6_740M", 6_740 * 10**6), ("1_2_3", 123)]
)
def test_single_underscores_between_digits_are_accepted(text: str, expected: int) -> None:
    assert parse_count(text) == expected


def test_a_stray_comma_is_a_field_error_naming_the_field() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario({"params": "7,5B", "capacity_bytes": "1,,,,0GB", "dp": "1,6"})
    assert sorted(e.field for e in info.value.errors) == ["capacity_bytes", "dp", "params"]


def test_a_stray_comma_on_the_command_line_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        status = main(["estimate", "--params", "7,5B"])
    except SystemExit as exc:
        status = exc.code  # type: ignore[assignment]
    assert status == 2
    assert "--params" in capsys.readouterr().err


def _proper_grouping(text: str) -> bool:
    """The oracle: digits grouped exactly as Python's ``f"{n:,}"`` writes them."""
    digits = text.replace(",", "")
    return digits.isdigit() and text == f"{int(digits):,}"


# f"{n:,}" of n < 10^30 is at most 39 characters, inside MAX_TEXT.
_GROUPABLE = st.integers(min_value=0, max_value=10**30 - 1)


@given(_GROUPABLE)
def test_python_thousands_grouping_parses_back(n: int) -> None:
    assert len(f"{n:,}") <= MAX_TEXT
    assert parse_plain(f"{n:,}") == n
    assert parse_count(f"{n:,}") == n
    assert parse_bytes(f"{n:,}") == n
    assert parse_plain(f"{n:_}") == n


@given(st.integers(min_value=0, max_value=10**20))
def test_python_thousands_grouping_with_a_suffix_parses_back(n: int) -> None:
    assert parse_count(f"{n:,}B") == n * 10**9
    assert parse_bytes(f"{n:,}GiB") == n * 2**30
    assert parse_count(f"-{n:,}.5k") == -(n * 1_000 + 500)


@st.composite
def _near_groupings(draw: st.DrawFn) -> str:
    """``f"{n:,}"`` with one comma or digit inserted, deleted or moved: mostly not a proper grouping."""
    text = list(f"{draw(st.integers(min_value=0, max_value=10**20)):,}")
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        where = draw(st.integers(min_value=0, max_value=len(text)))
        action = draw(st.sampled_from(["insert comma", "insert digit", "delete"]))
        if action == "insert comma":
            text.insert(where, ",")
        elif action == "insert digit":
            text.insert(where, draw(st.sampled_from("0123456789")))
        elif text and where < len(text):
            del text[where]
    return "".join(text)


_COMMA_TEXT = st.one_of(st.text(alphabet="0123456789,", min_size=1, max_size=MAX_TEXT - 1), _near_groupings())


@given(_COMMA_TEXT.filter(lambda t: "," in t), st.sampled_from(["", "B", "M", ".5k", "e3"]))
def test_a_comma_that_is_not_a_proper_grouping_is_rejected(text: str, tail: str) -> None:
    """Any string with a comma parses if and only if its integer part is a proper thousands grouping."""
    if _proper_grouping(text):
        expected = parse_count(text.replace(",", "") + tail)
        assert parse_count(text + tail) == expected
    else:
        with pytest.raises(SizeError):
            parse_count(text + tail)
        with pytest.raises(SizeError):
            parse_plain(text)
