"""The checkpoint ledger: extra bytes on rank 0 when saving, separate from the training peak."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import n
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
    description: str
    device_bytes: int
    host_bytes: int
    save_peaks: tuple[int, ...]  # per stage: persistent + device transient + overhead
    device_formula: str
    host_formula: str
    flagged: bool
    flag: str


def checkpoint_policies(s: Scenario, persistent_totals: tuple[int, ...]) -> tuple[CheckpointPolicy, ...]:
    unit_device = s.unit_params * s.param_bytes
    unit_formula = f"{n(s.unit_params)} × {s.param_bytes} B = {n(unit_device)} B (one unit at a time)"
    full_params_host = s.params * s.param_bytes
    state_width = s.param_bytes + s.master_bytes + s.opt_states * s.opt_bytes
    full_state_host = s.params * state_width
    rows = (
        ("sharded", 0, "0 B beyond the rank's own shards", 0, "0 B: every rank writes its own shards"),
        (
            "full_params",
            unit_device,
            unit_formula,
            full_params_host,
            f"{n(s.params)} × {s.param_bytes} B = {n(full_params_host)} B",
        ),
        (
            "full_state",
            unit_device,
            unit_formula,
            full_state_host,
            f"{n(s.params)} × ({s.param_bytes} + {s.master_bytes} + {s.opt_states} × {s.opt_bytes}) B = "
            f"{n(full_state_host)} B",
        ),
    )
    policies = []
    for policy, device, device_formula, host, host_formula in rows:
        flagged = policy == "full_state" and host > s.capacity_bytes
        flag = (
            f"consolidates {n(host)} B of full state on rank 0, more than one device's {n(s.capacity_bytes)} B: "
            "the plan fits only because state is sharded, so save sharded checkpoints instead"
            if flagged
            else ""
        )
        policies.append(
            CheckpointPolicy(
                policy=policy,
                description=DESCRIPTIONS[policy],
                device_bytes=device,
                host_bytes=host,
                save_peaks=tuple(p + device + s.overhead_bytes for p in persistent_totals),
                device_formula=device_formula,
                host_formula=host_formula,
                flagged=flagged,
                flag=flag,
            )
        )
    return tuple(policies)
