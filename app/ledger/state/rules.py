"""The ownership rules: which stage shards which tensor class, and why.

The production ledger is computed from :data:`PRODUCTION`. A mutant (see ``mutants.py``) is
the same ``Rules`` with exactly one rule changed, so a mutant exercises the real ledger code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CLASSES: tuple[str, ...] = ("parameters", "gradients", "master_weights", "optimizer_states")
STAGES: tuple[int, ...] = (0, 1, 2, 3)

# ZeRO's ownership table (spec "Persistent ledger"): a class is sharded from this stage on.
SHARDED_FROM: dict[str, int] = {
    "parameters": 3,
    "gradients": 2,
    "master_weights": 1,
    "optimizer_states": 1,
}

_ZERO = "Rajbhandari et al., ZeRO (SC'20)"
EVIDENCE_SHARDED: dict[str, str] = {
    "parameters": f"ZeRO stage 3 partitions parameters, P_os+g+p ({_ZERO}, §5.3); FSDP FULL_SHARD",
    "gradients": f"ZeRO stage 2 partitions gradients, P_os+g ({_ZERO}, §5.2)",
    "master_weights": f"ZeRO stage 1 partitions optimizer state, P_os, which includes the FP32 master copy "
    f"({_ZERO}, §5.1)",
    "optimizer_states": f"ZeRO stage 1 partitions optimizer states, P_os ({_ZERO}, §5.1)",
}
EVIDENCE_REPLICATED: dict[str, str] = {
    "parameters": f"stages 0–2 keep the full parameter copy on every rank ({_ZERO}, §5.1–5.2)",
    "gradients": f"stages 0–1 keep full gradients on every rank before the update ({_ZERO}, §5.1)",
    "master_weights": f"plain data parallelism replicates the master copy on every rank ({_ZERO}, §3)",
    "optimizer_states": f"plain data parallelism replicates optimizer states on every rank ({_ZERO}, §3)",
}


@dataclass(frozen=True, slots=True)
class Rules:
    """The accounting rules of the ledger. ``PRODUCTION`` is the spec; mutants change one."""

    # The two tables stay out of the hash (a dict has none) but not out of equality: rules are hashable, so a
    # walk of the schedule can be cached under the rules it was walked with (app/ledger/peak/schedule/walk.py).
    sharded_from: dict[str, int] = field(default_factory=lambda: dict(SHARDED_FROM), hash=False)
    # (class, stage) -> sharded?, overriding ``sharded_from`` for one cell of the table
    overrides: dict[tuple[str, int], bool] = field(default_factory=dict, hash=False)
    master_copy: bool = True
    activations_divided_by_dp: bool = False
    gather_peak: bool = True
    # The schedule-aware peak (app/ledger/peak/schedule/): the reduce-scatter input of the unit just
    # finished is resident, and gradients appear unit by unit during backward (set_to_none=True).
    reduce_scatter_buffer: bool = True
    gradients_fill_during_backward: bool = True
    # The host ledger (app/ledger/state/host.py) counts the pinned staging and swap buffers offload allocates.
    pinned_buffers: bool = True
    # Hierarchical layouts (app/ledger/state/persistent.py): a shard group smaller than D, ZeRO++'s secondary
    # partition and the experts' D ÷ ep decide how a sharded class splits; False splits all over D.
    hierarchical_groups: bool = True

    def sharded(self, tensor_class: str, stage: int) -> bool:
        """Whether ``stage`` splits ``tensor_class`` across the D ranks."""
        override = self.overrides.get((tensor_class, stage))
        if override is not None:
            return override
        return stage >= self.sharded_from[tensor_class]


PRODUCTION = Rules()
