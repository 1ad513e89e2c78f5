"""A stage's two peaks: the training peak in use (schedule-aware with a model) with every instant walked,
and the seed's declared peak with its own verdict."""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import Field

from app.ledger.peak import declared
from app.ledger.peak.schedule import Instant
from app.receipts.strict import Bytes, SignedBytes, Strict

# The core holds these as plain strings; the models name their values (checked when a model is built).
Category = Literal[
    "state",
    "gradients",
    "unsharded_params",
    "all_gather",
    "unsharded_grads",
    "reduce_scatter",
    "buckets",
    "activations",
    "temporaries",
    "overhead",
]
Phase = Literal["forward", "loss", "backward", "optimizer"]
Kind = Literal["schedule", "declared"]


class PeakFormulas(Strict):
    gather: str
    activations: str
    contingency: str


class DeclaredPeak(Strict):
    """The seed's declared peak: persistent state plus the declared transients and the contingency
    (schema 1's ``peak``), with its own verdict."""

    persistent: Bytes = Field(description="the stage's persistent total")
    gather: Bytes = Field(description="the stage-3 all-gather of the largest unit(s) beyond the own shard")
    buckets: Bytes
    activations: Bytes = Field(description="never divided by D")
    overhead: Bytes
    contingency: Bytes
    total: Bytes = Field(description="subtotal + contingency")
    subtotal: Bytes
    formulas: PeakFormulas
    fits: bool
    headroom_bytes: SignedBytes = Field(description="capacity − the declared peak")
    peak_minus_declared: Annotated[int, Field(description="the stage's peak − the declared peak, bytes")]


class InstantEntry(Strict):
    """One thing resident at an instant."""

    category: Category
    what: str
    bytes: Bytes
    formula: str


class InstantParts(Strict):
    persistent: Bytes
    gather: Bytes
    buckets: Bytes
    activations: Bytes
    overhead: Bytes


class InstantOut(Strict):
    """A named instant of one training step and what is resident then."""

    key: str = Field(
        description="e.g. forward-layer-<k>, end-of-forward, loss-backward, backward-layer-<k>, root-post-backward, "
        "optimizer-step; with Accelerate's units (wrap = embed-tail) also forward-embedding, forward-tail, "
        "loss-forward, tail-head-reduce, tail-regather and embedding-…"
    )
    name: str
    phase: Phase
    total: Bytes = Field(description="the sum of the entries (before contingency)")
    parts: InstantParts
    entries: list[InstantEntry]


class Peak(Strict):
    """The training peak the verdict, headroom, fit finder and charts use.

    With a model (``kind`` schedule) it is the schedule-aware peak: the worst of the named instants
    of one step, its parts the categories resident at that ``instant``. Without one (``kind``
    declared) it is the seed's declared peak, and ``declared_peak`` holds the same figures."""

    persistent: Bytes = Field(description="declared: the persistent total; schedule: model state held then")
    gather: Bytes = Field(description="declared: the largest unit's remote shards; schedule: unsharded parameters")
    buckets: Bytes = Field(description="schedule: reduce-scatter input, unsharded gradients and declared buckets")
    activations: Bytes = Field(description="never divided by D; schedule: saved activations and temporaries")
    overhead: Bytes
    contingency: Bytes
    total: Bytes = Field(description="subtotal + contingency: what the fit verdict compares with capacity")
    subtotal: Bytes
    formulas: PeakFormulas
    kind: Kind
    instant: str | None = Field(description="the worst instant's name (schedule); null for the declared peak")
    instant_key: str | None
    note: str = Field(description="what the schedule assumes and where it approximates, or why none applies")
    instants: list[InstantOut] = Field(description="every instant walked (empty for the declared peak)")


def _parts(p: declared.Peak) -> dict[str, Any]:
    """The parts both peaks list first, in the receipt's order."""
    formulas = PeakFormulas(gather=p.gather_formula.text, activations=p.activations_formula.text,
                            contingency=p.contingency_formula.text)  # fmt: skip
    return {"persistent": p.persistent, "gather": p.gather, "buckets": p.buckets, "activations": p.activations,
            "overhead": p.overhead, "contingency": p.contingency, "total": p.total, "subtotal": p.subtotal,
            "formulas": formulas}  # fmt: skip


def instant_out(i: Instant) -> InstantOut:
    return InstantOut(
        key=i.key,
        name=i.name,
        phase=cast(Phase, i.phase),
        total=i.total,
        parts=InstantParts(**{part: i.part(part) for part in InstantParts.model_fields}),
        entries=[
            InstantEntry(category=cast(Category, e.category), what=e.what, bytes=e.bytes, formula=e.formula)
            for e in i.entries
        ],
    )


def peak_out(p: declared.Peak) -> Peak:
    """A stage's ``peak``: the schedule-aware one with its instants (a model), else the declared one."""
    instant = p.instant
    return Peak(
        **_parts(p),
        kind=cast(Kind, p.kind),
        instant=None if instant is None else instant.name,
        instant_key=None if instant is None else instant.key,
        note=p.why_declared if p.schedule is None else p.schedule.note,
        instants=[] if p.schedule is None else [instant_out(i) for i in p.schedule.instants],
    )


def declared_peak_out(p: declared.Peak) -> DeclaredPeak:
    """The seed's declared peak (the same parts as schema 1's ``peak``), its verdict, and how far the
    peak in use lies from it (0 without a model, where it is the peak)."""
    d = p.declared_peak
    return DeclaredPeak(**_parts(d), fits=d.fits, headroom_bytes=d.headroom, peak_minus_declared=p.total - d.total)
