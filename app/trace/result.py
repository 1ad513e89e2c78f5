"""What a trace found: the tracker's categories, the timeline's instants, where the peak happened, the result.

Pure Python (the report reads these without torch); :mod:`app.trace.tracer` fills them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from app.trace.setup import TraceSetup

# The tracker's categories (``_FSDPRefType`` values) under the names the report uses, in report order.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("params", "Sharded Param"),
    ("grads", "Sharded Grad"),
    ("optimizer_states", "OptState"),
    ("unsharded_params", "Unsharded Param"),
    ("all_gather", "All Gather"),
    ("unsharded_grads", "Unsharded Grad"),
    ("reduce_scatter", "Reduce Scatter"),
    ("activations", "Activation"),
    ("temps", "Temp"),
    ("buffers", "Buffer"),
    ("inputs", "Inputs"),
)
CATEGORY_NAMES: tuple[str, ...] = tuple(name for name, _ in CATEGORIES)

Progress = Callable[[str, int, int], None]  # what a trace reports as it goes: (what, done, of)


@dataclass(frozen=True, slots=True)
class Instant:
    """The bytes resident at one named instant of the reported iteration."""

    label: str
    phase: str  # start | forward | loss | backward | optimizer
    unit: str  # the FSDP unit (``root``, ``layers.3``) or "" for a whole-step instant
    parts: dict[str, int]
    total: int
    peak_since_previous: int  # the highest total between the previous instant and this one


@dataclass(frozen=True, slots=True)
class PeakAt:
    """Where the peak of the reported iteration happened."""

    phase: str
    after: str  # the last named instant before it
    unit: str  # the innermost FSDP unit running
    module: str  # the innermost module running
    op: str  # the operator whose output made the peak
    during: str = ""  # the FSDP2 hook running then, if one was (an unshard, a reduce-scatter)


@dataclass(frozen=True, slots=True)
class TraceResult:
    setup: TraceSetup
    torch_version: str
    params: int  # distinct parameter elements of the built model (a tied head counted once)
    tensors: int
    units: tuple[str, ...]  # the FSDP units, root first
    peak: dict[str, int]  # per category, and "total"
    peak_at: PeakAt
    steady: dict[str, int]  # after the optimizer step, per category, and "total"
    step_counter_bytes: int  # inside steady["optimizer_states"]: the optimizer's 0-d step tensors
    first_iteration_peak: int
    timeline: tuple[Instant, ...]
    seconds: dict[str, float] = field(default_factory=dict)
    # the reported iteration's collective buffers in bytes (all_gather, reduce_scatter, all_reduce), before the ring's
    # (G − 1) ÷ G: :mod:`app.trace.collectives`
    collectives: dict[str, int] = field(default_factory=dict)

    @property
    def layers(self) -> list[str]:
        """The decoder layers' units in order (``layers.0`` …, GPT-2's ``h.0`` …): not the root, nor the
        embedding's and the tail's units where a stack makes them units of their own."""
        return [u for u in self.units if u.rpartition(".")[2].isdigit()]
