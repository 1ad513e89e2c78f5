"""The host section: the host ledger per node (offloaded state, pinned buffers, the load peak) and
DeepSpeed's estimator beside it where it models the same thing."""

from __future__ import annotations

from typing import Literal, cast

from pydantic import Field

from app.interop.deepspeed.estimator import Comparison, compare, not_comparable
from app.ledger.estimate import Estimate
from app.ledger.state import host
from app.receipts.strict import Bytes, Count, SignedBytes, Strict

Where = Literal["host", "nvme"]


class HostLine(Strict):
    what: str
    where: Where
    pinned: bool
    bytes: Bytes = Field(description="per rank")
    formula: str
    evidence: str


class HostStage(Strict):
    stage: Count
    per_rank: Bytes = Field(description="host RAM per rank during training")
    per_node: Bytes = Field(description="per_rank × ranks_per_node")
    nvme_per_node: Bytes
    load_peak: Bytes = Field(description="host RAM of the node while the model is built")
    load_formula: str = Field(description="arithmetic only; empty when nothing is built on the host")
    load_note: str
    save_peak: Bytes = Field(description="host RAM of rank 0's node while a checkpoint is saved")
    save_formula: str = Field(description="arithmetic only; empty when each rank saves its own shards")
    save_note: str
    peak: Bytes = Field(description="the larger of load_peak and per_node + save_peak")
    headroom: SignedBytes
    fits: bool
    lines: list[HostLine]


class DeepSpeedEstimate(Strict):
    """DeepSpeed's estimate_zero{2,3}_model_states_mem_needs row for the scenario, beside the lab's figures."""

    stage: Count
    options: str
    gpu_bytes: Bytes
    cpu_bytes: Bytes
    printed: str = Field(description="the row as DeepSpeed prints it (bytes ÷ 2^30, labelled GB)")
    lab_gpu_bytes: Bytes
    lab_cpu_bytes: Bytes
    differences: list[str]


class HostSection(Strict):
    """The host ledger per node: what offload moves off the device, its pinned buffers, the load peak."""

    ranks_per_node: Count
    capacity: Bytes
    stages: list[HostStage]
    deepspeed_estimator: DeepSpeedEstimate | None
    deepspeed_estimator_note: str = Field(description="why DeepSpeed's estimator does not apply; empty when it does")


def _line(x: host.HostLine) -> HostLine:
    return HostLine(what=x.what, where=cast(Where, x.where), pinned=x.pinned, bytes=x.bytes, formula=x.formula.text,
                    evidence=x.evidence)  # fmt: skip


def _stage(st: host.HostStage) -> HostStage:
    return HostStage(
        stage=st.stage,
        per_rank=st.per_rank,
        per_node=st.per_node,
        nvme_per_node=st.nvme_per_node,
        load_peak=st.load_peak,
        load_formula=st.load_formula.text,
        load_note=st.load_note,
        save_peak=st.save_peak,
        save_formula=st.save_formula.text,
        save_note=st.save_note,
        peak=st.peak,
        headroom=st.headroom,
        fits=st.fits,
        lines=[_line(x) for x in st.lines],
    )


def _estimator(ds: Comparison) -> DeepSpeedEstimate:
    return DeepSpeedEstimate(stage=ds.stage, options=ds.options, gpu_bytes=ds.gpu, cpu_bytes=ds.cpu,
                             printed=ds.printed, lab_gpu_bytes=ds.lab_gpu, lab_cpu_bytes=ds.lab_cpu,
                             differences=list(ds.differences))  # fmt: skip


def host_out(e: Estimate) -> HostSection:
    """The host ledger per node and DeepSpeed's estimator beside it where it models the same thing."""
    ledger = e.ledger.host
    ds = compare(e.ledger, ledger)
    return HostSection(
        ranks_per_node=ledger.ranks_per_node,
        capacity=ledger.capacity,
        stages=[_stage(st) for st in ledger.stages],
        deepspeed_estimator=None if ds is None else _estimator(ds),
        deepspeed_estimator_note=not_comparable(e.scenario) or "",
    )
