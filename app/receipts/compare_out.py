"""Two scenarios compared as ``GET /compare.json`` answers: both sides' stage figures and B − A.

The models are the answer's description for ``/openapi.json``; :func:`app.receipts.compare.comparison_json`
builds the data they check.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from app.receipts.scenario_out import ScenarioOut
from app.receipts.sections.stack import ChoiceSource, StackSection
from app.receipts.sections.stages import ByClass
from app.receipts.strict import Bytes, SignedBytes, Strict

Difference = Annotated[int, Field(description="bytes, an exact integer: B − A (negative when B needs less)")]


class PeakParts(Strict):
    """The training peak's parts, as the receipt's ``peak`` holds them (without the formulas)."""

    persistent: Bytes
    gather: Bytes
    buckets: Bytes
    activations: Bytes
    overhead: Bytes
    contingency: Bytes
    subtotal: Bytes
    total: Bytes


class ComparedStage(Strict):
    """One stage of one side: the figures of that side's receipt."""

    stage: Literal[0, 1, 2, 3]
    persistent: ByClass
    peak: PeakParts
    fits: bool
    headroom_bytes: SignedBytes = Field(description="capacity − peak")
    communication_bytes: Bytes = Field(description="sent per rank per optimizer step")


class ComparedSide(Strict):
    link: str = Field(description="the side's canonical query string (sorted, defaults omitted)")
    scenario: ScenarioOut
    stack: StackSection = Field(description="the side's training stack and the choices it decides")
    stages: list[ComparedStage] = Field(description="exactly four entries, stage 0 to 3, in order")


class ByClassDifference(Strict):
    parameters: Difference
    gradients: Difference
    master_weights: Difference
    optimizer_states: Difference
    total: Difference


class PeakDifference(Strict):
    persistent: Difference
    gather: Difference
    buckets: Difference
    activations: Difference
    overhead: Difference
    contingency: Difference
    subtotal: Difference
    total: Difference


class StageDifference(Strict):
    """B − A for one stage, and which categories moved."""

    stage: Literal[0, 1, 2, 3]
    persistent: ByClassDifference
    peak: PeakDifference
    verdict: Literal["unchanged", "now fits", "no longer fits"] = Field(description="B's verdict against A's")
    headroom_bytes: Difference
    communication_bytes: Difference
    moved: list[str] = Field(
        description="the categories whose bytes differ, as ledger.category: persistent.gradients, peak.total, "
        "fit.headroom, communication.total"
    )


class InputChange(Strict):
    """An input that differs between A and B (defaults filled in)."""

    name: str
    a: int | str
    b: int | str
    a_source: ChoiceSource | None = Field(
        description="for a choice A's training stack decides: stack (A has the stack's value) or set; else null"
    )
    b_source: ChoiceSource | None = Field(description="the same for B")
    peak_alone_bytes: int | None = Field(
        description="B's edit of this input alone, applied to A: the peak at the stage that run uses minus A's "
        "(null: the input only follows another, as params follows the model, or A cannot take it alone)"
    )
    alone_error: str | None = Field(description="why A cannot take this edit alone (the fields refused); else null")


class ComparisonDiff(Strict):
    inputs: list[InputChange] = Field(description="the inputs that differ, in form order")
    stages: list[StageDifference] = Field(description="exactly four entries, stage 0 to 3, in order")


class ComparisonOut(Strict):
    """Two scenarios side by side: both receipts' stage figures and their differences (B − A)."""

    schema_version: Literal[2]
    units: Literal["bytes"]
    link: str = Field(description="the comparison's shareable address, /compare?a=…&b=…, absolute")
    a: ComparedSide
    b: ComparedSide
    diff: ComparisonDiff
