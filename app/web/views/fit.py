"""``partials/_fit.html``: the fit finder (the smallest D and the largest micro batch at which each stage
fits, the curve's chart, the least offload that fits) and ``partials/_fit_table.html``, the chart's
table twin that a closed <details> fetches (/fit-table)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.ledger.estimate import Estimate
from app.ledger.peak.fit import FitFinder
from app.ledger.state.host import OffloadFit
from app.web.views.charts import FitChart, fit_chart


@dataclass(frozen=True, slots=True)
class FitRow:
    stage: int
    smallest_dp: int | None  # None: no D fits
    largest_micro_batch: int | None  # None: not even one sequence fits (or not modelled)


@dataclass(frozen=True, slots=True)
class FitSection:
    """``_fit.html``: the smallest D and the largest micro batch that fit, and the curve's chart."""

    rows: tuple[FitRow, ...]
    micro_batch_modelled: bool
    dp: int
    chart: FitChart
    stage_run: int
    offload: OffloadFit | None  # the least offload on which the run's stage fits device and host


def fit_section(e: Estimate) -> FitSection:
    fit = e.fit
    return FitSection(
        rows=tuple(FitRow(st.stage, st.smallest_dp, st.largest_micro_batch) for st in fit.stages),
        micro_batch_modelled=fit.micro_batch_modelled,
        dp=e.scenario.dp,
        chart=fit_chart(
            fit.curve, e.scenario.capacity_bytes, e.scenario.dp, tuple(st.peak.total for st in e.ledger.stages)
        ),
        stage_run=e.scenario.stage,
        offload=e.offload_fit,
    )


def fit_table_context(fit: FitFinder) -> dict[str, Any]:
    """``partials/_fit_table.html``: the fit chart's numbers, the peak of every stage at each D."""
    return {"curve": fit.curve}
