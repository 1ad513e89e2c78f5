"""``partials/_answer.html``: the verdict first, the least complex stage the run's stack can run that fits (and a
less complex one only DeepSpeed runs, when that fits too) and every stage's peak and headroom, on D ranks of a
device whose name the capacity gives when it is a listed one."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.estimate import Estimate
from app.ledger.peak.schedule.instants import CATEGORY_INDEX
from app.ledger.scenario.presets import DEVICES
from app.ledger.scenario.stacks import STACK_STAGES, least_stage


@dataclass(frozen=True, slots=True)
class StageVerdict:
    """One stage in the answer bar: whether its training peak fits, the peak, and the headroom
    (negative when it does not fit)."""

    stage: int
    fits: bool
    peak: int
    headroom: int
    in_stack: bool  # whether the run's stack can run this stage (FSDP2: 2 and 3)


@dataclass(frozen=True, slots=True)
class Answer:
    """``_answer.html``: the least complex stage the stack can run that fits (or the smallest peak when none
    does), every stage's verdict, and what it runs on: D ranks of a device of ``capacity`` bytes."""

    stack: str
    fits_stage: int | None  # among the stack's stages (STACK_STAGES)
    fits_peak: int
    fits_headroom: int
    smallest_peak: int  # stage 3's, the smallest of all
    smallest_headroom: int  # stage 3's (negative when no stage fits)
    stages: tuple[StageVerdict, ...]
    dp: int
    capacity: int
    devices: tuple[str, ...]  # the devices of exactly this capacity (empty: none of the list)
    stage_run: int  # the stage the scenario says the run uses (marked in the list)
    reserve: int  # the allocator reserve the verdict adds to the allocated peak (0: none given)
    reserve_source: str  # measured | declared
    # A less complex stage outside the stack (DeepSpeed's) that fits too, or fits where none of the stack's does
    elsewhere: StageVerdict | None = None
    # Why stages 1 and 2 peak alike, when they do (a figure that looks wrong without it): None otherwise
    alike: str | None = None


def device_names(capacity: int) -> tuple[str, ...]:
    """The listed devices that report exactly ``capacity`` bytes. The seed's decimal 80 GB is a scenario's figure,
    not a device: it is not named."""
    return tuple(d.title for d in DEVICES if d.capacity_bytes == capacity and d.reported)


def answer(e: Estimate) -> Answer:
    stages = e.ledger.stages
    s = e.scenario
    fits = [st.peak.fits for st in stages]
    chosen = least_stage(s.stack, fits)
    least = stages[chosen] if chosen is not None else None
    verdicts = tuple(
        StageVerdict(st.stage, st.peak.fits, st.peak.total, st.peak.headroom, st.stage in STACK_STAGES[s.stack])
        for st in stages
    )
    anywhere = next((v for v in verdicts if v.fits), None)
    return Answer(
        stack=s.stack,
        fits_stage=least.stage if least else None,
        fits_peak=least.peak.total if least else 0,
        fits_headroom=least.peak.headroom if least else 0,
        smallest_peak=stages[3].peak.total,
        smallest_headroom=stages[3].peak.headroom,
        stages=verdicts,
        dp=s.dp,
        capacity=s.capacity_bytes,
        devices=device_names(s.capacity_bytes),
        stage_run=s.stage,
        reserve=s.reserve_bytes,
        reserve_source=s.reserve_source,
        elsewhere=anywhere
        if anywhere is not None and not anywhere.in_stack and (chosen is None or anywhere.stage < chosen)
        else None,
        alike=_alike(e),
    )


def _alike(e: Estimate) -> str | None:
    """Stages 1 and 2 differ only in sharding the gradients: equal peaks mean the worst instant holds none of
    them (the loss's backward, before the first layer's gradients exist) or holds them alike."""
    one, two = e.ledger.stages[1].peak, e.ledger.stages[2].peak
    if one.total != two.total or one.schedule is None or two.schedule is None:
        return None
    worst = two.schedule.peak
    if worst.sums[CATEGORY_INDEX["gradients"]] == 0:
        return (f"Stages 1 and 2 peak alike: the worst instant, {worst.name}, comes before any gradient exists, and "
                "gradients are what stage 2 shards.")  # fmt: skip
    return f"Stages 1 and 2 peak alike: at the worst instant, {worst.name}, both hold the same."
