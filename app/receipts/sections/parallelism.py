"""The parallelism section: the model-parallel layout, this rank's share of the model, the 1F1B
activations and both ends of the pipeline."""

from __future__ import annotations

from typing import Literal, cast

from pydantic import Field

from app.ledger.estimate import Estimate
from app.ledger.pipeline import PipelineEnd, PipelineEnds
from app.ledger.scenario import Scenario
from app.receipts.sections.model import UnitSize
from app.receipts.strict import Bytes, Count, Strict

PipelineStage = Literal["only", "first", "last"]
End = Literal["first", "last"]


class RankShareOut(Strict):
    """The parameters one rank holds under tp, pp and ep before ZeRO shards them, and how they were counted."""

    stage: PipelineStage = Field(description="the pipeline stage counted; only: pp = 1")
    layers: Count = Field(description="decoder layers on this pipeline stage")
    dense: Count = Field(description="parameters ZeRO shards over the shard group")
    experts: Count = Field(description="expert parameters on this rank (E ÷ ep of each MoE layer's experts)")
    whole_model: Count = Field(description="the whole model's parameter count")
    largest_unit: UnitSize = Field(description="the largest wrapped unit on this rank: the stage-3 gather's U")
    lines: list[str] = Field(description="the counting, one human-readable line each")


class ParallelActivations(Strict):
    """What pipeline and expert parallelism change in the modelled activation ledger."""

    stage: PipelineStage
    in_flight: Count = Field(description="micro batches whose activations the stage holds at once under 1F1B")
    all_to_all_bytes: Bytes = Field(description="one MoE layer's all-to-all dispatch send and receive buffers")
    ring_kv_bytes: Bytes = Field(
        default=0, description="context parallelism: ring attention's all-gathered K and V of the layer in flight"
    )


class PipelineEndOut(Strict):
    """One end of the pipeline at the run's stage."""

    pp_stage: End
    params: Count = Field(description="parameters per rank on this end before ZeRO shards them")
    unit_params: Count
    activation_bytes: Bytes
    peak: Bytes = Field(description="the training peak of the run's stage on this end")
    fits: bool


class PipelineOut(Strict):
    """Both ends of the pipeline: the ledger budgets pp_stage; the busier end is the busiest rank."""

    budgeted: End = Field(description="the scenario's pp_stage")
    busier: End = Field(description="the end with the larger peak (first on a tie)")
    budgeted_is_busier: bool
    other_problem: str = Field(description="why the other end could not be budgeted; empty when it was")
    ends: list[PipelineEndOut] = Field(description="first, then last; only the budgeted end when other_problem")


class ParallelismSection(Strict):
    """The model-parallel layout: world size, this rank's share of the model, and both pipeline ends."""

    world: Count = Field(description="GPUs in the run: dp × tp × pp × cp")
    dp: Count
    tp: Count
    pp: Count
    ep: Count
    cp: Count = Field(default=1, description="context-parallel ranks; FSDP shards state over shard_group × cp")
    shard_group: Count = Field(description="ranks ZeRO shards state over (dp unless HSDP / MiCS), before × cp")
    replicas: Count = Field(description="dp ÷ shard_group: copies of the sharded state")
    hpz: Count = Field(description="ZeRO++ secondary parameter partition size (1: none)")
    params_per_rank: Count = Field(description="the scenario's N: parameters on this rank before ZeRO shards them")
    expert_params_per_rank: Count = Field(
        description="of them, expert parameters sharded over dp ÷ ep (0 unless ep > 1)"
    )
    share: RankShareOut | None = Field(description="null without a model")
    activations: ParallelActivations | None = Field(description="null when activations are not modelled")
    pipeline: PipelineOut | None = Field(description="null when pp = 1")


def parallelism_shown(s: Scenario) -> bool:
    """Whether the layout is more than plain data parallelism: tp, pp or ep above 1, an HSDP / MiCS shard
    group smaller than D, or a ZeRO++ secondary partition (the table and the page show it then)."""
    return s.tp > 1 or s.pp > 1 or s.ep > 1 or s.cp > 1 or s.shard_group < s.dp or s.hpz > 1


def _end(end: PipelineEnd) -> PipelineEndOut:
    return PipelineEndOut(pp_stage=cast(End, end.pp_stage), params=end.params, unit_params=end.unit_params,
                          activation_bytes=end.activation_bytes, peak=end.peak, fits=end.fits)  # fmt: skip


def pipeline_out(ends: PipelineEnds | None) -> PipelineOut | None:
    """Both ends of the pipeline at the run's stage (None when pp = 1)."""
    if ends is None:
        return None
    return PipelineOut(budgeted=cast(End, ends.budgeted), busier=cast(End, ends.busier),
                       budgeted_is_busier=ends.budgeted_is_busier, other_problem=ends.other_problem,
                       ends=[_end(end) for end in ends.ends])  # fmt: skip


def parallelism_out(e: Estimate) -> ParallelismSection:
    """The model-parallel layout: the world size, this rank's share of the model before ZeRO shards it
    (with a model), the 1F1B activations (when modelled) and both ends of the pipeline (pp > 1)."""
    s, md = e.scenario, e.model
    share = None if md is None else md.share
    acts = md.activations if md is not None and e.activation_source == "modelled" else None
    return ParallelismSection(
        world=s.world,
        dp=s.dp,
        tp=s.tp,
        pp=s.pp,
        ep=s.ep,
        cp=s.cp,
        shard_group=s.shard_group,
        replicas=s.dp // s.shard_group,
        hpz=s.hpz,
        params_per_rank=s.params,
        expert_params_per_rank=s.expert_params,
        share=None
        if share is None
        else RankShareOut(
            stage=cast(PipelineStage, share.stage),
            layers=share.layers,
            dense=share.dense,
            experts=share.experts,
            whole_model=share.whole_model,
            largest_unit=UnitSize(name=share.largest.name, params=share.largest.params),
            lines=list(share.lines),
        ),
        activations=None
        if acts is None
        else ParallelActivations(
            stage=cast(PipelineStage, acts.stage),
            in_flight=acts.in_flight,
            all_to_all_bytes=acts.all_to_all_bytes,
            ring_kv_bytes=acts.ring_kv_bytes,
        ),
        pipeline=pipeline_out(e.pipeline),
    )
