"""Integer helpers and the exact formatting used inside formulas."""

from __future__ import annotations


def ceil_div(numerator: int, denominator: int) -> int:
    """⌈numerator ÷ denominator⌉ for non-negative numerator and positive denominator."""
    return -(-numerator // denominator)


def n(value: int) -> str:
    """An integer with thousands separators, as formulas show it."""
    return f"{value:,}"


def share_bp(part: int, whole: int) -> int:
    """``part`` as basis points of ``whole`` (1 bp = 0.01 %), rounded half up; 0 when whole is 0."""
    if whole <= 0:
        return 0
    return (part * 20_000 + whole) // (2 * whole)


def shown_int(value: int) -> str:
    """An out-of-range value for a message; a huge one is described, not printed (and cannot fail
    to print)."""
    return f"{value:,}" if value.bit_length() <= 64 else f"a {'negative ' if value < 0 else ''}number far out of range"
