"""The results section's data, one part per partial of ``templates/partials/``: the answer, the
model, persistent state by stage, the peak, the sections below it (fit finder, communication, checkpoint,
host) and the kill lists.

Everything is read off one :class:`~app.ledger.estimate.Estimate`; the figures stay exact integers
(the templates format them) and the lab's own texts (formulas, evidence, messages) are passed as
they are, for the templates to escape like any other text.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from app.interop.deepspeed.estimator import Comparison, compare, not_comparable
from app.ledger.arithmetic import share_bp
from app.ledger.estimate import Estimate, estimate
from app.ledger.ledger import compute_ledger
from app.ledger.models.activations import ActivationLedger
from app.ledger.models.inventory import Unit
from app.ledger.pipeline import PipelineEnds, other_end
from app.ledger.scenario import Scenario
from app.ledger.scenario.links import link
from app.ledger.scenario.presets import DEVICES
from app.ledger.state.checkpoint import CheckpointPolicy
from app.ledger.state.host import HostLedger, OffloadFit
from app.ledger.state.rules import CLASSES
from app.ledger.verify.checks import ALL_CHECKS, CheckResult, run_checks
from app.ledger.verify.mutants import MutationResult, kill_list, reference_kill_list
from app.receipts.receipt import DISCLAIMER, fsdp2_section, parallelism_shown
from app.web.views.charts import PARTS, PEAK_PARTS, FitChart, PeakChart, fit_chart, peak_chart


@dataclass(frozen=True, slots=True)
class StageVerdict:
    """One stage in the answer bar: whether its training peak fits, the peak, and the headroom
    (negative when it does not fit)."""

    stage: int
    fits: bool
    peak: int
    headroom: int


@dataclass(frozen=True, slots=True)
class Answer:
    """``_answer.html``: the least complex stage that fits (or the smallest peak when none does),
    every stage's verdict, and what it runs on: D ranks of a device of ``capacity`` bytes."""

    fits_stage: int | None
    fits_peak: int
    fits_headroom: int
    smallest_peak: int  # stage 3's, the smallest of all
    smallest_headroom: int  # stage 3's (negative when no stage fits)
    stages: tuple[StageVerdict, ...]
    dp: int
    capacity: int
    devices: tuple[str, ...]  # the devices of exactly this capacity (empty: none of the list)
    stage_run: int  # the stage the scenario says the run uses (marked in the list)


@dataclass(frozen=True, slots=True)
class UnitRow:
    name: str
    last_layer: int | None  # for the decoder layer: the index of the last one ("layers.0 … layers.31")
    params: int
    each: bool  # the count is per layer
    tensors: tuple[tuple[str, tuple[int, ...], int], ...]  # (name, shape, count)


@dataclass(frozen=True, slots=True)
class ModelSection:
    """``_model.html``: the model's inventory beside the scenario's N and U, and its FSDP2 shard."""

    title: str
    family: str
    source: str
    params: int
    params_source: str
    scenario_params: int | None  # when the scenario overrides the model's count
    layers: int
    hidden: int
    vocab: int
    tied: bool
    unit_name: str
    unit_params: int
    unit_source: str
    scenario_unit_params: int | None
    dp: int
    fsdp2_padded: int | None
    fsdp2_lower_bound: int
    fsdp2_note: str
    units: tuple[UnitRow, ...]


@dataclass(frozen=True, slots=True)
class PersistentCell:
    stage: int
    bytes: int
    formula: str
    share_bp: int  # of the stage's persistent total


@dataclass(frozen=True, slots=True)
class PersistentSection:
    """``_persistent.html``: each class's bytes per rank at every stage, and the totals."""

    rows: tuple[tuple[str, tuple[PersistentCell, ...]], ...]  # (class, one cell per stage)
    totals: tuple[tuple[int, int], ...]  # (stage, bytes)


@dataclass(frozen=True, slots=True)
class PeakRow:
    stage: int
    fits: bool
    parts: tuple[tuple[str, int], ...]  # PEAK_PARTS with their bytes, the total last
    total: int
    headroom: int


@dataclass(frozen=True, slots=True)
class Activations:
    """Where the activation peak comes from, and the model's activation ledger when there is one."""

    source: str  # modelled, measured or placeholder
    formula: str  # the peak's activation term
    scenario: Scenario  # s, b, t, sequence parallelism and the recomputation policy
    model: ActivationLedger | None
    recompute_fraction: str  # of a step, in extra forward FLOPs (with a model)


@dataclass(frozen=True, slots=True)
class PeakShift:
    """One part of the peak: the seed's declared figure, the schedule's at its worst instant, and why they differ."""

    label: str
    declared: int
    scheduled: int
    why: str

    @property
    def difference(self) -> int:
        return self.scheduled - self.declared


@dataclass(frozen=True, slots=True)
class Teaching:
    """With a model: the seed's declared peak beside the schedule-aware one (stage 3), part by part,
    and stage 3's instants."""

    declared: int
    scheduled: int
    instant: str
    shifts: tuple[PeakShift, ...]
    instants: tuple[tuple[str, int, bool], ...]  # (name, bytes, the worst)
    note: str
    declared_by_stage: tuple[tuple[int, int, int], ...]  # (stage, declared, schedule-aware)

    @property
    def difference(self) -> int:
        return self.scheduled - self.declared


@dataclass(frozen=True, slots=True)
class PeakSection:
    """``_peak.html``: the training peak's parts per stage, its chart and where each part comes from."""

    rows: tuple[PeakRow, ...]
    chart: PeakChart
    legend: tuple[tuple[str, str], ...]  # (part, label)
    gather_formula: str
    activations: Activations
    buckets: int
    overhead: int
    contingency_pct: int
    contingency_formula: str
    disclaimer: str
    teaching: Teaching | None = None  # with a model: the seed's declared peak, as a teaching line
    why_declared: str = ""  # without a schedule: why the peak is the declared one


@dataclass(frozen=True, slots=True)
class FitRow:
    stage: int
    smallest_dp: int | None  # None: no D fits
    largest_micro_batch: int | None  # None: not even one sequence fits (or not modelled)


@dataclass(frozen=True, slots=True)
class FitSection:
    """``_fit.html``: the smallest D and the largest micro batch that fit, and the curve's chart."""

    rows: tuple[FitRow, ...]
    micro_batch_modelled: bool
    dp: int
    chart: FitChart
    stage_run: int
    offload: OffloadFit | None  # the least offload on which the run's stage fits device and host


@dataclass(frozen=True, slots=True)
class CommunicationRow:
    stage: int
    collectives: str
    bytes: int
    formula: str


@dataclass(frozen=True, slots=True)
class Kills:
    """``_kills.html``: both kill lists and the checks on the production ledger."""

    scenario: tuple[MutationResult, ...]
    reference: tuple[MutationResult, ...]
    checks: tuple[CheckResult, ...]


@dataclass(frozen=True, slots=True)
class HostView:
    """``_host.html``: the host ledger per node, the run's stage's lines, DeepSpeed's estimator beside it."""

    ledger: HostLedger
    stage_run: int
    offloaded: bool  # anything off the device at some stage
    estimator: Comparison | None
    estimator_note: str


@dataclass(frozen=True, slots=True)
class ParallelView:
    """``_parallel.html``: the model-parallel layout (shown only when it is more than plain data parallelism):
    the world size, this rank's share of the model and, with a pipeline, both ends at the run's stage."""

    world: int
    dp: int
    tp: int
    pp: int
    ep: int
    shard_group: int
    hpz: int
    params: int  # per rank, before ZeRO shards them
    expert_params: int  # of them, sharded over D ÷ ep (0 unless ep > 1)
    expert_owners: int  # D ÷ ep
    share_lines: tuple[str, ...]  # how the share was counted (with a model)
    in_flight: int | None  # micro batches held under 1F1B (modelled activations)
    all_to_all_bytes: int
    stage_run: int
    ends: PipelineEnds | None  # pp > 1
    switch_link: str  # the scenario budgeting the busier end, when that is not the one budgeted; else ""

    @property
    def replicas(self) -> int:
        return self.dp // self.shard_group


@dataclass(frozen=True, slots=True)
class Lower:
    """``_lower.html``: the sections below the peak (the trace panel, the fit finder, communication,
    checkpoint save, host memory, "Run it"). A live update defers them as it does the kill lists."""

    capacity: int
    fit: FitSection
    communication: tuple[CommunicationRow, ...]
    communication_evidence: str
    checkpoint: tuple[CheckpointPolicy, ...]
    host: HostView


@dataclass(frozen=True, slots=True)
class Results:
    """Everything ``_results.html`` shows for a valid scenario."""

    capacity: int
    answer: Answer
    model: ModelSection | None
    persistent: PersistentSection
    peak: PeakSection
    # None: deferred, loaded when it comes into view (partials/_lower_pending.html, partials/_kills_pending.html)
    lower: Lower | None
    kills: Kills | None
    parallel: ParallelView | None = None  # None: plain data parallelism (nothing to show)


def kills(s: Scenario) -> Kills:
    """``_kills.html`` on its own (``/kills``): what :func:`results` shows when it is not deferred."""
    return Kills(kill_list(s), reference_kill_list(), run_checks(compute_ledger(s), compute_ledger, ALL_CHECKS))


# The parts of the results a live update may defer, each then loaded by a request of its own when it comes
# into view (partials/_lower_pending.html, partials/_kills_pending.html): the sections below the peak
# (the fit finder's searches, the trace panel's lookups) and the kill lists, the two costliest parts.
DEFERRABLE = frozenset({"lower", "kills"})


def results(s: Scenario, *, deferred: frozenset[str] = frozenset()) -> Results:
    """Everything the results show for ``s``, less the parts named in ``deferred`` (of :data:`DEFERRABLE`):
    ``lower`` (the sections below the peak, then from /lower), ``kills`` (the kill lists, then
    from /kills)."""
    return _whole_results(s) if not deferred else _results(s, deferred)


# Cached: a room opens the same link at once (the default scenario, a preset: a workshop's 200 first page
# loads are one answer, the costliest there is, kill lists included). Live updates are each attendee's own
# edits and are not cached: they seldom repeat across a room, and would only push these out. Results are
# frozen, so requests share them safely; an answer is ~36 KB (tracemalloc), ~2 MB in all.
@lru_cache(maxsize=64)
def _whole_results(s: Scenario) -> Results:
    return _results(s, frozenset())


def _results(s: Scenario, deferred: frozenset[str]) -> Results:
    unknown = deferred - DEFERRABLE
    if unknown:
        raise ValueError(f"not a deferrable part of the results: {sorted(unknown)}")
    with_kills = "kills" not in deferred
    e = estimate(s, with_kill_lists=with_kills)  # its fit finder is searched only if lower_section reads it
    return Results(
        capacity=s.capacity_bytes,
        answer=answer(e),
        model=model_section(e),
        persistent=persistent_section(e),
        peak=peak_section(e),
        lower=None if "lower" in deferred else lower_section(e),
        kills=Kills(e.mutations, e.reference_mutations, e.checks) if with_kills else None,
        parallel=parallel_view(e),
    )


def lower_section(e: Estimate) -> Lower:
    """``_lower.html``'s figures for ``e`` (the trace panel is the template's, from the scenario)."""
    s = e.scenario
    stages = e.ledger.stages
    return Lower(
        capacity=s.capacity_bytes,
        fit=fit_section(e),
        communication=tuple(
            CommunicationRow(st.stage, st.communication.collectives, st.communication.bytes, st.communication.formula)
            for st in stages
        ),
        communication_evidence=stages[0].communication.evidence,
        checkpoint=e.checkpoint,
        host=HostView(
            e.ledger.host,
            s.stage,
            any(st.lines for st in e.ledger.host.stages),
            compare(e.ledger, e.ledger.host),
            not_comparable(s) or "",
        ),
    )


def lower(s: Scenario) -> Lower:
    """``_lower.html`` on its own (``/lower``): what :func:`results` shows when it is not deferred."""
    return lower_section(estimate(s, with_kill_lists=False))


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
        shard_group=s.shard_group,
        hpz=s.hpz,
        params=s.params,
        expert_params=s.expert_params,
        expert_owners=max(1, s.dp // s.ep),
        share_lines=md.share.lines if md is not None else (),
        in_flight=acts.in_flight if acts is not None else None,
        all_to_all_bytes=acts.all_to_all_bytes if acts is not None else 0,
        stage_run=s.stage,
        ends=ends,
        switch_link=switch,
    )


def device_names(capacity: int) -> tuple[str, ...]:
    """The listed devices whose capacity is exactly ``capacity`` bytes (A100 80GB and H100 80GB
    share 80 GiB). The seed's decimal 80 GB is a scenario's figure, not a device: it is not named."""
    return tuple(d.title for d in DEVICES if d.capacity_bytes == capacity and d.unit == "GiB")


def answer(e: Estimate) -> Answer:
    stages = e.ledger.stages
    least = next((st for st in stages if st.peak.fits), None)
    s = e.scenario
    return Answer(
        fits_stage=least.stage if least else None,
        fits_peak=least.peak.total if least else 0,
        fits_headroom=least.peak.headroom if least else 0,
        smallest_peak=stages[3].peak.total,
        smallest_headroom=stages[3].peak.headroom,
        stages=tuple(StageVerdict(st.stage, st.peak.fits, st.peak.total, st.peak.headroom) for st in stages),
        dp=s.dp,
        capacity=s.capacity_bytes,
        devices=device_names(s.capacity_bytes),
        stage_run=s.stage,
    )


def _unit_row(unit: Unit, layer: bool, layers: int) -> UnitRow:
    return UnitRow(
        name=unit.name,
        last_layer=layers - 1 if layer and layers > 1 else None,
        params=unit.params,
        each=layer,
        tensors=tuple((t.name, t.shape, t.count) for t in unit.tensors),
    )


def model_section(e: Estimate) -> ModelSection | None:
    md = e.model
    if md is None:
        return None
    s = e.scenario
    inv, arch = md.model.inventory, md.model.architecture
    fsdp2 = fsdp2_section(e)
    return ModelSection(
        title=md.model.title,
        family=arch.family,
        source=md.model.source,
        params=inv.params,
        params_source=s.source_of("params"),
        scenario_params=s.params if s.params != inv.params else None,
        layers=arch.layers,
        hidden=arch.hidden,
        vocab=arch.vocab,
        tied=arch.tied_embeddings,
        unit_name=inv.largest_unit.name,
        unit_params=inv.largest_unit.params,
        unit_source=s.source_of("unit_params"),
        scenario_unit_params=s.unit_params if s.unit_params != inv.largest_unit.params else None,
        dp=s.dp,
        fsdp2_padded=e.fsdp2.padded_elements if e.fsdp2 else None,
        fsdp2_lower_bound=e.fsdp2.lower_bound_elements if e.fsdp2 else 0,
        fsdp2_note=str(fsdp2["note"]) if fsdp2 else "",
        units=(
            _unit_row(inv.embed, False, arch.layers),
            _unit_row(inv.units[1], True, arch.layers),
            _unit_row(inv.final, False, arch.layers),
        ),
    )


def persistent_section(e: Estimate) -> PersistentSection:
    stages = e.ledger.stages
    rows = []
    for index, cls in enumerate(CLASSES):
        cells = []
        for st in stages:
            line = st.lines[index]
            cells.append(PersistentCell(st.stage, line.bytes, line.formula, share_bp(line.bytes, st.persistent)))
        rows.append((cls, tuple(cells)))
    return PersistentSection(tuple(rows), tuple((st.stage, st.persistent) for st in stages))


def _activations(e: Estimate) -> Activations:
    act = e.model.activations if e.model else None
    return Activations(
        source=e.activation_source,
        formula=e.ledger.stages[0].peak.declared_peak.activations_formula,
        scenario=e.scenario,
        model=act,
        recompute_fraction=act.recompute_fraction_text(3) if act else "",
    )


def peak_section(e: Estimate) -> PeakSection:
    s = e.scenario
    stages = e.ledger.stages
    rows = []
    for st in stages:
        p = st.peak
        values = (p.persistent, p.gather, p.buckets, p.activations, p.overhead, p.contingency, p.total)
        rows.append(PeakRow(st.stage, p.fits, tuple(zip(PEAK_PARTS, values, strict=True)), p.total, p.headroom))
    return PeakSection(
        rows=tuple(rows),
        chart=peak_chart(e.ledger, s.capacity_bytes),
        legend=PARTS,
        gather_formula=stages[3].peak.gather_formula,
        activations=_activations(e),
        buckets=s.bucket_bytes,
        overhead=s.overhead_bytes,
        contingency_pct=s.contingency_pct,
        contingency_formula=stages[3].peak.contingency_formula,
        disclaimer=DISCLAIMER,
        teaching=teaching(e),
        why_declared=stages[3].peak.why_declared if s.model else "",
    )


# Why the schedule-aware peak's parts differ from the declared sum's (stage 3, FSDP2).
_SHIFT_WHY: dict[str, str] = {
    "persistent": "the declared sum counts every gradient; at the instant only those computed so far exist "
    "(zero_grad(set_to_none=True)), plus FSDP2's dim-0 padding",
    "gather": "the declared sum counts the largest unit's remote shards; FSDP2 holds whole padded units, own "
    "shard included: the root from forward to its post-backward, the layer at hand and the one prefetched",
    "buckets": "the declared sum has no reduce-scatter input nor unsharded gradients (a whole layer in the "
    "reduce width, the head's gradients until the root's post-backward)",
    "activations": "the declared sum counts every saved activation; at the instant some are freed, and the "
    "op's temporaries (the loss backward's logits-sized gradients, a layer's backward) are added",
}
_SHIFT_LABEL = {
    "persistent": "model state",
    "gather": "unsharded parameters",
    "buckets": "reduce-scatter and gradient buffers",
    "activations": "activations and temporaries",
}


def teaching(e: Estimate) -> Teaching | None:
    """The teaching line: stage 3's schedule-aware peak against the seed's declared one, part by part."""
    stages = e.ledger.stages
    p = stages[3].peak
    if p.schedule is None or p.instant is None:
        return None
    d = p.declared_peak
    shifts = tuple(
        PeakShift(_SHIFT_LABEL[part], getattr(d, part), getattr(p, part), _SHIFT_WHY[part])
        for part in ("persistent", "gather", "buckets", "activations")
        if getattr(d, part) != getattr(p, part)
    )
    worst = p.instant
    return Teaching(
        declared=d.total,
        scheduled=p.total,
        instant=worst.name,
        shifts=shifts,
        instants=tuple((i.name, i.total, i is worst) for i in p.schedule.instants),
        note=p.schedule.note,
        declared_by_stage=tuple((st.stage, st.peak.declared_peak.total, st.peak.total) for st in stages),
    )


def fit_section(e: Estimate) -> FitSection:
    fit = e.fit
    return FitSection(
        rows=tuple(FitRow(st.stage, st.smallest_dp, st.largest_micro_batch) for st in fit.stages),
        micro_batch_modelled=fit.micro_batch_modelled,
        dp=e.scenario.dp,
        chart=fit_chart(
            fit.curve, e.scenario.capacity_bytes, e.scenario.dp, tuple(st.peak.total for st in e.ledger.stages)
        ),
        stage_run=e.scenario.stage,
        offload=e.offload_fit,
    )
