"""A reconciliation as JSON (exact integers, stable names) and as a terminal table."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.ledger.scenario.links import canonical_query
from app.observed.reconcile import ENTRY_LABELS, Comparison, Reconciliation, Row
from app.receipts.display import gb, gib

SCHEMA = "zero3-lab.reconcile/1"
IDENTITY = "observed = estimate + allocator_reserve + cuda_context + unexplained (observed = reserved + context)"


def _row_json(r: Row) -> dict[str, Any]:
    return {
        "rank": r.rank,
        "line": str(r.where),
        "lab": r.lab,
        "estimate": r.estimate,
        "allocated": r.allocated,
        "reserved": r.reserved,
        "context": r.context,
        "context_measured": r.context_measured,
        "observed": r.observed,
        "entries": {e.name: e.bytes for e in r.entries},
    }


def _comparison_json(c: Comparison) -> dict[str, Any]:
    return {
        "key": c.key,
        "mark": c.mark,
        "kind": c.kind,
        "title": c.title,
        "rows": [_row_json(r) for r in c.rows],
        "ranges": {
            g.name: {"min": g.min, "min_rank": g.min_rank, "max": g.max, "max_rank": g.max_rank} for g in c.ranges
        },
    }


def reconcile_json(rec: Reconciliation) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "scenario": canonical_query(rec.scenario),
        "stage": 3,
        "step": rec.step,
        "ranks": list(rec.ranks),
        "world": rec.world,
        "identity": IDENTITY,
        "entries": dict(ENTRY_LABELS),
        "peak": {
            "instant": rec.peak_instant,
            "subtotal": rec.peak_subtotal,
            "contingency": rec.contingency,
            "total": rec.peak_total,
            "capacity": rec.capacity,
            "covers_observed": rec.covered,
            "observed_within_capacity": rec.fits_capacity,
        },
        # the allocator's measured reserve, offered as the scenario's reserve_bytes (issue 26 item 5)
        "measured_reserve": rec.measured_reserve,
        "use_measured_reserve": None if rec.reserve_query is None else "/?" + rec.reserve_query,
        "comparisons": [_comparison_json(c) for c in rec.comparisons],
        "notes": list(rec.notes),
    }


# --------------------------------------------------------------------------- the table

_HEADER = ("rank", "estimate", "allocated", "reserved", "context", "observed", "alloc. reserve", "unexplained")


def _cells(r: Row) -> tuple[str, ...]:
    context = f"{r.context:,}" if r.context_measured else "0 (no start)"
    return (f"{r.rank:,}", f"{r.estimate:,}", f"{r.allocated:,}", f"{r.reserved:,}", context, f"{r.observed:,}",
            f"{r.entry('allocator_reserve'):,}", f"{r.entry('unexplained'):+,}")  # fmt: skip


def _comparison_lines(c: Comparison) -> Iterator[str]:
    labs = {r.lab for r in c.rows}
    yield f"{c.title[0].upper()}{c.title[1:]} — lab: {next(iter(labs)) if len(labs) == 1 else 'per rank, below'}"
    body = [_cells(r) for r in c.rows]
    widths = [max(len(row[i]) for row in (_HEADER, *body)) for i in range(len(_HEADER))]
    yield "  " + "  ".join(h.rjust(w) for h, w in zip(_HEADER, widths, strict=True))
    for row, r in zip(body, c.rows, strict=True):
        yield (
            "  "
            + "  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True))
            + (f"  {r.lab}" if len(labs) > 1 else "")
        )
    for g in c.ranges[2:]:  # the entries (the estimate and the observed figure are in the rows)
        same = g.min == g.max
        spread = f"{g.min:,} B on every rank" if same else (
            f"min {g.min:,} B (rank {g.min_rank:,}), max {g.max:,} B (rank {g.max_rank:,})"
        )  # fmt: skip
        yield f"    {ENTRY_LABELS[g.name]}: {spread}"


def _title(rec: Reconciliation) -> str:
    md = rec.scenario.model_defaults()
    return rec.scenario.name or (md.model.title if md is not None else "the scenario")


def render_table(rec: Reconciliation) -> str:
    s = rec.scenario
    ranks = f"{len(rec.ranks):,} rank{'s' if len(rec.ranks) != 1 else ''}"
    lines = [
        f"zero3-lab reconcile: {_title(rec)} at D = {s.dp:,}, stage 3, step {rec.step:,} of "
        f"{ranks}" + (f" (world {rec.world:,})" if rec.world is not None else ""),
        "  bytes per rank; observed = reserved + context = estimate + allocator reserve + CUDA context + unexplained",
        "",
    ]
    for c in rec.comparisons:
        lines.extend(_comparison_lines(c))
        lines.append("")
    verdict = "covers" if rec.covered else "does NOT cover"
    lines += [
        f"The lab's stage-3 peak: {rec.peak_total:,} B ({gb(rec.peak_total)}, {gib(rec.peak_total)}) at "
        f"{rec.peak_instant}, contingency {rec.contingency:,} B included; it {verdict} every rank's observed peak "
        f"(highest {rec.step_peak.range_of('observed').max:,} B, rank {rec.step_peak.range_of('observed').max_rank:,})",
    ]
    within = "within" if rec.fits_capacity else "NOT within"
    lines.append(f"Every rank's observed peak is {within} the capacity of {rec.capacity:,} B ({gb(rec.capacity)}).")
    if rec.reserve_query is not None:
        lines.append(f"The allocator reserved {rec.measured_reserve:,} B above allocated at the step's peak; to "
                     f"compare the reserved estimate with the capacity, use it: /?{rec.reserve_query}")  # fmt: skip
    lines += [f"Note: {note}" for note in rec.notes]
    return "\n".join(lines) + "\n"


CSV_HEADER = ("comparison", "rank", "line", "lab_instant", "estimate", "allocated", "reserved", "cuda_context",
              "context_measured", "observed", *ENTRY_LABELS)  # fmt: skip


def csv_rows(rec: Reconciliation) -> Iterator[tuple[object, ...]]:
    """Every comparison's every rank, one row each (the page shows the worst few): exact integers in bytes."""
    yield CSV_HEADER
    for c in rec.comparisons:
        for r in c.rows:
            yield (c.key, r.rank, str(r.where), r.lab, r.estimate, r.allocated, r.reserved, r.context,
                   int(r.context_measured), r.observed, *(r.entry(name) for name in ENTRY_LABELS))  # fmt: skip
