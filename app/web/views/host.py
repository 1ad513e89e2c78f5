"""``partials/_host.html``: the host ledger per node, the run's stage's lines, and DeepSpeed's own
estimator beside it (or why it does not apply to this scenario)."""

from __future__ import annotations

from dataclasses import dataclass

from app.interop.deepspeed.estimator import Comparison, compare, not_comparable
from app.ledger.estimate import Estimate
from app.ledger.state.host import HostLedger


@dataclass(frozen=True, slots=True)
class HostView:
    """``_host.html``: the host ledger per node, the run's stage's lines, DeepSpeed's estimator beside it."""

    ledger: HostLedger
    stage_run: int
    offloaded: bool  # anything off the device at some stage
    estimator: Comparison | None
    estimator_note: str


def host_view(e: Estimate) -> HostView:
    host = e.ledger.host
    return HostView(
        host,
        e.scenario.stage,
        any(st.lines for st in host.stages),
        compare(e.ledger, host),
        not_comparable(e.scenario) or "",
    )
