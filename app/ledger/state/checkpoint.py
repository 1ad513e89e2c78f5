"""The checkpoint ledger: extra bytes on rank 0 when saving, separate from the training peak."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import n
from app.ledger.formula import Formula, Remark
from app.ledger.scenario import Scenario

POLICIES: tuple[str, ...] = ("sharded", "full_params", "full_state")
DESCRIPTIONS: dict[str, str] = {
    "sharded": "each rank saves its own shards (torch.distributed.checkpoint, DeepSpeed save_checkpoint)",
    "full_params": "consolidated low-precision weights, gathered one unit at a time onto rank 0",
    "full_state": "parameters + master + optimizer states consolidated onto rank 0",
}


@dataclass(frozen=True, slots=True)
class CheckpointPolicy:
    """Device bytes on rank 0 beyond its persistent state, and host bytes it consolidates."""

    policy: str
    device_bytes: int
    host_bytes: int
    save_peaks: tuple[int, ...]  # per stage: persistent + device transient + overhead
    flagged: bool
    scenario: Scenario

    @property
    def description(self) -> str:
        return DESCRIPTIONS[self.policy]

    @property
    def device_formula(self) -> Formula:
        s = self.scenario
        if self.policy == "sharded":
            return Formula.words("0 B beyond the rank's own shards")
        return Formula.of(f"{n(s.unit_params)} × {s.param_bytes} B = {n(self.device_bytes)} B",
                          Remark("one unit at a time"))  # fmt: skip

    @property
    def host_formula(self) -> Formula:
        s = self.scenario
        if self.policy == "sharded":
            return Formula.words("0 B: every rank writes its own shards")
        model = f"{n(s.trainable_params)} × {s.param_bytes} B" + (
            f" + {n(s.frozen_params)} × {s.frozen_bytes} B (frozen)" if s.frozen_params else "")  # fmt: skip
        if self.policy == "full_params":
            return Formula.of(f"{model} = {n(self.host_bytes)} B")
        if s.frozen_params:
            return Formula.of(f"{model} + {n(s.trainable_params)} × ({s.master_bytes} + {s.opt_states} × "
                              f"{s.opt_bytes}) B = {n(self.host_bytes)} B")  # fmt: skip
        return Formula.of(
            f"{n(s.params)} × ({s.param_bytes} + {s.master_bytes} + {s.opt_states} × {s.opt_bytes}) B = "
            f"{n(self.host_bytes)} B"
        )

    @property
    def flag(self) -> str:
        if not self.flagged:
            return ""
        return (
            f"consolidates {n(self.host_bytes)} B of full state on rank 0, more than one device's "
            f"{n(self.scenario.capacity_bytes)} B: the plan fits only because state is sharded, "
            "so save sharded checkpoints instead"
        )


def checkpoint_policies(s: Scenario, persistent_totals: tuple[int, ...]) -> tuple[CheckpointPolicy, ...]:
    unit_device = s.unit_params * s.param_bytes
    model = s.trainable_params * s.param_bytes + s.frozen_params * s.frozen_bytes
    full_state_host = model + s.trainable_params * (s.master_bytes + s.opt_states * s.opt_bytes)
    policies = []
    for policy, device, host in (
        ("sharded", 0, 0),
        ("full_params", unit_device, model),
        ("full_state", unit_device, full_state_host),
    ):
        peaks = tuple(p + device + s.overhead_bytes for p in persistent_totals)
        flagged = policy == "full_state" and host > s.capacity_bytes
        policies.append(CheckpointPolicy(policy, device, host, peaks, flagged, s))
    return tuple(policies)
