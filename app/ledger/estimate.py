"""One scenario's whole answer: ledger, checks, checkpoint ledger, both kill lists, the fit finder,
and, when the scenario names a model, its inventory, activation ledger and FSDP2 shard."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from app.ledger.ledger import Ledger, compute_ledger
from app.ledger.models.defaults import ModelDefaults, model_defaults
from app.ledger.models.fsdp2 import Fsdp2Shard, experts_dim, fsdp2_shard
from app.ledger.peak.declared import training_peak
from app.ledger.peak.fit import FitFinder, find_fit
from app.ledger.pipeline import PipelineEnds, pipeline_ends
from app.ledger.scenario import Scenario
from app.ledger.state.checkpoint import CheckpointPolicy, checkpoint_policies
from app.ledger.state.host import OffloadFit, cheapest_offload
from app.ledger.state.persistent import persistent_lines
from app.ledger.state.rules import PRODUCTION
from app.ledger.verify.checks import run_checks
from app.ledger.verify.mutants import MutationResult, kill_list, reference_kill_list
from app.ledger.verify.results import ALL_CHECKS, CheckResult


# Not slots: the fit finder and the cheapest offload are cached properties (they need the instance's __dict__).
@dataclass(frozen=True)
class Estimate:
    scenario: Scenario
    ledger: Ledger
    checks: tuple[CheckResult, ...]  # checks 1-9 on the production ledger; () when not asked for
    checkpoint: tuple[CheckpointPolicy, ...]
    mutations: tuple[MutationResult, ...]  # the kill list on this scenario; () when not asked for
    reference_mutations: tuple[MutationResult, ...]
    # scenario.source_of("activation_bytes"): ``modelled`` (from the model), ``measured`` (typed by
    # the user), or ``placeholder`` while the seed's declared 20 GB stands
    activation_source: str
    model: ModelDefaults | None = None  # with a model: its inventory and activation ledger
    fsdp2: Fsdp2Shard | None = None  # with a model: the dim-0-padded shard, in elements per rank
    pipeline: PipelineEnds | None = None  # pp > 1: both ends of the pipeline at the run's stage

    # The fit finder's two searches are made the first time they are read, not with the rest: a live update
    # defers the sections that show them to a request of its own (searching D and the micro batch walks the
    # schedule dozens of times, the costliest part of an answer after the kill lists) and never reads them.
    @cached_property
    def fit(self) -> FitFinder:
        """Per stage, the smallest D and the largest micro batch that fit, and the curve over D."""
        return find_fit(self.scenario, _activations_at(self.scenario, self.activation_source))

    @cached_property
    def offload_fit(self) -> OffloadFit | None:
        """The least offload on which the run's stage fits device and host (None: none does)."""
        s, ledger = self.scenario, self.ledger
        # the scenario's own rung is the ledger's own peak and host ledger: computed once, not again
        return cheapest_offload(
            s, lambda t: ledger.stages[s.stage].peak.total if t == s else run_stage_peak(t), ledger.host
        )


def run_stage_peak(s: Scenario) -> int:
    """The peak of the stage the scenario runs (schedule-aware with a model), under the production rules."""
    lines = persistent_lines(s, s.stage, PRODUCTION)
    return training_peak(s, s.stage, sum(line.bytes for line in lines), PRODUCTION, lines).total


def _activations_at(s: Scenario, source: str) -> Callable[[int], int] | None:
    """The modelled activation peak as a function of the micro batch, when the scenario models it."""
    if source != "modelled":
        return None
    query = s.model_query()
    return lambda b: model_defaults(query._replace(micro_batch=b)).activations.total_bytes


def estimate(s: Scenario, *, with_kill_lists: bool = True) -> Estimate:
    """The whole answer for ``s``. ``with_kill_lists=False`` leaves out what the page's kill-list section
    shows, the kill list on this scenario and the checks on the production ledger (``mutations`` and
    ``checks`` are then empty): a live update defers that section, the most expensive part of an answer
    with a model (each mutant's ledger walks every stage's schedule), to a request of its own made when
    it comes into view."""
    ledger = compute_ledger(s)
    source = s.source_of("activation_bytes")
    md = s.model_defaults()
    return Estimate(
        scenario=s,
        ledger=ledger,
        checks=run_checks(ledger, compute_ledger, ALL_CHECKS) if with_kill_lists else (),
        checkpoint=checkpoint_policies(s, tuple(stage.persistent for stage in ledger.stages)),
        mutations=kill_list(s) if with_kill_lists else (),
        reference_mutations=reference_kill_list(),
        activation_source=source,
        model=md,
        # FSDP2's padded shard is of the whole model over one flat mesh: not a model-parallel rank's
        # (nor with cp: the page states it at D, and the mesh would be D × cp; the ledger's shard is ⌈N ÷ (D × cp)⌉)
        # (nor with a 4-bit base, whose packed codes are not the inventory's tensors: the walk's layout counts them)
        fsdp2=None
        if md is None or (s.tp, s.pp, s.ep, s.cp) != (1, 1, 1, 1) or s.base_quant != "none"
        else fsdp2_shard(md.model.inventory, s.dp, 1, experts_dim(md.model.architecture, s.stack, s.dp)),
        pipeline=pipeline_ends(s, ledger),
    )
