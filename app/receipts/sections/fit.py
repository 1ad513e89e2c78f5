"""The fit finder's section: the smallest D and largest micro batch per stage, the peak curve over D,
and the least offload on which the run's stage fits."""

from __future__ import annotations

from typing import Literal, cast

from pydantic import Field

from app.ledger.estimate import Estimate
from app.receipts.sections.stages import StageNumber
from app.receipts.strict import Bytes, Count, Strict

Offload = Literal["none", "cpu", "nvme"]


class FitStage(Strict):
    stage: StageNumber
    smallest_dp: int | None = Field(description="the smallest D that fits; null when none within bounds does")
    largest_micro_batch: int | None = Field(description="null when not modelled or not one sequence fits")


class FitPoint(Strict):
    dp: Count
    peaks: list[Bytes] = Field(description="the peak of stages 0–3 at this D")


class CheapestOffload(Strict):
    """The least offload (none, the optimizer to the CPU, both to the CPU, both to NVMe) on which the run's
    stage fits the device and the host memory per node, at the scenario's D."""

    stage: Count
    offload_optimizer: Offload
    offload_param: Offload
    device_peak: Bytes
    host_peak: Bytes


class FitSection(Strict):
    capacity_bytes: Bytes
    stages: list[FitStage]
    micro_batch_modelled: bool
    curve: list[FitPoint]
    cheapest_offload: CheapestOffload | None = Field(description="null: no offload makes the run's stage fit")


def fit_out(e: Estimate) -> FitSection:
    o = e.offload_fit
    cheapest = None
    if o is not None:
        cheapest = CheapestOffload(stage=e.scenario.stage, offload_optimizer=cast(Offload, o.offload_optimizer),
                                   offload_param=cast(Offload, o.offload_param), device_peak=o.device_peak,
                                   host_peak=o.host_peak)  # fmt: skip
    return FitSection(
        capacity_bytes=e.scenario.capacity_bytes,
        stages=[
            FitStage(
                stage=cast(StageNumber, st.stage),
                smallest_dp=st.smallest_dp,
                largest_micro_batch=st.largest_micro_batch,
            )
            for st in e.fit.stages
        ],
        micro_batch_modelled=e.fit.micro_batch_modelled,
        curve=[FitPoint(dp=dp, peaks=list(peaks)) for dp, peaks in e.fit.curve],
        cheapest_offload=cheapest,
    )
