"""Formatting at the display edge: exact integers in, text out (decimal GB and binary GiB, never mixed).

Rounding is done in integers (half up), so even the formatted figure involves no float.
"""

from __future__ import annotations

from decimal import Decimal

from app.ledger.arithmetic import n

GB = 10**9
GIB = 2**30


def _hundredths_of(value: int, unit: int) -> int:
    """|``value``| in hundredths of ``unit``, rounded half up: ⌊(200·|value| + unit) ÷ 2·unit⌋."""
    return (200 * abs(value) + unit) // (2 * unit)


def _hundredths(value: int, unit: int, label: str) -> str:
    """``value`` in ``unit``s with two decimals, rounded half up, thousands grouped, a minus sign (−) before a
    negative value."""
    sign = "−" if value < 0 else ""
    whole, frac = divmod(_hundredths_of(value, unit), 100)
    return f"{sign}{whole:,}.{frac:02d} {label}"


def in_units(value: int, unit: int) -> Decimal:
    """``value`` in ``unit``s (:data:`GB`, :data:`GIB`) as the number a spreadsheet reads: two decimals, rounded
    half up as :func:`gb` and :func:`gib` spell it, an ASCII minus."""
    hundredths = _hundredths_of(value, unit)
    return Decimal(-hundredths if value < 0 else hundredths).scaleb(-2)


def gb(value: int) -> str:
    """Decimal gigabytes (10^9 bytes), two decimals, rounded half up."""
    return _hundredths(value, GB, "GB")


def billions(value: int) -> str:
    """A count in billions, two decimals, rounded half up (a model's size as people say it: 8.03 B)."""
    return _hundredths(value, 10**9, "B")


def gib(value: int) -> str:
    """Binary gibibytes (2^30 bytes), two decimals, rounded half up."""
    return _hundredths(value, GIB, "GiB")


integer = n  # exact integers read the same on the page as inside the formulas: 7,000,000,000


def percent_bp(basis_points: int) -> str:
    whole, frac = divmod(basis_points, 100)
    return f"{whole}.{frac:02d} %"


_COUNT_UNITS: tuple[tuple[int, str], ...] = ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K"))
_BYTE_UNITS: tuple[tuple[int, str], ...] = (
    (10**12, "TB"), (2**40, "TiB"), (10**9, "GB"), (2**30, "GiB"), (10**6, "MB"), (2**20, "MiB"),
    (10**3, "KB"), (2**10, "KiB"),
)  # fmt: skip


def _shortest(value: int, units: tuple[tuple[int, str], ...]) -> str:
    """The shortest exact spelling, e.g. 6740000000 → ``6.74B``, 2147483648 → ``2GiB``: a whole
    multiple of a unit first, then up to three decimals; plain digits when neither reads well
    ("494032.768K" does not)."""
    fitting = [(size, suffix) for size, suffix in units if size <= value and value // size < 1000]
    for size, suffix in fitting:
        if value % size == 0:
            return f"{value // size}{suffix}"
    for size, suffix in fitting:
        whole, rest = divmod(value, size)
        if size % 1000 == 0 and rest % (size // 1000) == 0:
            decimals = f"{rest // (size // 1000):03d}".rstrip("0")
            return f"{whole}.{decimals}{suffix}"
    return str(value)


def human_count(value: int) -> str:
    """An exact, human spelling of a count that the size parser reads back to the same int."""
    return _shortest(value, _COUNT_UNITS)


def human_bytes(value: int) -> str:
    """An exact, human spelling of a byte size (``80GB``, ``2GiB``) that parses back to ``value``."""
    return _shortest(value, _BYTE_UNITS)
