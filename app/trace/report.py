"""A trace's answer, as JSON and as a terminal table, beside what the lab models for the same scenario.

The JSON keeps the receipt's conventions: every byte count an exact integer, ``peak.total`` beside
the peak's parts (the tracker's categories), names that say what they hold. The ``modelled`` block
is the lab's own stage-3 figures for the same scenario (``zero3-lab estimate``): the persistent
state (⌈N ÷ D⌉ per class), the same with FSDP2's dim-0 padding, the schedule-aware peak with its
instant, and the seed's declared peak; ``instants`` sets each modelled instant beside the highest
total the trace saw over the same stretch of the step. Pure Python: nothing here imports torch.
"""

from __future__ import annotations

from typing import Any

from app.ledger.estimate import estimate
from app.ledger.state.communication import communication as communication_of
from app.receipts.sections.model import fsdp2_section
from app.trace.result import CATEGORIES, CATEGORY_NAMES, Instant, TraceResult
from app.trace.setup import TraceSetup

SCHEMA = "zero3-lab.trace/1"
MODEL_STATE = ("params", "grads", "optimizer_states")
_LABELS = {
    "params": "sharded parameters",
    "grads": "sharded gradients",
    "optimizer_states": "optimizer states",
    "unsharded_params": "unsharded parameters",
    "all_gather": "all-gather buffers",
    "unsharded_grads": "unsharded gradients",
    "reduce_scatter": "reduce-scatter input",
    "activations": "activations",
    "temps": "backward temporaries",
    "buffers": "buffers",
    "inputs": "inputs (tokens, labels)",
}
assert set(_LABELS) == set(CATEGORY_NAMES)
TIMELINE_LAYERS_SHOWN = 2  # the table shows the first and last layers' instants, and the peak's


def modelled(result: TraceResult) -> dict[str, Any]:
    """The lab's stage-3 figures for the traced scenario."""
    e = estimate(result.setup.scenario)
    stage3 = e.ledger.stages[3]
    fsdp2 = fsdp2_section(e)
    instant = stage3.peak.instant
    return {
        "stage3_persistent": stage3.persistent,
        "stage3_persistent_fsdp2_padded": int(fsdp2["stage3_padded_bytes"]["total"]) if fsdp2 else stage3.persistent,
        "stage3_peak": stage3.peak.total,
        "stage3_peak_instant": None if instant is None else instant.name,
        "stage3_declared_peak": stage3.peak.declared_peak.total,
        "activation_bytes": e.scenario.activation_bytes,
    }


def communication(result: TraceResult) -> dict[str, dict[str, int | str | None]]:
    """Each kind of collective's buffer bytes in the reported iteration (the step's), traced and the lab's stage-3
    terms of that kind (before the ring's (G − 1) ÷ G)."""
    terms = communication_of(result.setup.scenario, 3).terms
    out: dict[str, dict[str, int | str | None]] = {}
    for kind in ("all_gather", "reduce_scatter", "all_reduce"):
        traced = result.collectives.get(kind, 0)
        lab = sum(t.buffer for t in terms if t.what.startswith(kind.replace("_", "-")))
        if kind == "all_reduce":  # the lab's term counts a ring all-reduce's two passes over its one buffer
            lab //= 2
        out[kind] = {"traced": traced, "lab": lab, "lab_vs_traced": _pct(lab - traced, traced) if traced else None}
    return out


# Where each modelled instant lies in the trace's timeline: the highest total between two named instants.
# A label ending in LAST means its last occurrence (a unit of several modules, as Accelerate's tail, runs its
# hooks once per module).
LAST = "#last"
_CARVED: dict[str, tuple[str, str]] = {  # Accelerate's units (wrap = embed-tail): the embedding's and the tail's
    "forward-embedding": ("zero_grad(set_to_none=True)", "forward embed: unsharded"),
    "loss-forward": ("forward tail: done" + LAST, "loss computed"),
    "embedding-unshard": ("", "backward embed: unsharded"),  # opened by layer 0's reduce-scatter (below)
    "embedding-gradients": ("backward embed: unsharded", "backward embed: gradients computed"),
    "embedding-post-backward": ("backward embed: gradients computed", "backward embed: reduce-scattered"),
}


def _chunked_stretch(key: str, chunks: int) -> tuple[str, str] | None:
    """The stretches of torchtitan's chunked loss (:func:`app.trace.titan.chunked_loss`'s instants)."""
    second, last = f"loss chunk {min(2, chunks)}/{chunks}", f"loss chunk {chunks}/{chunks}"
    return {
        "end-of-forward": ("forward tail: done" + LAST, "end of forward (hidden states)"),
        "loss-chunk-gather": ("end of forward (hidden states)", f"loss chunk 1/{chunks}: forward tail: unsharded"),
        # the slice's cross-entropy backward runs between its loss and the head's pre-backward
        "loss-chunk-backward": (f"{second}: loss computed", f"{second}: backward tail: unsharded"),
        # the head's reduce-scatter: in the head's post-backward, after its gradient is computed
        "loss-chunk-reduce": (f"{last}: backward tail: gradients computed", "loss computed"),
        "tail-regather": ("loss computed", "backward tail: unsharded"),
    }.get(key)


# Liger's fused loss (:mod:`app.ledger.peak.schedule.fused`): the tail's hooks run for the final norm alone; the last
# micro batch's loss; Liger's backward allocates nothing (no instant of its own)
_FUSED: dict[str, tuple[str, str] | None] = {
    "loss-forward": ("forward tail: done" + LAST, "loss computed" + LAST),
    "loss-backward": None,
    "tail-unshard": ("loss computed" + LAST, "backward tail: unsharded" + LAST),
    "tail-gradients": ("backward tail: unsharded" + LAST, "backward tail: gradients computed" + LAST),
    "tail-reduce": ("backward tail: gradients computed" + LAST, "backward tail: reduce-scattered" + LAST),
}


def _traced_stretch(key: str, layers: list[str], carved: bool, fused: bool = False) -> tuple[str, str] | None:
    """(the trace's instant that opens the stretch, the one that closes it) for a modelled instant's key;
    ``layers`` are the trace's decoder units in order (``layers.0`` …, GPT-2's ``h.0`` …); ``carved``: the
    trace has the embedding's and the tail's own units. The highest total of a stretch includes the instant
    that opens it."""
    root = "tail" if carved else "root"  # the unit the backward starts with
    if fused and key in _FUSED:
        return _FUSED[key]
    if key in _CARVED:
        opens, closes = _CARVED[key]
        return (opens or f"backward {layers[0]}: reduce-scattered", closes)
    if key == "forward-tail":
        return (f"forward {layers[-1]}: done", "forward tail: unsharded")
    if key == "end-of-forward":
        return None if carved else ("forward root: done", "end of forward (logits)")
    if key == "loss-backward":
        return ("loss computed", f"backward {root}: unsharded")
    if key == "root-gradients":
        return (f"backward {layers[0]}: reduce-scattered", "backward root: gradients computed")
    if key == "root-post-backward":
        return ("backward root: gradients computed", "backward root: reduce-scattered")
    if key == "optimizer-step":
        return ("end of backward", "after the optimizer step (steady state)")
    if key.startswith("forward-layer-"):
        k = int(key.removeprefix("forward-layer-"))
        first = "forward embed: done" if carved else "forward root: unsharded"
        opens = f"forward {layers[k - 1]}: done" if k else first
        return (opens, f"forward {layers[k]}: unsharded")
    if key.startswith("backward-layer-"):
        number, _, moment = key.removeprefix("backward-layer-").partition("-")
        k = int(number)
        unsharded = f"backward {layers[k]}: unsharded"
        if moment == "unshard":  # the pre-backward's copy-out
            above = f"backward {layers[k + 1]}: reduce-scattered" if k + 1 < len(layers) else ""
            return (above or ("backward tail: reduce-scattered" + LAST if carved else "backward root: unsharded"),
                    unsharded)  # fmt: skip
        return (unsharded, f"backward {layers[k]}: gradients computed")  # early and late: the layer's backward
    # the head's backward (and the tail's two passes) have no instants of their own the table can tell apart
    return None


def _at(labels: list[str], label: str) -> int | None:
    """Where ``label`` is in the timeline (its last occurrence for a label ending in LAST), or None."""
    if label.endswith(LAST):
        label = label.removesuffix(LAST)
        return len(labels) - 1 - labels[::-1].index(label) if label in labels else None
    return labels.index(label) if label in labels else None


def instants(result: TraceResult) -> list[dict[str, Any]]:
    """Each modelled stage-3 instant beside the highest traced total over its stretch of the step."""
    e = estimate(result.setup.scenario)
    walk = e.ledger.stages[3].peak.schedule
    if walk is None:
        return []
    labels = [i.label for i in result.timeline]
    layers, carved, fused = result.layers, "embed" in result.units, result.setup.loss == "fused"
    chunks = result.setup.loss_chunks if result.setup.loss == "chunked" else 0
    out = []
    for i in walk.instants:
        stretch = (chunks and _chunked_stretch(i.key, chunks)) or _traced_stretch(i.key, layers, carved, fused)
        traced = None
        if stretch is not None:
            start, end = _at(labels, stretch[0]), _at(labels, stretch[1])
            if start is not None and end is not None and start < end:
                traced = max(x.peak_since_previous for x in result.timeline[start + 1 : end + 1])
        out.append({"key": i.key, "instant": i.name, "modelled": i.total, "traced": traced,
                    "modelled_vs_traced": None if not traced else _pct(i.total - traced, traced)})  # fmt: skip
    return out


def _pct(part: int, whole: int) -> str:
    """``part`` as a signed percentage of ``whole``, one decimal (text: the integers are beside it)."""
    if whole == 0:
        return "n/a"
    return f"{part * 100 / whole:+.1f} %"


def comparison(result: TraceResult, lab: dict[str, int]) -> dict[str, Any]:
    """The traced steady state against the padded persistent state, the traced peak against the declared one."""
    steady_state = sum(result.steady[c] for c in MODEL_STATE) - result.step_counter_bytes
    padded = lab["stage3_persistent_fsdp2_padded"]
    traced_peak = result.peak["total"]
    declared = lab["stage3_declared_peak"]
    peak = lab["stage3_peak"]
    return {
        "steady_model_state": steady_state,
        "steady_model_state_minus_padded": steady_state - padded,
        "steady_model_state_equals_padded": steady_state == padded,
        "declared_peak_minus_traced": declared - traced_peak,
        "declared_peak_vs_traced": _pct(declared - traced_peak, traced_peak),
        "declared_peak_under_estimates": declared < traced_peak,
        "peak_minus_traced": peak - traced_peak,
        "peak_vs_traced": _pct(peak - traced_peak, traced_peak),
        "peak_within_5_percent": abs(peak - traced_peak) * 20 <= traced_peak,
    }


def _instant_json(i: Instant) -> dict[str, Any]:
    return {"instant": i.label, "phase": i.phase, "unit": i.unit, "total": i.total,
            "peak_since_previous": i.peak_since_previous, "parts": {k: i.parts[k] for k in CATEGORY_NAMES}}  # fmt: skip


def _run(result: TraceResult) -> dict[str, Any]:
    """What ran: torch, the model, the mesh, the dtypes and options, how long each part took."""
    setup = result.setup
    return {
        "torch": result.torch_version,
        "model": setup.model_title,
        "family": setup.architecture.family,
        "parameters": result.params,
        "parameter_tensors": result.tensors,
        "world_size": setup.dp,
        "rank": 0,
        "device": "cpu, fake tensors (FakeTensorMode) over a fake process group",
        "units": list(result.units),
        "dtypes": setup.dtypes(),
        "reduce_bytes": setup.reduce_bytes,
        "reshard_after_forward": setup.reshard_after_forward,
        "norms": _norms(setup) if setup.architecture.norm == "rmsnorm" else "layernorm (no choice)",
        "act_policy": setup.act_policy,
        "optimizer": setup.optimizer,
        "foreach": setup.foreach,
        "optimizer_impl": setup.optimizer_impl,
        "tokens": {"micro_batch": setup.micro_batch, "seq_len": setup.seq_len},
        "iterations": 2,
        "reported_iteration": 2,
        "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
    }


def trace_json(result: TraceResult) -> dict[str, Any]:
    lab = modelled(result)
    return {
        "schema": SCHEMA,
        "scenario": result.setup.scenario.as_dict(),
        "trace": _run(result),
        "peak": {**{k: result.peak[k] for k in CATEGORY_NAMES}, "total": result.peak["total"]},
        "peak_at": {
            "phase": result.peak_at.phase,
            "after": result.peak_at.after,
            "unit": result.peak_at.unit,
            "module": result.peak_at.module,
            "op": result.peak_at.op,
            "during": result.peak_at.during,
        },
        "steady_state": {
            **{k: result.steady[k] for k in CATEGORY_NAMES},
            "total": result.steady["total"],
            "step_counters": result.step_counter_bytes,
        },
        "first_iteration_peak": result.first_iteration_peak,
        "modelled": lab,
        "comparison": comparison(result, lab),
        "communication": communication(result),
        "instants": instants(result),
        "timeline": [_instant_json(i) for i in result.timeline],
    }


# --------------------------------------------------------------------------- the table


def _b(value: int) -> str:
    """Bytes, both ways: ``36,602,113,428 B (36.60 GB, 34.09 GiB)``."""
    return f"{value:,} B ({value / 1e9:.2f} GB, {value / 2**30:.2f} GiB)"


def _row(label: str, value: int, note: str = "") -> str:
    return f"    {label:<72}  {value:>18,} B" + (f"  ({note})" if note else "")


def _shown_instants(result: TraceResult) -> list[Instant | None]:
    """The instants the table lists: all of them for a few layers; else the root's, the first and
    last layers', and the peak's unit; ``None`` stands for the skipped ones."""
    units = result.layers
    keep_units = {"root", "embed", "tail", "", result.peak_at.unit, *units[:TIMELINE_LAYERS_SHOWN],
                  *units[-TIMELINE_LAYERS_SHOWN:]}  # fmt: skip
    out: list[Instant | None] = []
    for i in result.timeline:
        if i.unit in keep_units:
            out.append(i)
        elif out and out[-1] is not None:
            out.append(None)
    return out


def _header(result: TraceResult) -> list[str]:
    """What ran, and where the peak of iteration 2 happened, with its parts."""
    setup = result.setup
    dtypes = setup.dtypes()
    lines = [
        f"zero3-lab trace: {setup.model_title} ({setup.architecture.family}, {result.params:,} parameters), "
        f"FSDP2 over D = {setup.dp}, rank 0, torch {result.torch_version} on fake tensors",
        f"  b = {setup.micro_batch}, s = {setup.seq_len}; parameters {dtypes['parameters']}, all-gather "
        f"{dtypes['param_dtype']}, reduce-scatter {dtypes['reduce_dtype']}, logits {dtypes['logits']}; "
        f"reshard_after_forward={setup.reshard_after_forward}; recompute {setup.act_policy}; "
        + (
            f"RMSNorm {_norms(setup)} (compare with --norms {_norms(setup)}); "
            if setup.architecture.norm == "rmsnorm"
            else ""
        )
        + f"{setup.optimizer} ({setup.optimizer_impl})",
        "",
        f"Peak of iteration 2: {_b(result.peak['total'])}",
        f"  at {result.peak_at.phase}, after “{result.peak_at.after}”, in {result.peak_at.module} "
        f"(unit {result.peak_at.unit}), op {result.peak_at.op}"
        + (f", during the {result.peak_at.during}" if result.peak_at.during else ""),
    ]
    width = max(len(v) for v in _LABELS.values())
    for name, _ in CATEGORIES:
        if result.peak[name]:
            lines.append(f"    {_LABELS[name]:<{width}}  {result.peak[name]:>20,} B")
    return lines


def _steady(result: TraceResult) -> list[str]:
    """The steady state after the optimizer step, by part."""
    width = max(len(v) for v in _LABELS.values())
    lines = ["", f"Steady state after the optimizer step: {_b(result.steady['total'])}"]
    for name in (*MODEL_STATE, "buffers", "inputs"):
        extra = f"   (incl. {result.step_counter_bytes:,} B of step counters)" if name == "optimizer_states" else ""
        lines.append(f"    {_LABELS[name]:<{width}}  {result.steady[name]:>20,} B{extra}")
    return lines


def _against_the_lab(result: TraceResult, lab: dict[str, Any]) -> list[str]:
    """The lab's stage-3 figures and instants beside the traced ones."""
    cmp = comparison(result, lab)
    same = "equal" if cmp["steady_model_state_equals_padded"] else "NOT equal"
    lines = [
        "",
        "Against the lab's stage-3 model (zero3-lab estimate, same scenario):",
        _row("model state traced (params + grads + optimizer states − step counters)", cmp["steady_model_state"]),
        _row("persistent with FSDP2 dim-0 padding", lab["stage3_persistent_fsdp2_padded"], same),
        _row("persistent, ⌈N ÷ D⌉", lab["stage3_persistent"]),
        _row(
            f"the schedule-aware peak (at the {lab['stage3_peak_instant']})"
            if lab["stage3_peak_instant"]
            else "the peak (declared: no schedule)",
            lab["stage3_peak"],
            f"{cmp['peak_vs_traced']} against the traced peak",
        ),
        _row(
            "the seed's declared peak",
            lab["stage3_declared_peak"],
            f"{cmp['declared_peak_vs_traced']} against the traced peak",
        ),
        "",
    ]
    lines.append("Collective buffers in the step (bytes handed to NCCL's calls, before the ring's (G − 1) ÷ G):")
    for kind, row in communication(result).items():
        if row["traced"] or row["lab"]:
            said = f" ({row['lab_vs_traced']})" if row["lab_vs_traced"] else ""
            name = kind.replace("_", "-")
            lines.append(f"    {name:<16}  traced {row['traced']:>18,} B   lab {row['lab']:>18,} B{said}")
    lines.append("")
    modelled_instants = instants(result)
    if modelled_instants:
        lines.append("The lab's stage-3 instants against the highest traced total over the same stretch of the step:")
        for i in modelled_instants:
            traced = "—" if i["traced"] is None else f"{i['traced']:,} B ({i['modelled_vs_traced']})"
            lines.append(f"    {i['instant']:<40}  modelled {i['modelled']:>18,} B   traced {traced}")
        lines.append("")
    return lines


def _timeline(result: TraceResult) -> list[str]:
    """Iteration 2's instants (some skipped for a deep model), the first at the peak marked."""
    lines = ["Timeline of iteration 2 (bytes resident at each instant; the highest since the instant before):"]
    label_width = max((len(i.label) for i in result.timeline), default=10)
    marked = False
    for item in _shown_instants(result):
        if item is None:
            lines.append("    …")
            continue
        mark = ""
        if not marked and item.peak_since_previous == result.peak["total"]:
            mark, marked = "  ← peak", True
        lines.append(f"    {item.label:<{label_width}}  {item.total:>18,}  {item.peak_since_previous:>18,}{mark}")
    lines.append("")
    return lines


def render_table(result: TraceResult) -> str:
    lines = [*_header(result), *_steady(result), *_against_the_lab(result, modelled(result)), *_timeline(result)]
    return "\n".join(lines)


def _norms(setup: TraceSetup) -> str:
    """What the traced model's RMSNorm keeps on CPU: torchtitan's is torch.nn.RMSNorm (composite ops); transformers'
    and the plain decoders' are written out in eager ops (unfused)."""
    return "composite" if setup.stack == "torchtitan" else "unfused"
