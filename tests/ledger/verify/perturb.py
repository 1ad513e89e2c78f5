"""Deliberately wrong ledgers for the checks' failure paths: one stage, one peak or one instant changed.

Each helper copies a real ledger and changes one figure, so a check that passes on the real one must fail on
the copy, naming what was changed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from app.ledger.ledger import Ledger
from app.ledger.peak.schedule.instants import CATEGORY_INDEX, Instant


def with_stage(ledger: Ledger, stage: int, **changes: Any) -> Ledger:
    """A copy of ``ledger`` with some fields of one stage replaced."""
    stages = list(ledger.stages)
    stages[stage] = dataclasses.replace(stages[stage], **changes)
    return dataclasses.replace(ledger, stages=tuple(stages))


def with_peak(ledger: Ledger, stage: int, **changes: Any) -> Ledger:
    """A copy with some fields of one stage's peak replaced."""
    return with_stage(ledger, stage, peak=dataclasses.replace(ledger.stages[stage].peak, **changes))


def with_class_bytes(ledger: Ledger, stage: int, tensor_class: str, size: int) -> Ledger:
    """A copy whose ``tensor_class`` line at ``stage`` holds ``size`` bytes (the stage's total follows)."""
    lines = tuple(
        dataclasses.replace(ln, bytes=size) if ln.tensor_class == tensor_class else ln
        for ln in ledger.stages[stage].lines
    )
    return with_stage(ledger, stage, lines=lines, persistent=sum(ln.bytes for ln in lines))


def with_host_per_node(ledger: Ledger, stage: int, per_node: int) -> Ledger:
    """A copy whose host ledger holds ``per_node`` bytes per node at ``stage``."""
    stages = list(ledger.host.stages)
    stages[stage] = dataclasses.replace(stages[stage], per_node=per_node)
    return dataclasses.replace(ledger, host=dataclasses.replace(ledger.host, stages=tuple(stages)))


def _with_sums(instant: Instant, sums: dict[str, int]) -> Instant:
    values = list(instant.sums)
    for category, size in sums.items():
        values[CATEGORY_INDEX[category]] = size
    return dataclasses.replace(instant, sums=tuple(values))


def with_instant(ledger: Ledger, stage: int, key: str | None, *, total: int | None = None, **sums: int) -> Ledger:
    """A copy whose instant ``key`` at ``stage`` (every instant when ``key`` is None) holds ``sums`` bytes in
    those categories, and ``total`` if given."""
    walk = ledger.stages[stage].peak.schedule
    assert walk is not None

    def changed(instant: Instant) -> Instant:
        if key is not None and instant.key != key:
            return instant
        instant = _with_sums(instant, sums)
        return instant if total is None else dataclasses.replace(instant, total=total)

    instants = tuple(changed(i) for i in walk.instants)
    return with_peak(ledger, stage, schedule=dataclasses.replace(walk, instants=instants))


def without_instant(ledger: Ledger, stage: int, key: str) -> Ledger:
    """A copy whose schedule at ``stage`` lacks the instant ``key``."""
    walk = ledger.stages[stage].peak.schedule
    assert walk is not None
    instants = tuple(i for i in walk.instants if i.key != key)
    return with_peak(ledger, stage, schedule=dataclasses.replace(walk, instants=instants))
