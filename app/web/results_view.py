"""The results section as display-ready rows: every number formatted once, in Python.

The template then only places strings (tuple-unpacked in its loops, no attribute lookups), which
is what keeps a live update cheap. Every string here comes from integers and the lab's own
text, except the scenario name, which the template escapes.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.estimate import Estimate
from app.ledger.rules import CLASSES
from app.receipts.display import gb, gib, integer, percent_bp

PEAK_PARTS: tuple[str, ...] = ("persistent", "gather", "buckets", "activations", "overhead", "contingency", "total")

# (stage, class, bytes, GB, GiB, exact, share, formula)
Cell = tuple[int, str, int, str, str, str, str, str]
# (stage, part, bytes, GB, exact)
PeakCell = tuple[int, str, int, str, str]


@dataclass(slots=True)
class ResultsView:
    cells: list[tuple[str, list[Cell]]]  # per class: its four stage cells
    totals: list[tuple[int, int, str, str, str]]  # per stage: (stage, bytes, GB, GiB, exact)
    lines: list[tuple[int, str, int, int, str, str, str, str, str, str]]
    # per stage: (stage, parts, fits, headroom, its GB, GiB and exact bytes, the peak in GiB)
    peaks: list[tuple[int, list[PeakCell], bool, int, str, str, str, str]]
    communication: list[tuple[int, str, int, str, str, str]]
    checkpoint: list[tuple[str, str, int, str, str, int, str, str, list[tuple[int, str]], bool, str]]
    fit: list[tuple[int, str, str]]  # per stage: smallest D, largest micro batch (text)
    fit_rows: list[tuple[str, list[tuple[int, str]]]]  # per D of the curve: (D, [(bytes, GB) per stage])


def _cell(stage: int, cls: str, value: int, share: str, formula: str) -> Cell:
    return stage, cls, value, gb(value), gib(value), integer(value), share, formula


def results_view(e: Estimate, *, with_lines: bool = True) -> ResultsView:
    """Display rows for ``e``; ``with_lines=False`` skips the ledger-lines table (a live update
    fetches it only when the reader opens it)."""
    stages = e.ledger.stages
    formulas = [[line.formula for line in st.lines] for st in stages]
    cells: list[tuple[str, list[Cell]]] = []
    for index, cls in enumerate(CLASSES):
        row = []
        for st in stages:
            line = st.lines[index]
            total = st.persistent
            bp = (line.bytes * 20_000 + total) // (2 * total) if total else 0
            row.append(_cell(st.stage, cls, line.bytes, percent_bp(bp), formulas[st.stage][index]))
        cells.append((cls, row))
    lines = [] if not with_lines else [
        (st.stage, line.tensor_class, line.width, line.copies, integer(line.owners), integer(line.elements),
         integer(line.bytes), formulas[st.stage][index], line.note, line.evidence)
        for st in stages
        for index, line in enumerate(st.lines)
    ]  # fmt: skip
    peaks = []
    for st in stages:
        p = st.peak
        parts = [(st.stage, part, v, gb(v), integer(v)) for part in PEAK_PARTS for v in (getattr(p, part),)]
        peaks.append((st.stage, parts, p.fits, p.headroom, gb(p.headroom), gib(p.headroom), integer(p.headroom),
                      gib(p.total)))  # fmt: skip
    comm = [
        (st.stage, st.communication.collectives, st.communication.bytes, gb(st.communication.bytes),
         integer(st.communication.bytes), st.communication.formula)
        for st in stages
    ]  # fmt: skip
    checkpoint = [
        (c.policy, c.description, c.device_bytes, gb(c.device_bytes), c.device_formula, c.host_bytes, gb(c.host_bytes),
         c.host_formula, [(v, gb(v)) for v in c.save_peaks], c.flagged, c.flag)
        for c in e.checkpoint
    ]  # fmt: skip
    totals = [(st.stage, st.persistent, gb(st.persistent), gib(st.persistent), integer(st.persistent)) for st in stages]
    modelled = e.fit.micro_batch_modelled
    fit = [
        (st.stage, "none fits" if st.smallest_dp is None else f"{st.smallest_dp:,}",
         ("none fits" if st.largest_micro_batch is None else f"{st.largest_micro_batch:,}") if modelled
         else "— (activations not modelled)")
        for st in e.fit.stages
    ]  # fmt: skip
    fit_rows = [] if not with_lines else [(f"{dp:,}", [(p, gb(p)) for p in peaks]) for dp, peaks in e.fit.curve]
    return ResultsView(cells, totals, lines, peaks, comm, checkpoint, fit, fit_rows)
