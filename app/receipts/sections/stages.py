"""One stage of the receipt (its persistent ledger lines, both peaks, the verdict, communication per step)
and the checkpoint policies across stages."""

from __future__ import annotations

from typing import Literal, cast

from pydantic import Field

from app.ledger.arithmetic import share_bp
from app.ledger.estimate import Estimate
from app.ledger.ledger import StageLedger
from app.receipts.sections.peak import DeclaredPeak, Peak, declared_peak_out, peak_out
from app.receipts.strict import Bytes, Count, SignedBytes, Strict

StageNumber = Literal[0, 1, 2, 3]
TensorClass = Literal["parameters", "gradients", "master_weights", "optimizer_states"]


class ByClass(Strict):
    """Bytes per rank of each tensor class of model state, and their sum."""

    parameters: Bytes
    gradients: Bytes
    master_weights: Bytes
    optimizer_states: Bytes
    total: Bytes


class Communication(Strict):
    collectives: str
    volume_bytes: Bytes = Field(description="ring-algorithm volume before the (D − 1) ÷ D factor")
    formula: str
    evidence: str


class LedgerLine(Strict):
    """One tensor class at one stage: how many ranks share one copy, and what this rank holds."""

    tensor_class: TensorClass = Field(alias="class")
    width: Count = Field(description="bytes per element")
    copies: Count
    owners: Count = Field(description="ranks sharing one copy (1 = replicated, D = sharded)")
    elements: Count = Field(description="elements per rank: ⌈N ÷ owners⌉")
    bytes: Bytes
    share_bp: Count = Field(description="share of the stage's persistent total, in basis points")
    formula: str
    evidence: str
    note: str


class Stage(Strict):
    stage: StageNumber
    persistent: ByClass
    peak: Peak
    declared_peak: DeclaredPeak
    fits: bool = Field(description="reserved_bytes ≤ the capacity")
    headroom_bytes: SignedBytes = Field(description="capacity − reserved_bytes")
    # Added by issue 26 (item 5) without a schema_version bump, as `parallelism` was.
    reserved_bytes: Bytes = Field(
        description="the reserved estimate the verdict compares with the capacity: peak.total (allocated) + the "
        "scenario's reserve_bytes (the caching allocator's reserve, measured or declared; 0 unless given)"
    )
    communication_bytes: Bytes = Field(description="sent per rank per optimizer step")
    communication: Communication
    lines: list[LedgerLine]


class CheckpointPolicy(Strict):
    description: str
    device_bytes: Bytes = Field(description="extra device bytes on rank 0 while saving")
    host_bytes: Bytes = Field(description="host bytes on rank 0 while saving")
    save_peak_bytes: list[Bytes] = Field(description="per stage 0–3: the device peak while saving")
    device_formula: str
    host_formula: str
    flagged: bool
    flag: str


class Checkpoint(Strict):
    sharded: CheckpointPolicy
    full_params: CheckpointPolicy
    full_state: CheckpointPolicy


def stage_out(st: StageLedger) -> Stage:
    """One stage: the persistent state by class, both peaks, the verdict, communication, the ledger lines."""
    p, c = st.peak, st.communication
    return Stage(
        stage=cast(StageNumber, st.stage),
        persistent=ByClass(**{line.tensor_class: line.bytes for line in st.lines}, total=st.persistent),
        peak=peak_out(p),
        declared_peak=declared_peak_out(p),
        fits=p.fits,
        headroom_bytes=p.headroom,
        reserved_bytes=p.reserved,
        communication_bytes=c.bytes,
        communication=Communication(
            collectives=c.collectives, volume_bytes=c.volume, formula=c.formula.text, evidence=c.evidence
        ),
        lines=[
            LedgerLine(
                **{"class": cast(TensorClass, line.tensor_class)},  # a keyword Python reserves: by its alias
                width=line.width,
                copies=line.copies,
                owners=line.owners,
                elements=line.elements,
                bytes=line.bytes,
                share_bp=share_bp(line.bytes, st.persistent),
                formula=line.formula.text,
                evidence=line.evidence,
                note=line.note,
            )
            for line in st.lines
        ],
    )


def checkpoint_out(e: Estimate) -> Checkpoint:
    """Each checkpoint policy: what saving costs on rank 0's device and host, and the save peak per stage."""
    return Checkpoint(
        **{
            c.policy: CheckpointPolicy(
                description=c.description,
                device_bytes=c.device_bytes,
                host_bytes=c.host_bytes,
                save_peak_bytes=list(c.save_peaks),
                device_formula=c.device_formula.text,
                host_formula=c.host_formula.text,
                flagged=c.flagged,
                flag=c.flag,
            )
            for c in e.checkpoint
        }
    )
