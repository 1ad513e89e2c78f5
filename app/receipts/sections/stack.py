"""The stack section: the training stack the run uses and, for each choice it decides, whether the run takes the
stack's value or sets its own, with the stack's evidence (issue 26 item 1)."""

from __future__ import annotations

from typing import Literal, cast

from pydantic import Field

from app.ledger.scenario import Scenario
from app.ledger.scenario.stacks import stack_choices
from app.receipts.strict import Strict

ChoiceSource = Literal["stack", "set"]


class StackChoiceOut(Strict):
    """One choice the stack decides."""

    name: str = Field(description="the scenario field", examples=["loss"])
    value: str | int = Field(description="the run's value (the scenario's)")
    source: ChoiceSource = Field(description="stack: the stack's value; set: the scenario sets another")
    stack_value: str | int = Field(description="what the stack sets")
    evidence: str = Field(description="where the stack's value comes from: the project's code and its version")


class StackSection(Strict):
    """The training stack (``plain-fsdp2``, ``hf-fsdp2``) and the choices it decides."""

    name: str = Field(examples=["hf-fsdp2"])
    choices: list[StackChoiceOut]


def stack_out(s: Scenario) -> StackSection:
    return StackSection(
        name=s.stack,
        choices=[
            StackChoiceOut(
                name=c.name,
                value=c.value,
                source=cast(ChoiceSource, c.source),
                stack_value=c.stack_value,
                evidence=c.evidence,
            )
            for c in stack_choices(s.stack, s.as_dict())
        ],
    )


def choice_origins(s: Scenario) -> dict[str, str]:
    """Per choice the stack decides, in words: set by the stack (with its evidence) or set over it."""
    return {
        c.name: f"set by the stack ({s.stack}): {c.evidence}"
        if c.from_stack
        else f"set over the stack ({s.stack}), which sets {c.stack_value}"
        for c in stack_choices(s.stack, s.as_dict())
    }
