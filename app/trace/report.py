"""A trace's answer, as JSON and as a terminal table, beside what the lab models for the same scenario.

The JSON keeps the receipt's conventions: every byte count an exact integer, ``peak.total`` beside
the peak's parts (the tracker's categories), names that say what they hold. The ``modelled`` block
is the lab's own stage-3 figures for the same scenario (``zero3-lab estimate``): the persistent
state (⌈N ÷ D⌉ per class), the same with FSDP2's dim-0 padding, and the seed's declared peak.
Pure Python: nothing here imports torch.
"""

from __future__ import annotations

from typing import Any

from app.ledger.estimate import estimate
from app.receipts.receipt import fsdp2_section
from app.trace.tracer import CATEGORIES, CATEGORY_NAMES, Instant, TraceResult

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


def modelled(result: TraceResult) -> dict[str, int]:
    """The lab's stage-3 figures for the traced scenario."""
    e = estimate(result.setup.scenario)
    stage3 = e.ledger.stages[3]
    fsdp2 = fsdp2_section(e)
    return {
        "stage3_persistent": stage3.persistent,
        "stage3_persistent_fsdp2_padded": int(fsdp2["stage3_padded_bytes"]["total"]) if fsdp2 else stage3.persistent,
        "stage3_declared_peak": stage3.peak.total,
        "activation_bytes": e.scenario.activation_bytes,
    }


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
    return {
        "steady_model_state": steady_state,
        "steady_model_state_minus_padded": steady_state - padded,
        "steady_model_state_equals_padded": steady_state == padded,
        "declared_peak_minus_traced": declared - traced_peak,
        "declared_peak_vs_traced": _pct(declared - traced_peak, traced_peak),
        "declared_peak_under_estimates": declared < traced_peak,
    }


def _instant_json(i: Instant) -> dict[str, Any]:
    return {"instant": i.label, "phase": i.phase, "unit": i.unit, "total": i.total,
            "peak_since_previous": i.peak_since_previous, "parts": {k: i.parts[k] for k in CATEGORY_NAMES}}  # fmt: skip


def trace_json(result: TraceResult) -> dict[str, Any]:
    setup = result.setup
    lab = modelled(result)
    return {
        "schema": SCHEMA,
        "scenario": setup.scenario.as_dict(),
        "trace": {
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
            "act_policy": setup.act_policy,
            "optimizer": setup.optimizer,
            "foreach": setup.foreach,
            "tokens": {"micro_batch": setup.micro_batch, "seq_len": setup.seq_len},
            "iterations": 2,
            "reported_iteration": 2,
            "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
        },
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
    units = [u for u in result.units if u != "root"]
    keep_units = {"root", "", result.peak_at.unit, *units[:TIMELINE_LAYERS_SHOWN], *units[-TIMELINE_LAYERS_SHOWN:]}
    out: list[Instant | None] = []
    for i in result.timeline:
        if i.unit in keep_units:
            out.append(i)
        elif out and out[-1] is not None:
            out.append(None)
    return out


def render_table(result: TraceResult) -> str:
    setup, lab = result.setup, modelled(result)
    cmp = comparison(result, lab)
    dtypes = setup.dtypes()
    lines = [
        f"zero3-lab trace: {setup.model_title} ({setup.architecture.family}, {result.params:,} parameters), "
        f"FSDP2 over D = {setup.dp}, rank 0, torch {result.torch_version} on fake tensors",
        f"  b = {setup.micro_batch}, s = {setup.seq_len}; parameters {dtypes['parameters']}, all-gather "
        f"{dtypes['param_dtype']}, reduce-scatter {dtypes['reduce_dtype']}, logits {dtypes['logits']}; "
        f"reshard_after_forward={setup.reshard_after_forward}; recompute {setup.act_policy}; "
        f"{setup.optimizer}{' (foreach)' if setup.foreach else ''}",
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
    lines += [
        "",
        f"Steady state after the optimizer step: {_b(result.steady['total'])}",
    ]
    for name in (*MODEL_STATE, "buffers", "inputs"):
        extra = f"   (incl. {result.step_counter_bytes:,} B of step counters)" if name == "optimizer_states" else ""
        lines.append(f"    {_LABELS[name]:<{width}}  {result.steady[name]:>20,} B{extra}")
    same = "equal" if cmp["steady_model_state_equals_padded"] else "NOT equal"
    lines += [
        "",
        "Against the lab's stage-3 model (zero3-lab estimate, same scenario):",
        _row("model state traced (params + grads + optimizer states − step counters)", cmp["steady_model_state"]),
        _row("persistent with FSDP2 dim-0 padding", lab["stage3_persistent_fsdp2_padded"], same),
        _row("persistent, ⌈N ÷ D⌉", lab["stage3_persistent"]),
        _row(
            "the seed's declared peak",
            lab["stage3_declared_peak"],
            f"{cmp['declared_peak_vs_traced']} against the traced peak",
        ),
        "",
        "Timeline of iteration 2 (bytes resident at each instant; the highest since the instant before):",
    ]
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
    return "\n".join(lines)
