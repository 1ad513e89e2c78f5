"""zero_optimization's sizes, which need widths, U or the model: the gradient bucket, prefetch, persistence.

DeepSpeed counts these in elements; each line shows the product that makes them bytes (or units), with
the width :mod:`~app.interop.deepspeed.keys` names for the key. A size written ``"auto"`` is the value
:data:`~app.interop.deepspeed.keys.TRANSFORMERS`'s Trainer writes before DeepSpeed reads the file
(``HfTrainerDeepSpeedConfig``): ``reduce_bucket_size`` = hidden², ``stage3_prefetch_bucket_size`` =
⌊0.9 · hidden²⌋ and ``stage3_param_persistence_threshold`` = 10 · hidden, so it needs a model; without
one the key stays *unresolved* and the lab's own input is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app.interop.deepspeed.keys import DEEPSPEED, ELEMENTS_MAX, TRANSFORMERS, bucket_buffers, bucket_width, default
from app.interop.deepspeed.report import Report, Status
from app.interop.deepspeed.values import elements, flag, zero_section, zero_value
from app.ledger.models.defaults import ModelDefaults
from app.ledger.scenario import Scenario

__all__ = ["read_sizes"]

_Z = "zero_optimization."
_STAGE3_ONLY = (
    "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold",
    "stage3_max_live_parameters",
    "stage3_max_reuse_distance",
    "stage3_model_persistence_threshold",
    "sub_group_size",
)


@dataclass(frozen=True, slots=True)
class _Sizes:
    """What every size is read against: the report, the section, the scenario so far and its model."""

    r: Report
    zero: Mapping[str, object]
    s: Scenario
    stage: int
    md: ModelDefaults | None

    def resolved(self, name: str, formula: Callable[[int], int], text: str) -> tuple[int | None, str]:
        """The key's elements and where they came from: the file, DeepSpeed's default when absent, or the
        Trainer's formula for "auto" (None: "auto" without a model, reported as unresolved)."""
        value = zero_value(self.zero, name)
        path = _Z + name
        if value != "auto":
            got = elements(path, value, default(path))
            return got, "" if value is not None else f"{DEEPSPEED}'s default, {got:,} elements; "
        if self.md is None:
            self.r.unresolved_auto(path, f"the Trainer writes {text}, which needs a model (--model or --model-config)")
            return None, ""
        hidden = self.md.model.architecture.hidden
        got = formula(hidden)
        return got, f"{TRANSFORMERS}'s Trainer writes {text} = {got:,} elements (hidden = {hidden:,}); "


def read_sizes(r: Report, config: Mapping[str, object], s: Scenario, stage: int) -> None:
    """The keys that need widths, U or the model's hidden size: the buckets, prefetch and persistence."""
    sizes = _Sizes(r, zero_section(config), s, stage, s.model_defaults())
    contiguous = flag(_Z + "contiguous_gradients", sizes.zero.get("contiguous_gradients"), True)
    overlap = flag(_Z + "overlap_comm", sizes.zero.get("overlap_comm"), stage == 3)
    _bucket(sizes, contiguous, overlap)
    for name, value in (("contiguous_gradients", contiguous), ("overlap_comm", overlap)):
        written = sizes.zero.get(name)
        text = ("true" if value else "false") + (
            "" if written is not None else f" ({DEEPSPEED}'s default at stage {stage})"
        )
        r.line(_Z + name, written, f"{text}: read with reduce_bucket_size", "checked")
    allgather = elements(
        _Z + "allgather_bucket_size", sizes.zero.get("allgather_bucket_size"), default(_Z + "allgather_bucket_size")
    )
    if stage in (1, 2):
        r.line(
            _Z + "allgather_bucket_size",
            sizes.zero.get("allgather_bucket_size"),
            f"the updated 16-bit partitions are all-gathered {allgather:,} elements at a time into the parameters "
            "after the step, outside the training peak: no separate bucket",
            "checked",
        )
    if stage != 3:
        for name in _STAGE3_ONLY:
            if zero_value(sizes.zero, name) is not None:
                effect = f"read only at stage 3 (this is stage {stage})"
                r.line(_Z + name, zero_value(sizes.zero, name), effect, "ignored")
        return
    _prefetch(sizes)
    threshold, source = sizes.resolved("stage3_param_persistence_threshold", lambda h: 10 * h, "10 · hidden")
    if threshold is not None:
        _persistence(sizes, threshold, source)
    _live(sizes)
    _stage3_rows(sizes)


def _bucket(sizes: _Sizes, contiguous: bool, overlap: bool) -> None:
    """reduce_bucket_size → bucket_bytes: DeepSpeed's flat gradient buckets (none at stage 0, none under the
    BF16_Optimizer, none without contiguous_gradients unless offload forces it on at stages 1–2)."""
    r, s, stage = sizes.r, sizes.s, sizes.stage
    offloaded = s.offload_optimizer != "none"
    reduce_bucket, source = sizes.resolved("reduce_bucket_size", lambda h: h * h, "hidden²")
    key, written = _Z + "reduce_bucket_size", zero_value(sizes.zero, "reduce_bucket_size")
    # BF16_Optimizer: bf16 with FP32 accumulation at stage 1, no offload (DeepSpeed's _do_optimizer_sanity_check)
    bf16_optimizer = stage == 1 and s.param_bytes == 2 and s.grad_bytes == 4 and not offloaded
    if stage == 0 or bf16_optimizer:
        if written is not None:
            why = "stage 0 all-reduces" if stage == 0 else "bf16 with FP32 accumulation runs DeepSpeed's BF16_Optimizer"
            r.line(key, written, f"{why} without ZeRO's gradient buckets: not read", "ignored")
    elif reduce_bucket is not None and not (contiguous or (offloaded and stage < 3)):
        r.line(key, written, "contiguous_gradients is false: no flat gradient bucket is allocated", "checked")
    elif reduce_bucket is not None:
        buffers = bucket_buffers(stage, overlap)
        width = bucket_width(stage, s.param_bytes, s.reduce_bytes)
        which = "reduce width" if stage == 3 else "the model's type"
        total = buffers * reduce_bucket * width
        what = "two flat gradient buckets (overlap_comm double-buffers them)" if buffers == 2 else "one flat bucket"
        forced = "; offload turns contiguous_gradients on" if offloaded and stage < 3 and not contiguous else ""
        why = f"{source}{buffers} × {reduce_bucket:,} elements × {width} B ({which}) = {total:,} B: {what}{forced}"
        r.set(key, written, "bucket_bytes", total, why)


def _prefetch(sizes: _Sizes) -> None:
    """stage3_prefetch_bucket_size → prefetch: whole units ahead, as the ledger gathers them."""
    s = sizes.s
    prefetch, source = sizes.resolved("stage3_prefetch_bucket_size", lambda h: 9 * h * h // 10, "⌊0.9 · hidden²⌋")
    if prefetch is None:
        return
    units = min(8, prefetch // s.unit_params) if s.unit_params else 0
    early = (prefetch - units * s.unit_params) * s.gather_bytes if units < 8 else 0
    sizes.r.set(
        _Z + "stage3_prefetch_bucket_size",
        zero_value(sizes.zero, "stage3_prefetch_bucket_size"),
        "prefetch",
        units,
        f"{source}⌊{prefetch:,} elements ÷ U {s.unit_params:,}⌋ = {units} whole units ahead (the lab's "
        f"cap is 8); DeepSpeed prefetches parameter by parameter, so up to {early:,} B more of the next unit "
        "may be gathered early (not counted)",
    )


def _persistence(sizes: _Sizes, threshold: int, source: str) -> None:
    """stage3_param_persistence_threshold: the small tensors DeepSpeed keeps whole, counted but not modelled."""
    s, md = sizes.s, sizes.md
    key = _Z + "stage3_param_persistence_threshold"
    written = zero_value(sizes.zero, "stage3_param_persistence_threshold")
    if md is None:
        sizes.r.line(
            key,
            written,
            f"parameters under {threshold:,} elements stay whole on every rank: not modelled "
            "(the model's tensors are not known without a model)",
            "not modelled",
        )
        return
    cap_key = _Z + "stage3_model_persistence_threshold"
    cap = elements(cap_key, zero_value(sizes.zero, "stage3_model_persistence_threshold"), ELEMENTS_MAX)
    assert cap is not None
    # Per unit kind, its tensors (the decoder layers' one tuple, a MoE layer's experts two fused tensors): bounded
    # by the model's shape, never its size.
    small = [t for unit in md.model.inventory.units for t in unit.tensors if t.numel < threshold]
    total = min(cap, sum(t.numel for t in small))
    count = len(small)
    extra = total * s.param_bytes - -(-total * s.param_bytes // s.dp)
    sizes.r.line(
        key,
        written,
        f"{source}{count:,} tensors under {threshold:,} elements ({total:,} elements) stay whole on every rank: "
        f"not modelled — {total:,} × {s.param_bytes} B − ⌈{total:,} × {s.param_bytes} B ÷ D {s.dp:,}⌉ = "
        f"{extra:,} B more than the ledger's sharded parameters",
        "not modelled",
    )


def _live(sizes: _Sizes) -> None:
    """stage3_max_live_parameters against the ledger's gather: fewer live, and DeepSpeed releases sooner."""
    written = zero_value(sizes.zero, "stage3_max_live_parameters")
    live = elements(_Z + "stage3_max_live_parameters", written, default(_Z + "stage3_max_live_parameters"))
    gathered = (1 + int(sizes.r.fields.get("prefetch", sizes.s.prefetch))) * sizes.s.unit_params
    over = (
        ""
        if live is None or gathered <= live
        else (": more than DeepSpeed keeps live, so DeepSpeed releases sooner than the ledger assumes (an over-count)")
    )
    sizes.r.line(
        _Z + "stage3_max_live_parameters",
        written,
        f"{live or 0:,} elements; the ledger's gather holds (1 + P) × U = {gathered:,}{over}",
        "checked",
    )


_STAGE3_ROWS: tuple[tuple[str, str, Status], ...] = (
    (
        "stage3_max_reuse_distance",
        "keeps a parameter gathered if it is reused within this many elements: not "
        "modelled (the lab releases each unit after use)",
        "not modelled",
    ),
    (
        "stage3_model_persistence_threshold",
        "caps the unpartitioned parameters: read with the persistence threshold",
        "checked",
    ),
    (
        "sub_group_size",
        "the optimizer steps this many elements at a time; with NVMe offload its swap buffers hold 4 × "
        "the largest sub-group (the host ledger takes DeepSpeed's default, 10⁹ elements)",
        "checked",
    ),
)


def _stage3_rows(sizes: _Sizes) -> None:
    """Stage 3's other sizes: checked, or not modelled where they differ from what the ledger assumes."""
    for name, text, status in _STAGE3_ROWS:
        setting = zero_value(sizes.zero, name)
        given = elements(_Z + name, setting)
        if name == "sub_group_size" and given not in (None, default(_Z + name)) and sizes.s.offload_optimizer == "nvme":
            text, status = (
                f"{given:,}, not DeepSpeed's default 10⁹: not modelled (the host ledger's optimizer swap "
                "buffers take the default)",
                "not modelled",
            )
        sizes.r.line(_Z + name, setting, text, status)
