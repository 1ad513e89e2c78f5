"""The CSV receipt, produced row by row.

One row per (stage, ledger, category) with the columns ``stage,ledger,category,bytes`` and
more; the scenario's inputs are rows too (ledger ``input``), so the CSV alone reconstructs
the receipt. Every row with a byte count carries it in decimal GB and binary GiB too (``gb``,
``gib``: two decimals, rounded half up, as the page prints them), so that a reviewer reads the
sizes without dividing; ``bytes`` stays the exact figure. How cells are written and read back
(inert text, the BOM) is :mod:`app.receipts.csv_format`'s.

The ``formula`` column holds only the arithmetic, with its numbers substituted; whatever explains
it (evidence, notes, remarks, a citation, a mutant's check and message) is in ``detail``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from app.ledger.arithmetic import n, share_bp
from app.ledger.estimate import Estimate
from app.ledger.formula import Formula
from app.ledger.ledger import StageLedger
from app.ledger.peak.declared import Peak
from app.ledger.scenario.fields import FIELDS
from app.receipts.csv_format import Row, csv_records, restore
from app.receipts.display import GB, GIB, in_units
from app.receipts.sections.model import ModelledActivations, activations_out, fsdp2_out, model_out
from app.receipts.sections.stack import choice_origins

COLUMNS: tuple[str, ...] = (
    "stage",
    "ledger",
    "category",
    "bytes",
    "gb",
    "gib",
    "value",
    "width",
    "copies",
    "owners",
    "elements",
    "share_bp",
    "formula",
    "detail",
)


def scenario_inputs(csv_rows: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The scenario's inputs from a CSV receipt's ``input`` rows, ready for ``parse_scenario``.

    The rows may come from a reader that kept the BOM in the first column's name (``"\\ufeffstage"``):
    only ``ledger``, ``category`` and ``value`` are read, never the first column.
    """
    return {row["category"]: restore(row["value"]) for row in csv_rows if row.get("ledger") == "input"}


def _host_rows(e: Estimate) -> Iterator[Row]:
    """The host ledger per node: each rank's off-device terms, then the node's RAM, NVMe and load peak."""
    for st in e.ledger.host.stages:
        for x in st.lines:
            where = f"{x.where}{', pinned' if x.pinned else ''}"
            yield {"stage": st.stage, "ledger": "host", "category": f"rank.{x.what}", "bytes": x.bytes,
                   **_explained(x.formula, where, x.evidence)}  # fmt: skip
        yield {"stage": st.stage, "ledger": "host", "category": "node.ram", "bytes": st.per_node,
               "detail": f"{e.ledger.host.ranks_per_node} ranks × {st.per_rank:,} B"}  # fmt: skip
        yield {"stage": st.stage, "ledger": "host", "category": "node.nvme", "bytes": st.nvme_per_node}
        yield {"stage": st.stage, "ledger": "host", "category": "node.load_peak", "bytes": st.load_peak,
               **_explained(st.load_formula, st.load_note)}  # fmt: skip
        yield {"stage": st.stage, "ledger": "host", "category": "node.save_peak", "bytes": st.save_peak,
               **_explained(st.save_formula, st.save_note)}  # fmt: skip
        verdict = "fits" if st.fits else "does not fit"
        yield {"stage": st.stage, "ledger": "host", "category": "node.peak", "bytes": st.peak, "value": verdict,
               "detail": f"host memory {e.ledger.host.capacity:,} B"}  # fmt: skip


def _parallelism_rows(e: Estimate) -> Iterator[Row]:
    """The model-parallel layout: the world size, this rank's parameters and expert parameters before ZeRO
    shards them, and with pipeline parallelism each end's peak at the run's stage."""
    s = e.scenario
    yield {"ledger": "parallelism", "category": "world", "value": s.world,
           "formula": f"{n(s.dp)} × {n(s.tp)} × {n(s.pp)} × {n(s.cp)} = {n(s.world)}",
           "detail": "GPUs: D × tp × pp × cp"}  # fmt: skip
    lines = "; ".join(e.model.share.lines) if e.model is not None else ""
    yield {"ledger": "parallelism", "category": "params_per_rank", "value": s.params,
           "detail": "; ".join(p for p in ("parameters on this rank before ZeRO shards them", lines) if p)}  # fmt: skip
    yield {"ledger": "parallelism", "category": "expert_params_per_rank", "value": s.expert_params,
           "detail": f"of them, expert parameters sharded over D ÷ ep = {n(max(1, s.dp // s.ep))} ranks"
           if s.expert_params else "ep = 1: any experts are sharded as the rest"}  # fmt: skip
    ends = e.pipeline
    if ends is None:
        return
    for end in ends.ends:
        role = ", ".join(
            word
            for word, on in (("budgeted", end.pp_stage == ends.budgeted), ("busier", end.pp_stage == ends.busier))
            if on
        )
        yield {"stage": s.stage, "ledger": "parallelism", "category": f"pipeline.{end.pp_stage}.peak",
               "bytes": end.peak, "value": "fits" if end.fits else "does not fit",
               "detail": f"the {end.pp_stage} of {s.pp} pipeline stages{f' ({role})' if role else ''}: "
               f"{end.params:,} parameters per rank, activations {end.activation_bytes:,} B"}  # fmt: skip
    if ends.other_problem:
        other = "last" if ends.budgeted == "first" else "first"
        yield {"stage": s.stage, "ledger": "parallelism", "category": f"pipeline.{other}.peak",
               "detail": f"not budgeted: {ends.other_problem}"}  # fmt: skip


def _explained(formula: Formula, *detail: str) -> Row:
    """The ``formula`` and ``detail`` cells of a row: the arithmetic, and the given detail followed
    by the formula's remarks that it does not already say, joined by "; "."""
    parts = [part for part in detail if part]
    parts += [remark for remark in formula.remarks if not any(remark in part for part in parts)]
    return {"formula": formula.arithmetic, "detail": "; ".join(parts)}


def rows(e: Estimate) -> Iterator[Row]:
    """Every CSV row of the receipt, in order, as dicts keyed by :data:`COLUMNS`."""
    yield from _input_rows(e)
    for st in e.ledger.stages:
        yield from _stage_rows(st, e.activation_source)
    yield from _checkpoint_rows(e)
    yield from _model_rows(e)
    yield from _host_rows(e)
    yield from _parallelism_rows(e)
    yield from _fit_finder_rows(e)
    yield from _mutation_rows(e)


def _input_rows(e: Estimate) -> Iterator[Row]:
    """The scenario's inputs (ledger ``input``): the CSV alone reconstructs the scenario."""
    s = e.scenario
    origins = choice_origins(s)  # a choice the stack decides: whose value the run has
    for field in FIELDS:
        value = getattr(s, field.name)
        origin = origins.get(field.name, "")
        yield {
            "ledger": "input",
            "category": field.name,
            "value": value,
            "bytes": value if field.kind == "bytes" else "",
            "detail": "; ".join(part for part in (field.unit, origin) if part),
        }


def _stage_rows(st: StageLedger, activation_source: str) -> Iterator[Row]:
    """One stage: its persistent lines and total, both peaks, the verdict, the communication per step."""
    for line in st.lines:
        yield {
            "stage": st.stage,
            "ledger": "persistent",
            "category": line.tensor_class,
            "bytes": line.bytes,
            "width": line.width,
            "copies": line.copies,
            "owners": line.owners,
            "elements": line.elements,
            "share_bp": share_bp(line.bytes, st.persistent),
            **_explained(line.formula, line.evidence, line.note),
        }
    yield {"stage": st.stage, "ledger": "persistent", "category": "total", "bytes": st.persistent}
    p = st.peak
    if p.schedule is None:
        yield from _declared_rows(st.stage, "peak", p, activation_source)
    else:
        yield from _schedule_rows(st.stage, p)
    yield from _declared_rows(st.stage, "declared_peak", p.declared_peak, activation_source)
    s = p.scenario
    if s.reserve_bytes:  # the verdict compares the reserved estimate: said beside the allocated peak
        yield {
            "stage": st.stage,
            "ledger": "fit",
            "category": "reserved",
            "bytes": p.reserved,
            "formula": f"{p.total} + {s.reserve_bytes}",
            "detail": f"the allocated peak + the {s.reserve_source} allocator reserve",
        }
    yield {
        "stage": st.stage,
        "ledger": "fit",
        "category": "headroom",
        "bytes": p.headroom,
        "value": "fits" if p.fits else "does not fit",
        **(
            {"formula": f"{s.capacity_bytes} − {p.reserved}", "detail": "capacity − the reserved estimate"}
            if s.reserve_bytes
            else {}
        ),
    }
    yield {
        "stage": st.stage,
        "ledger": "communication",
        "category": "total",
        "bytes": st.communication.bytes,
        **_explained(st.communication.formula, st.communication.collectives, st.communication.evidence),
    }


def _checkpoint_rows(e: Estimate) -> Iterator[Row]:
    for c in e.checkpoint:
        yield {
            "ledger": "checkpoint",
            "category": f"{c.policy}.device",
            "bytes": c.device_bytes,
            **_explained(c.device_formula, c.description),
        }
        yield {
            "ledger": "checkpoint",
            "category": f"{c.policy}.host",
            "bytes": c.host_bytes,
            **_explained(c.host_formula, c.flag),
        }
        for stage, peak in enumerate(c.save_peaks):
            yield {"stage": stage, "ledger": "checkpoint", "category": f"{c.policy}.save_peak", "bytes": peak}


def _fit_finder_rows(e: Estimate) -> Iterator[Row]:
    for fit in e.fit.stages:
        yield {"stage": fit.stage, "ledger": "fit_finder", "category": "smallest_dp", "value": _blank(fit.smallest_dp)}
        if e.fit.micro_batch_modelled:
            yield {"stage": fit.stage, "ledger": "fit_finder", "category": "largest_micro_batch",
                   "value": _blank(fit.largest_micro_batch)}  # fmt: skip
    o = e.offload_fit
    yield {"stage": e.scenario.stage, "ledger": "fit_finder", "category": "cheapest_offload",
           "value": "none fits" if o is None else f"{o.offload_optimizer}/{o.offload_param}",
           "detail": "optimizer/parameters offload on which the run's stage fits the device and the host"}  # fmt: skip


def _mutation_rows(e: Estimate) -> Iterator[Row]:
    for ledger_name, results in (("mutation", e.mutations), ("reference_mutation", e.reference_mutations)):
        for m in results:
            yield {
                "ledger": ledger_name,
                "category": m.id,
                "value": "killed" if m.killed else "survived",
                # the check that killed it is not arithmetic: it leads the detail, as in the table
                "detail": f"killed by {m.check}: {m.message}" if m.killed else m.message,
            }


def _declared_rows(stage: int, ledger: str, p: Peak, source: str) -> Iterator[Row]:
    """The seed's declared peak, part by part (ledger ``peak`` without a model, ``declared_peak`` always)."""
    yield {"stage": stage, "ledger": ledger, "category": "persistent", "bytes": p.persistent}
    yield {"stage": stage, "ledger": ledger, "category": "gather", "bytes": p.gather, **_explained(p.gather_formula)}
    yield {"stage": stage, "ledger": ledger, "category": "buckets", "bytes": p.buckets, "detail": "declared"}
    yield {"stage": stage, "ledger": ledger, "category": "activations", "bytes": p.activations,
           **_explained(p.activations_formula, source)}  # fmt: skip
    yield {"stage": stage, "ledger": ledger, "category": "overhead", "bytes": p.overhead, "detail": "declared"}
    yield {"stage": stage, "ledger": ledger, "category": "contingency", "bytes": p.contingency,
           **_explained(p.contingency_formula)}  # fmt: skip
    yield {"stage": stage, "ledger": ledger, "category": "total", "bytes": p.total}


def _sum_formula(values: list[int], total: int) -> str:
    return "" if len(values) < 2 else " + ".join(n(v) for v in values) + f" = {n(total)} B"


def _schedule_rows(stage: int, p: Peak) -> Iterator[Row]:
    """The schedule-aware peak: its parts at the worst instant (what each holds in ``detail``), the
    contingency and total, then every instant walked with its total."""
    worst = p.instant
    assert worst is not None and p.schedule is not None
    yield {"stage": stage, "ledger": "peak", "category": "instant", "value": worst.name, "detail": p.schedule.note}
    for part in ("persistent", "gather", "buckets", "activations", "overhead"):
        entries = [e for e in worst.entries if e.part == part]
        values = [e.bytes for e in entries]
        yield {"stage": stage, "ledger": "peak", "category": part, "bytes": sum(values),
               "formula": _sum_formula(values, sum(values)),
               "detail": "; ".join(f"{e.what} = {e.bytes:,} B" for e in entries)}  # fmt: skip
    yield {"stage": stage, "ledger": "peak", "category": "contingency", "bytes": p.contingency,
           **_explained(p.contingency_formula)}  # fmt: skip
    yield {"stage": stage, "ledger": "peak", "category": "total", "bytes": p.total}
    for i in p.schedule.instants:
        values = [e.bytes for e in i.entries]
        yield {"stage": stage, "ledger": "instant", "category": i.key, "bytes": i.total, "value": i.name,
               "formula": _sum_formula(values, i.total),
               "detail": "; ".join(f"{e.what}: {e.formula}" for e in i.entries)}  # fmt: skip


_RECOMPUTE = "forward FLOPs recomputed ÷ the FLOPs of one step (forward + backward ≈ 3 × forward)"


def _blank(value: int | None) -> int | str:
    return "" if value is None else value


def _model_rows(e: Estimate) -> Iterator[Row]:
    """The model's inventory, its activation ledger and the FSDP2 padding, when a model is named."""
    model, activations, fsdp2 = model_out(e), activations_out(e), fsdp2_out(e)
    if model is not None:
        yield {"ledger": "model", "category": "params", "value": model.params, "detail": model.title}
        yield {"ledger": "model", "category": "largest_unit", "value": model.largest_unit.params,
               "detail": model.largest_unit.name}  # fmt: skip
    if isinstance(activations, ModelledActivations) and e.model is not None:
        yield from _activation_rows(activations, e.model.activations.formula)
    if fsdp2 is not None:
        padded_bytes = fsdp2.stage3_padded_bytes
        for cls, size in padded_bytes.model_dump().items():
            yield {"stage": 3, "ledger": "fsdp2", "category": cls, "bytes": size}
        padded, lower, padding = padded_bytes.total, fsdp2.stage3_lower_bound_bytes, fsdp2.padding_bytes
        yield {"stage": 3, "ledger": "fsdp2", "category": "padding", "bytes": padding,
               "formula": f"{n(padded)} − {n(lower)} = {n(padding)} B", "detail": fsdp2.note}  # fmt: skip


def _activation_rows(a: ModelledActivations, formula: Formula) -> Iterator[Row]:
    """The modelled activation ledger: its terms, its total with the derivation, the recompute fraction."""
    for key in ("per_layer", "working_set", "embedding", "head", "logits"):
        yield {"ledger": "activations", "category": key, "bytes": getattr(a, f"{key}_bytes")}
    # the ledger's derivation belongs to its total; its assumptions are the detail
    yield {"ledger": "activations", "category": "total", "bytes": a.total_bytes,
           "formula": formula.arithmetic, "detail": "; ".join((*formula.remarks, a.assumptions))}  # fmt: skip
    num, den = a.recompute_flops.numerator, a.recompute_flops.denominator
    fraction = a.recompute_flops_fraction
    exact = num * 10 ** len(fraction.partition(".")[2]) % den == 0
    yield {"ledger": "activations", "category": "recompute_flops_fraction", "value": fraction,
           "formula": f"{n(num)} ÷ {n(den)} {'=' if exact else '≈'} {fraction}", "detail": _RECOMPUTE}  # fmt: skip


def in_gb_and_gib(row: Row) -> Row:
    """``row`` with its byte count in GB and GiB beside it (none where it has none)."""
    size = row.get("bytes")
    if not isinstance(size, int):
        return row
    return {**row, "gb": in_units(size, GB), "gib": in_units(size, GIB)}


def csv_lines(e: Estimate, *, bom: bool = False) -> Iterator[str]:
    """The receipt's CSV text, one record at a time."""
    return csv_records(COLUMNS, map(in_gb_and_gib, rows(e)), bom=bom)


def csv_text(e: Estimate, *, bom: bool = False) -> str:
    return "".join(csv_lines(e, bom=bom))
