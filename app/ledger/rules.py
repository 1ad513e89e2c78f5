"""The ownership rules: which stage shards which tensor class, and why.

The production ledger is computed from :data:`PRODUCTION`. A mutant (see ``mutants.py``) is
the same ``Rules`` with exactly one rule changed, so a mutant exercises the real ledger code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CLASSES: tuple[str, ...] = ("parameters", "gradients", "master_weights", "optimizer_states")
STAGES: tuple[int, ...] = (0, 1, 2, 3)
CLASS_INDEX: dict[str, int] = {c: i for i, c in enumerate(CLASSES)}

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

    sharded_from: dict[str, int] = field(default_factory=lambda: dict(SHARDED_FROM))
    # (class, stage) -> sharded?, overriding ``sharded_from`` for one cell of the table
    overrides: dict[tuple[str, int], bool] = field(default_factory=dict)
    master_copy: bool = True
    activations_divided_by_dp: bool = False
    gather_peak: bool = True
    # Per stage, per class (CLASSES order): sharded? Derived from the two fields above, once.
    table: tuple[tuple[bool, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        table = tuple(tuple(self._rule(c, stage) for c in CLASSES) for stage in STAGES)
        object.__setattr__(self, "table", table)  # frozen: set once, here

    def _rule(self, tensor_class: str, stage: int) -> bool:
        override = self.overrides.get((tensor_class, stage))
        if override is not None:
            return override
        return stage >= self.sharded_from[tensor_class]

    def sharded(self, tensor_class: str, stage: int) -> bool:
        return self.table[stage][CLASS_INDEX[tensor_class]]

    def owners(self, tensor_class: str, stage: int, dp: int) -> int:
        """Ranks that share one copy of ``tensor_class`` at ``stage``."""
        return dp if self.sharded(tensor_class, stage) else 1

    def evidence(self, tensor_class: str, stage: int) -> str:
        if self.sharded(tensor_class, stage):
            return EVIDENCE_SHARDED[tensor_class]
        return EVIDENCE_REPLICATED[tensor_class]

    def cells_differing_from(self, other: Rules) -> frozenset[tuple[int, str]]:
        """The (stage, class) cells of the persistent ledger whose rule differs between the two.

        A persistent line depends on the rules only through ``sharded`` and, for the master
        copy, ``master_copy``; every other field of ``Rules`` acts on the peak, which is always
        recomputed.
        """
        cells = {(stage, c) for stage in STAGES for c in CLASSES if self.sharded(c, stage) != other.sharded(c, stage)}
        if self.master_copy != other.master_copy:
            cells.update((stage, "master_weights") for stage in STAGES)
        return frozenset(cells)

    def peak_stages_differing_from(self, other: Rules) -> frozenset[int]:
        """The stages whose training peak follows different rules: every stage when activations
        are divided differently, stage 3 when the gather is counted differently (stages 0–2 hold
        full parameters and gather nothing under any rules). Every other stage's peak comes out
        the same under both rules (``rederive`` relies on it), which is why ``Peak.gather_counted``
        says True below stage 3 whatever the gather rule."""
        if self.activations_divided_by_dp != other.activations_divided_by_dp:
            return frozenset(STAGES)
        if self.gather_peak != other.gather_peak:
            return frozenset({3})
        return frozenset()


PRODUCTION = Rules()
