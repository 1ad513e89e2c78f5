"""``partials/_kills.html``: both mutation kill lists (on this scenario and on the frozen references) and
the checks on the production ledger; the results include it, or /kills answers it on its own when a live
update deferred it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.ledger.ledger import compute_ledger
from app.ledger.scenario import Scenario
from app.ledger.verify.checks import run_checks
from app.ledger.verify.mutants import MutationResult, kill_list, reference_kill_list
from app.ledger.verify.results import ALL_CHECKS, CheckResult


@dataclass(frozen=True, slots=True)
class Kills:
    """``_kills.html``: both kill lists and the checks on the production ledger."""

    scenario: tuple[MutationResult, ...]
    reference: tuple[MutationResult, ...]
    checks: tuple[CheckResult, ...]


def kills(s: Scenario) -> Kills:
    """``_kills.html`` on its own (``/kills``): what the results show when it is not deferred."""
    return Kills(kill_list(s), reference_kill_list(), run_checks(compute_ledger(s), compute_ledger, ALL_CHECKS))


def kills_context(s: Scenario) -> dict[str, Any]:
    """``/kills``'s context: the kill lists, and ``present`` off, since presenter mode never defers its
    kill lists (app.web.routes.pages.deferred_parts), so /kills never serves a presenter's page."""
    return {"kills": kills(s), "present": False}
