"""Human sizes parse to exact integers or are rejected with a message; never rounded."""

from __future__ import annotations

import pytest

from app.ledger.sizes import SizeError, parse_bytes, parse_count, parse_plain


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
