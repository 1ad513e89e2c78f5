"""``partials/_communication.html``: what each rank sends per optimizer step, by stage."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.estimate import Estimate


@dataclass(frozen=True, slots=True)
class CommunicationRow:
    stage: int
    collectives: str
    bytes: int
    formula: str


def communication_rows(e: Estimate) -> tuple[CommunicationRow, ...]:
    return tuple(
        CommunicationRow(st.stage, st.communication.collectives, st.communication.bytes, st.communication.formula.text)
        for st in e.ledger.stages
    )
