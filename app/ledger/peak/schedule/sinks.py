"""Where the walk puts what it finds: one walk, two collectors.

The walk (:mod:`.step`) says, for every instant, each thing resident with its bytes and how to spell its
formula. :class:`SumSink` keeps only the bytes per category: the numbers of every instant, which is all
the fit finder, the kill lists and the checks read. :class:`EntrySink` keeps each entry too, for a
receipt or the page that spells an instant out. Both see the same calls, so the numbers cannot differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from app.ledger.peak.schedule.instants import CATEGORIES, CATEGORY_INDEX, Entry


class Sink(Protocol):
    def add(self, category: str, what: str, value: int, formula: Callable[[], str]) -> None: ...


class SumSink:
    """The bytes of each category (:data:`CATEGORIES`' order), nothing spelled."""

    __slots__ = ("sums",)

    def __init__(self, start: list[int] | None = None) -> None:
        self.sums = [0] * len(CATEGORIES) if start is None else list(start)

    def add(self, category: str, what: str, value: int, formula: Callable[[], str]) -> None:
        self.sums[CATEGORY_INDEX[category]] += value


class EntrySink:
    """Each non-empty entry, in the order the walk finds them, with its formula (spelled on demand)."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def add(self, category: str, what: str, value: int, formula: Callable[[], str]) -> None:
        if value:  # an empty term (no padding, nothing offloaded yet) is no entry
            self.entries.append(Entry(category, what, value, formula))
