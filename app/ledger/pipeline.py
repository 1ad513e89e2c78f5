"""Both ends of a pipeline: which stage is the busiest rank.

With ``pp`` > 1 the middle stages hold the same layers as the ends, fewer micro batches than the first
and neither the embedding nor the head, so the busiest rank is on the first or the last stage. The
ledger is for the stage the scenario names (``pp_stage``); this module budgets the other end the same
way (the scenario with only ``pp_stage`` changed, every typed input kept, every model default taken
again) and says which of the two needs more at the stage the run uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.scenario import Scenario, ScenarioError, parse_scenario

ENDS: tuple[str, ...] = ("first", "last")


@dataclass(frozen=True, slots=True)
class PipelineEnd:
    """One end of the pipeline at the run's stage: its parameters per rank, activations and peak."""

    pp_stage: str
    params: int
    unit_params: int
    activation_bytes: int
    peak: int
    fits: bool


@dataclass(frozen=True, slots=True)
class PipelineEnds:
    ends: tuple[PipelineEnd, ...]  # first, last; only the budgeted one when the other is out of bounds
    busier: str  # "first" or "last" (the first on a tie)
    budgeted: str  # the scenario's pp_stage
    other_problem: str = ""  # why the other end could not be budgeted (its own inputs out of bounds)

    @property
    def budgeted_is_busier(self) -> bool:
        return self.busier == self.budgeted


def other_end(s: Scenario) -> Scenario:
    """The scenario at the other end of its pipeline: the same typed inputs, the model's defaults there."""
    other = "last" if s.pp_stage == "first" else "first"
    typed = {name: value for name, value in s.non_default_items() if name != "pp_stage"}
    return parse_scenario({**typed, "pp_stage": other})


def _end(s: Scenario, ledger: Ledger | None = None) -> PipelineEnd:
    peak = (ledger or compute_ledger(s, schedule=False)).stages[s.stage].peak
    return PipelineEnd(s.pp_stage, s.params, s.unit_params, s.activation_bytes, peak.total, peak.fits)


def pipeline_ends(s: Scenario, ledger: Ledger | None = None) -> PipelineEnds | None:
    """Both ends' peaks at the run's stage (None without pipeline parallelism); ``ledger``: the scenario's
    own, when the caller has it (with pp > 1 its peak is the declared one, as here)."""
    if s.pp == 1:
        return None
    here = _end(s, ledger)
    try:
        there = _end(other_end(s))
    except ScenarioError as exc:  # e.g. the first stage's pp micro batches beyond the activation bound
        return PipelineEnds((here,), s.pp_stage, s.pp_stage, str(exc))
    first, last = (here, there) if s.pp_stage == "first" else (there, here)
    busier = "first" if first.peak >= last.peak else "last"
    return PipelineEnds((first, last), busier, s.pp_stage)
