"""The fit finder's searches over one integer (a degree D, a micro batch b): bisections for predicates that turn once,
and the largest micro batch that fits from each instant's totals."""

from __future__ import annotations

from collections.abc import Callable

from app.ledger.scenario.fields import FIELD_BY_NAME

MICRO_BATCH_MAX = FIELD_BY_NAME["micro_batch"].maximum
_NEAR = 4  # micro batches either side of the linear guess searched exactly


def smallest(fits: Callable[[int], bool], low: int, high: int) -> int | None:
    """The smallest x in [low, high] with fits(x), searching for the boundary by bisection."""
    if fits(low):
        return low
    if not fits(high):
        return None
    return boundary(fits, low, high)


def boundary(fits: Callable[[int], bool], low: int, high: int) -> int:
    """The smallest x in (low, high] with fits(x), where fits(high) and not fits(low) are known."""
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid
    return high


def largest(fits: Callable[[int], bool], low: int, high: int) -> int | None:
    """The largest x in [low, high] with fits(x), for a predicate that only turns false: one
    before the first x that does not fit."""
    first_miss = smallest(lambda x: not fits(x), low, high)
    if first_miss is None:
        return high
    return first_miss - 1 if first_miss > low else None


def largest_micro_batch(
    totals_at: Callable[[int], list[int]], room: int, fits_at: Callable[[int], bool] | None = None
) -> int | None:
    """The largest micro batch b whose totals (before contingency) at b, ``totals_at(b)``, all stay within
    ``room`` (:func:`max_subtotal`). The peak never falls as b grows, and each total is linear in b up to
    rounding (each activation, logits and temporary term is a multiple of b): the totals at b = 1 and 2 give
    each one's line, the lines give a guess, and a few exact evaluations around it settle the answer (a
    bisection over 1 … 4,096 when they do not; any guess gives the same answer, a good one fewer walks).
    ``fits_at(b)``, when given, says the same as the totals at b with fewer sums (the fit finder's early stop)."""

    def fits(b: int) -> bool:
        return fits_at(b) if fits_at is not None else max(totals_at(b)) <= room

    at_ones = totals_at(1)
    if max(at_ones) > room:  # not even one sequence fits
        return None
    guess = MICRO_BATCH_MAX
    for at_one, at_two in zip(at_ones, totals_at(2), strict=True):
        if at_two > at_one:
            guess = min(guess, 1 + (room - at_one) // (at_two - at_one))
    guess = max(1, min(guess, MICRO_BATCH_MAX))
    if fits(guess) and (guess == MICRO_BATCH_MAX or not fits(guess + 1)):
        return guess  # the usual case: the lines are exact
    low, high = max(1, guess - _NEAR), min(MICRO_BATCH_MAX, guess + _NEAR)
    if fits(low) and (not fits(high) or high == MICRO_BATCH_MAX):
        return largest(fits, low, high)
    return largest(fits, 1, MICRO_BATCH_MAX)
