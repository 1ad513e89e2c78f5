"""``partials/_parallel.html``: the model-parallel layout (tp, pp, ep, HSDP, hpZ), shown only when it is
more than plain data parallelism: the world size, this rank's share of the model before ZeRO shards it
and, with a pipeline, both ends at the run's stage."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.estimate import Estimate
from app.ledger.pipeline import PipelineEnds, other_end
from app.ledger.scenario.links import link
from app.receipts.sections.parallelism import parallelism_shown


@dataclass(frozen=True, slots=True)
class ParallelView:
    """``_parallel.html``: the model-parallel layout (shown only when it is more than plain data parallelism):
    the world size, this rank's share of the model and, with a pipeline, both ends at the run's stage."""

    world: int
    dp: int
    tp: int
    pp: int
    ep: int
    cp: int
    shard_group: int
    hpz: int
    params: int  # per rank, before ZeRO shards them
    expert_params: int  # of them, sharded over D ÷ ep (0 unless ep > 1)
    expert_owners: int  # D ÷ ep
    share_lines: tuple[str, ...]  # how the share was counted (with a model)
    in_flight: int | None  # micro batches held under 1F1B (modelled activations)
    all_to_all_bytes: int
    ring_kv_bytes: int
    stage_run: int
    ends: PipelineEnds | None  # pp > 1
    switch_link: str  # the scenario budgeting the busier end, when that is not the one budgeted; else ""

    @property
    def replicas(self) -> int:
        return self.dp // self.shard_group


def parallel_view(e: Estimate) -> ParallelView | None:
    """The model-parallel layout, or None when the scenario is plain data parallelism."""
    s = e.scenario
    if not parallelism_shown(s):
        return None
    md = e.model
    acts = md.activations if md is not None and e.activation_source == "modelled" else None
    ends = e.pipeline
    switch = ""
    if ends is not None and not ends.other_problem and not ends.budgeted_is_busier:
        switch = link(other_end(s))
    return ParallelView(
        world=s.world,
        dp=s.dp,
        tp=s.tp,
        pp=s.pp,
        ep=s.ep,
        cp=s.cp,
        shard_group=s.shard_group,
        hpz=s.hpz,
        params=s.params,
        expert_params=s.expert_params,
        expert_owners=max(1, s.dp // s.ep),
        share_lines=md.share.lines if md is not None else (),
        in_flight=acts.in_flight if acts is not None else None,
        all_to_all_bytes=acts.all_to_all_bytes if acts is not None else 0,
        ring_kv_bytes=acts.ring_kv_bytes if acts is not None else 0,
        stage_run=s.stage,
        ends=ends,
        switch_link=switch,
    )
