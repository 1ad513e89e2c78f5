"""``partials/_peak.html``: the training peak's parts per stage and its chart, where the activation term
comes from, and, with a model, the teaching line: the seed's declared peak beside the schedule-aware one,
part by part, with why each part moved."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.estimate import Estimate
from app.ledger.models.activations import ActivationLedger
from app.ledger.scenario import Scenario
from app.receipts.disclaimer import DISCLAIMER
from app.web.views.charts import PARTS, PEAK_PARTS, PeakChart, peak_chart


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


def _activations(e: Estimate) -> Activations:
    act = e.model.activations if e.model else None
    return Activations(
        source=e.activation_source,
        formula=e.ledger.stages[0].peak.declared_peak.activations_formula.text,
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
        gather_formula=stages[3].peak.gather_formula.text,
        activations=_activations(e),
        buckets=s.bucket_bytes,
        overhead=s.overhead_bytes,
        contingency_pct=s.contingency_pct,
        contingency_formula=stages[3].peak.contingency_formula.text,
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
