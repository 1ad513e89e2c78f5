"""The named model's sections: its inventory, the activation entry of the peak, FSDP2's padded shard."""

from __future__ import annotations

from typing import Any, Literal, cast

from app.ledger.bounds import ActPolicy as Policy
from app.ledger.estimate import Estimate
from app.ledger.models.fsdp2 import experts_dim
from app.ledger.peak.schedule.layout import layout
from app.ledger.peak.schedule.trained import trained_layout
from app.ledger.state.persistent import LedgerLine
from app.receipts.sections.stages import ByClass
from app.receipts.strict import Bytes, Count, Strict

Typed = Literal["measured", "placeholder"]


class UnitSize(Strict):
    name: str
    params: Count


class ModelSection(Strict):
    reference: str
    title: str
    source: str
    family: str
    params: Count
    layers: Count
    largest_unit: UnitSize
    units: list[UnitSize]
    params_source: str
    unit_params_source: str


class Fraction(Strict):
    numerator: Count
    denominator: Count


class ActivationInputs(Strict):
    seq_len: Count
    micro_batch: Count
    act_bytes: Count
    tp: Count
    sequence_parallel: bool
    logits_bytes: Count


class DeclaredActivations(Strict):
    """The activation entry when no model is named or the figure was typed."""

    source: Typed
    total_bytes: Bytes


class ModelledActivations(Strict):
    """The activation ledger of the named model."""

    source: Literal["modelled"]
    policy: Policy
    per_layer_bytes: Bytes
    layers: Count
    working_set_bytes: Bytes
    embedding_bytes: Bytes
    head_bytes: Bytes
    logits_bytes: Bytes
    total_bytes: Bytes
    recompute_flops_fraction: str
    recompute_flops: Fraction
    formula: str
    assumptions: str
    inputs: ActivationInputs


class Fsdp2Section(Strict):
    """FSDP2's stage-3 shard with each tensor padded on dim 0, beside the ⌈N ÷ D⌉ bound."""

    padded_elements: Count
    lower_bound_elements: Count
    padding_elements: Count
    stage3_padded_bytes: ByClass
    stage3_lower_bound_bytes: Bytes
    padding_bytes: Bytes
    largest_gather_unit: str
    note: str


def model_out(e: Estimate) -> ModelSection | None:
    """The named model's inventory: family, exact count, layers, the largest unit and every unit."""
    if e.model is None:
        return None
    ref = e.model.model
    inv = ref.inventory
    return ModelSection(
        reference=ref.reference,
        title=ref.title,
        source=ref.source,
        family=ref.architecture.family,
        params=inv.params,
        layers=ref.architecture.layers,
        largest_unit=UnitSize(name=inv.largest_unit.name, params=inv.largest_unit.params),
        units=[UnitSize(name=u.name, params=u.params) for u in inv.units],
        params_source=e.scenario.source_of("params"),
        unit_params_source=e.scenario.source_of("unit_params"),
    )


def activations_out(e: Estimate) -> ModelledActivations | DeclaredActivations:
    """The activation entry of the peak: the model's ledger when modelled, else the declared figure."""
    s = e.scenario
    source = e.activation_source
    if e.model is None or source != "modelled":
        return DeclaredActivations(source=cast(Typed, source), total_bytes=s.activation_bytes)
    a = e.model.activations
    num, den = a.recompute_flops
    return ModelledActivations(
        source="modelled",
        policy=cast(Policy, a.policy),
        per_layer_bytes=a.per_layer_bytes,
        layers=a.layers,
        working_set_bytes=a.working_set_bytes,
        embedding_bytes=a.embedding_bytes,
        head_bytes=a.head_bytes,
        logits_bytes=a.logits_bytes,
        total_bytes=a.total_bytes,
        recompute_flops_fraction=a.recompute_fraction_text(4),
        recompute_flops=Fraction(numerator=num, denominator=den),
        formula=a.formula.text,
        assumptions=a.assumptions,
        inputs=ActivationInputs(seq_len=s.seq_len, micro_batch=s.micro_batch, act_bytes=s.act_bytes, tp=s.tp,
                                sequence_parallel=bool(s.sequence_parallel), logits_bytes=s.logits_bytes),
    )  # fmt: skip


def _trained_padded(e: Estimate) -> tuple[int, int] | None:
    """Part of the model trains: (the trained parameters' padded elements per rank, the frozen ones'); else None."""
    s, md, f = e.scenario, e.model, e.fsdp2
    if s.trainable_params == s.params or md is None or f is None or s.source_of("params") != "from config":
        return None
    if s.source_of("trainable_params") != "from config":  # a count alone: which units train is not known
        return None
    frozen = (s.frozen_layers, bool(s.freeze_embed), md.frozen_modules)
    u = layout(s.model, s.dp, experts=experts_dim(md.model.architecture, s.stack, s.dp))
    g = trained_layout(u, s.model, md.lora, *frozen, s.dp, True)
    # LoRA's adapters come beside the model's parameters, every one of which is frozen; else the trained are of them
    return g.padded_total, f.padded_elements - (0 if md.lora is not None else g.padded_total)


def _line_padded(line: LedgerLine, trained: tuple[int, int], params: int) -> int:
    """A stage-3 line's padded bytes: its trained elements in its width, and the frozen ones where it holds them."""
    elements, frozen = trained
    if line.frozen:
        padded = elements * line.width * line.copies + frozen * line.frozen_width
    elif line.params == params:  # every parameter, at one width
        padded = (elements + frozen) * line.width * line.copies
    else:
        padded = elements * line.width * line.copies
    return max(padded, line.bytes)  # ⌈x ÷ D⌉ of each part is the least a rank can hold


def fsdp2_out(e: Estimate) -> Fsdp2Section | None:
    """FSDP2's stage-3 shard with each tensor padded on dim 0, beside the ⌈N ÷ D⌉ bound.

    Both sides count the *model's* parameters, so the padding is never negative: a scenario that
    declares another N (7B for Llama-2-7B's 6,738,415,616) changes its ledger, not the model's shard.
    """
    if e.fsdp2 is None:
        return None
    f = e.fsdp2
    stage3 = e.ledger.stages[3]
    per_class = {line.tensor_class: f.padded_elements * line.width * line.copies for line in stage3.lines}
    trained = _trained_padded(e)
    if trained is not None:
        per_class = {line.tensor_class: _line_padded(line, trained, e.scenario.params) for line in stage3.lines}
    padded_total = sum(per_class.values())
    state_width = sum(line.width * line.copies for line in stage3.lines)
    extra = f.padded_elements - f.lower_bound_elements
    lower_total = f.lower_bound_elements * state_width
    if trained is not None:  # the lines hold what trains in their widths, the frozen rest in its own
        lower_total = sum(line.bytes for line in stage3.lines)
    padding = padded_total - lower_total
    return Fsdp2Section(
        padded_elements=f.padded_elements,
        lower_bound_elements=f.lower_bound_elements,
        padding_elements=extra,
        stage3_padded_bytes=ByClass(**per_class, total=padded_total),
        stage3_lower_bound_bytes=lower_total,
        padding_bytes=padding,
        largest_gather_unit=f.largest_gather_unit,
        note=f"dim-0 padding: +{padding:,} bytes at stage 3 ({extra:,} elements per rank beyond ⌈N ÷ D⌉, × "
        f"{state_width} B of sharded state per element)",
    )


def fsdp2_section(e: Estimate) -> dict[str, Any] | None:
    """:func:`fsdp2_out` as the receipt writes it (JSON-ready data), for readers of a figure or the note."""
    section = fsdp2_out(e)
    return None if section is None else section.model_dump(mode="json")
