"""The checks on the scenario's ledger and the mutation kill lists (the receipt's and ``/api/mutations``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from app.ledger.verify import results
from app.ledger.verify.mutants import MutationResult
from app.receipts.strict import Strict


class CheckResult(Strict):
    check: str
    title: str
    passed: bool
    message: str


class Mutation(Strict):
    """One mutant (one ownership or peak rule broken) and whether a named check killed it."""

    id: str
    rule: str
    killed: bool
    check: str = Field(description="the first named check that failed; empty for a survivor")
    message: str = Field(description="the failing check's message, or why the mutant survived")
    failed_checks: list[str]


class KillLists(Strict):
    mutations: list[Mutation]
    reference_mutations: list[Mutation]


def check_out(c: results.CheckResult) -> CheckResult:
    return CheckResult(check=c.check, title=results.TITLES[c.check], passed=c.passed, message=c.message)


def mutation_out(m: MutationResult) -> Mutation:
    return Mutation(id=m.id, rule=m.rule, killed=m.killed, check=m.check, message=m.message,
                    failed_checks=list(m.failed_checks))  # fmt: skip


def mutation_json(m: MutationResult) -> dict[str, Any]:
    """One mutant as ``/api/mutations`` lists it (JSON-ready data)."""
    return mutation_out(m).model_dump(mode="json")
