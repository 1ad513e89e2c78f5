"""Human sizes, exact or rejected.

``7B``, ``6.74B``, ``400M``, ``7_000_000_000``, ``7e9`` are counts; ``80GB``, ``80GiB``,
``512MiB`` are bytes. Decimal suffixes (K/M/B/T, KB/MB/GB/TB) are powers of 10, binary ones
(KiB/MiB/GiB/TiB) powers of 2. A value that is not an exact integer is rejected, never
rounded. The arithmetic is integer only: the mantissa's digits become an ``int`` and the
decimal point an exponent of ten.

The integer part may be grouped in one of two ways, never both: thousands commas exactly as
``f"{n:,}"`` writes them (``7,000,000,000``, ``1,234.5M``), or underscores by Python's own
rule for ``int()`` (one at a time, between digits: ``7_000_000_000``, ``1_0``). Any other
comma is refused rather than dropped: ``7,5B`` is most likely a decimal comma (7.5B), and
reading it as 75B would be wrong by ten times.
"""

from __future__ import annotations

import re

MAX_TEXT = 40  # longest size string we read; anything longer is a paste accident
MAX_EXPONENT = 30  # 10^30 is far past every bound; larger exponents are refused before any pow

_NUMBER = re.compile(
    r"""
    (?P<sign>[+-]?)
    (?P<int>
        [1-9][0-9]{0,2}(?:,[0-9]{3})+  # thousands commas: a first group of 1-3 digits, then threes
      | [0-9]+(?:_[0-9]+)*             # plain digits, or underscores one at a time between digits
    )
    (?:\.(?P<frac>[0-9]+))?
    (?:[eE](?P<exp>[+-]?[0-9]{1,4}))?
    \s*
    (?P<suffix>[A-Za-z]*)
    """,
    re.VERBOSE,
)

COUNT_SUFFIXES: dict[str, int] = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}
# No bare "B": in a byte field "20B" could mean 20 bytes or 20 billion bytes, so it is
# refused as ambiguous (see ``_AMBIGUOUS``) rather than silently read as 20.
BYTE_SUFFIXES: dict[str, int] = {
    "": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}

# A count suffix typed into a byte field: the decimal and binary byte units it could mean.
_AMBIGUOUS: dict[str, tuple[str, str]] = {
    "k": ("KB", "KiB"),
    "m": ("MB", "MiB"),
    "b": ("GB", "GiB"),
    "t": ("TB", "TiB"),
}


class SizeError(ValueError):
    """A size string that is not an exact integer in the expected unit."""


def parse_count(text: str) -> int:
    """Read a count such as ``7B`` or ``6.74B`` exactly."""
    return _parse(text, COUNT_SUFFIXES, "a count such as 7000000000, 7B, 6.74B, 400M or 7e9")


def parse_bytes(text: str) -> int:
    """Read a byte size such as ``80GB`` or ``512MiB`` exactly."""
    return _parse(text, BYTE_SUFFIXES, "a size in bytes such as 80GB, 80GiB, 512MiB or 2000000000")


def parse_plain(text: str) -> int:
    """Read a plain integer (underscores or thousands commas allowed, no suffix)."""
    return _parse(text, {"": 1}, "a whole number")


def _parse(text: str, suffixes: dict[str, int], expected: str) -> int:
    if text.isascii() and text.isdigit() and len(text) <= MAX_TEXT:
        return int(text)  # the common case, a plain integer: no regex needed
    raw = text.strip()
    if not raw:
        raise SizeError(f"is empty: expected {expected}")
    if len(raw) > MAX_TEXT:
        raise SizeError(f"is too long ({len(raw)} characters): expected {expected}")
    match = _NUMBER.fullmatch(raw)
    if match is None:
        raise SizeError(f"{raw!r} is not {expected}")
    suffix = match["suffix"].lower()
    if suffix not in suffixes:
        hint = ""
        if suffixes is COUNT_SUFFIXES and suffix in BYTE_SUFFIXES:
            hint = " (this field counts elements, not bytes)"
        elif suffixes is BYTE_SUFFIXES and suffix in _AMBIGUOUS:
            number = raw[: match.start("suffix")].rstrip()
            decimal, binary = _AMBIGUOUS[suffix]
            hint = f" (ambiguous for bytes: write {number}{decimal} or {number}{binary})"
        raise SizeError(f"{raw!r} has an unknown unit {match['suffix']!r}{hint}: expected {expected}")
    frac = match["frac"] or ""
    exponent = int(match["exp"] or "0") - len(frac)
    if exponent > MAX_EXPONENT:
        raise SizeError(f"{raw!r} is far too large")
    if exponent < -MAX_EXPONENT - MAX_TEXT:
        exponent = -MAX_EXPONENT - MAX_TEXT  # past every mantissa's length: only zero stays whole
    # The pattern has already checked where each separator stands, so removing them is safe here.
    digits = match["int"].replace("_", "").replace(",", "")
    mantissa: int = int(digits + frac) * suffixes[suffix]
    if exponent >= 0:
        value: int = mantissa * 10**exponent
    else:
        divisor = 10**-exponent
        if mantissa % divisor:
            raise SizeError(f"{raw!r} is not a whole number of {'bytes' if suffixes is BYTE_SUFFIXES else 'units'}")
        value = mantissa // divisor
    return -value if match["sign"] == "-" else value
