"""``partials/_lower.html``: the sections below the peak (the trace panel, the fit finder, communication,
checkpoint save, host memory, "Run it"). The results include them, or /lower answers them on their own when
a live update deferred them. The checkpoint policies are the core's own values; the trace panel is looked
up by the template (:mod:`app.web.views.trace_panel`), from the scenario's query."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.ledger.estimate import Estimate, estimate
from app.ledger.scenario import Scenario
from app.ledger.scenario.links import canonical_query
from app.ledger.state.checkpoint import CheckpointPolicy
from app.web.views.communication import CommunicationRow, communication_rows
from app.web.views.fit import FitSection, fit_section
from app.web.views.host import HostView, host_view


@dataclass(frozen=True, slots=True)
class Lower:
    """``_lower.html``: the sections below the peak (the trace panel, the fit finder, communication,
    checkpoint save, host memory, "Run it"). A live update defers them as it does the kill lists."""

    capacity: int
    fit: FitSection
    communication: tuple[CommunicationRow, ...]
    communication_evidence: str
    checkpoint: tuple[CheckpointPolicy, ...]
    host: HostView


def lower_section(e: Estimate) -> Lower:
    """``_lower.html``'s figures for ``e`` (the trace panel is the template's, from the scenario)."""
    return Lower(
        capacity=e.scenario.capacity_bytes,
        fit=fit_section(e),
        communication=communication_rows(e),
        communication_evidence=e.ledger.stages[0].communication.evidence,
        checkpoint=e.checkpoint,
        host=host_view(e),
    )


def lower(s: Scenario) -> Lower:
    """``_lower.html`` on its own (``/lower``): what the results show when it is not deferred."""
    return lower_section(estimate(s, with_kill_lists=False))


def lower_context(s: Scenario) -> dict[str, Any]:
    """``/lower``'s context: its figures, and the scenario and its query for the trace panel and links."""
    query = canonical_query(s)
    return {"lower": lower(s), "scenario": s, "query": query, "q": f"?{query}" if query else ""}
