"""The summary CSV: the receipt a reviewer opens first, one row per stage.

Each row: the stage's persistent state and peak (with the instant that sets it), what the verdict compares it with
(the capacity less the allocator's reserve), fits or not, and the headroom; every figure in bytes (exact integers)
and in GB (10^9) and GiB (2^30), two decimals rounded half up as the page spells them. The full ledger stays in
``/receipt.csv`` (:mod:`app.receipts.csv_rows`), whose writer and CSV-injection guard this file shares.
"""

from __future__ import annotations

from collections.abc import Iterator

from app.ledger.estimate import Estimate
from app.ledger.ledger import StageLedger
from app.receipts.csv_format import Row, csv_records
from app.receipts.display import GB, GIB, in_units


def _units(figure: str) -> tuple[str, str, str]:
    return f"{figure}_bytes", f"{figure}_gb", f"{figure}_gib"


COLUMNS: tuple[str, ...] = (
    "stage",
    *_units("persistent"),
    *_units("peak"),
    "peak_instant",
    *_units("allocatable"),
    "fits",
    *_units("headroom"),
)


def _figure(name: str, value: int) -> Row:
    exact, decimal, binary = _units(name)
    return {exact: value, decimal: in_units(value, GB), binary: in_units(value, GIB)}


def _stage_row(st: StageLedger, allocatable: int) -> Row:
    p = st.peak
    instant = p.schedule.peak.name if p.schedule is not None else "declared sum of maxima (no model: no schedule)"
    return {
        "stage": st.stage,
        **_figure("persistent", st.persistent),
        **_figure("peak", p.total),
        "peak_instant": instant,
        **_figure("allocatable", allocatable),
        "fits": "yes" if p.fits else "no",
        **_figure("headroom", p.headroom),
    }


def summary_rows(e: Estimate) -> Iterator[Row]:
    allocatable = e.scenario.allocatable_bytes
    return (_stage_row(st, allocatable) for st in e.ledger.stages)


def summary_lines(e: Estimate, *, bom: bool = False) -> Iterator[str]:
    """The summary CSV's text, one record at a time."""
    return csv_records(COLUMNS, summary_rows(e), bom=bom)
