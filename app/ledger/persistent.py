"""The persistent ledger: one line per (stage, tensor class), per busiest rank."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import ceil_div, n
from app.ledger.rules import CLASSES, Rules
from app.ledger.scenario import Scenario


@dataclass(frozen=True, slots=True)
class LedgerLine:
    """bytes = ⌈N ÷ owners⌉ × width × copies, with the formula and the rule's evidence."""

    stage: int
    tensor_class: str
    width: int
    copies: int
    owners: int
    elements: int
    bytes: int
    formula: str
    evidence: str
    note: str


def width_and_copies(s: Scenario, tensor_class: str, rules: Rules) -> tuple[int, int, str]:
    """Element width, copies per parameter, and a note when the class is empty."""
    if tensor_class == "parameters":
        return s.param_bytes, 1, ""
    if tensor_class == "gradients":
        return s.grad_bytes, 1, ""
    if tensor_class == "master_weights":
        if s.master_bytes == 0:
            return 0, 0, "no separate master copy (master_bytes = 0): the optimizer updates the parameters"
        if not rules.master_copy:
            return s.master_bytes, 0, "master copy not counted"
        return s.master_bytes, 1, ""
    if s.opt_states == 0:
        return s.opt_bytes, 0, "no optimizer state (opt_states = 0)"
    return s.opt_bytes, s.opt_states, ""


def ledger_line(s: Scenario, stage: int, tensor_class: str, rules: Rules) -> LedgerLine:
    owners = rules.owners(tensor_class, stage, s.dp)
    elements = ceil_div(s.params, owners)
    width, copies, note = width_and_copies(s, tensor_class, rules)
    size = elements * width * copies
    split = f"⌈{n(s.params)} ÷ {n(owners)}⌉ = {n(elements)}" if owners > 1 else n(elements)
    formula = f"{split} elements × {width} B × {copies} {'copy' if copies == 1 else 'copies'} = {n(size)} B"
    return LedgerLine(
        stage=stage,
        tensor_class=tensor_class,
        width=width,
        copies=copies,
        owners=owners,
        elements=elements,
        bytes=size,
        formula=formula,
        evidence=rules.evidence(tensor_class, stage),
        note=note,
    )


def persistent_lines(s: Scenario, stage: int, rules: Rules) -> tuple[LedgerLine, ...]:
    return tuple(ledger_line(s, stage, c, rules) for c in CLASSES)
