"""What the schedule answers: the instants of one step, each a list of entries, and the worst of them.

An :class:`Entry` is one thing resident at an instant (its category, bytes and formula); an
:class:`Instant` the bytes per category at one named moment of the step; a :class:`Schedule` one
stage's instants and its peak. The categories sum into the receipt's five peak parts (:data:`PARTS`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# What an entry holds, and the part of the receipt's peak it is summed into.
CATEGORIES: dict[str, str] = {
    "state": "persistent",  # parameters, master weights, optimizer states (the stage's persistent lines)
    "gradients": "persistent",  # gradients resident on the rank (sharded or whole), as many as exist yet
    "unsharded_params": "gather",  # unsharded parameters in the all-gather width
    "all_gather": "gather",  # all-gather outputs in flight (a prefetched unit)
    "unsharded_grads": "buckets",  # whole gradients waiting for their reduce-scatter
    "reduce_scatter": "buckets",  # the reduce-scatter input of the unit just finished
    "buckets": "buckets",  # the declared communication buckets
    "activations": "activations",  # saved for backward
    "temporaries": "activations",  # the op at hand: loss, backward, optimizer
    "overhead": "overhead",  # the declared runtime overhead
}
PARTS: tuple[str, ...] = ("persistent", "gather", "buckets", "activations", "overhead")
# An instant keeps its bytes as one tuple in CATEGORIES' order: a category's place in it, and a part's places.
CATEGORY_INDEX: dict[str, int] = {c: i for i, c in enumerate(CATEGORIES)}
_PART_INDICES: dict[str, tuple[int, ...]] = {
    part: tuple(i for i, c in enumerate(CATEGORIES) if CATEGORIES[c] == part) for part in PARTS
}

# Stage 3 with wrap = embed-tail (Accelerate 1.15.0's units; torchtitan 0.3.0 carves alike), checked against
# transformers' Llama traced with Accelerate's own fsdp2_prepare_model (docs/fidelity.md, "The stacks").
CARVED_NOTE = (
    " Units as Accelerate carves them (wrap = embed-tail): the embedding alone, resharded after forward and "
    "prefetched again by layer 0's backward; the final norm with the head, kept from forward and all-gathered "
    "a second time in backward for the norm; the root owns no parameter."
)
# A tied model under embed-tail: Accelerate makes one unit of the final norm, the embedding and the head, kept
# unsharded from forward: what the root recipe's root holds (the root itself then owns no parameter).
EMBED_TAIL_NOTE = (
    " Units as Accelerate carves a tied model (wrap = embed-tail): the final norm, the embedding and the head in "
    "one unit kept unsharded from forward, walked as the root recipe's root; the root owns no parameter."
)
NOTES: dict[int, str] = {
    3: "FSDP2's schedule: fully_shard per decoder layer and at the root, the root not resharded after forward, "
    "one unit prefetched in backward (P with explicit prefetching), one reduce-scatter input in flight, "
    "zero_grad(set_to_none=True), the optimizer one tensor at a time; checked against FSDPMemTracker traces "
    "(docs/fidelity.md). DeepSpeed ZeRO-3 schedules its own prefetch and reduce buckets (declare them as "
    "bucket_bytes). Not counted: the allocator's rounding, reserve and fragmentation, the CUDA context, NCCL "
    "buffers, kernel workspaces.",
    2: "An approximation: ZeRO-2 keeps whole parameters, so nothing is gathered; each layer's gradients are "
    "computed whole and reduce-scattered as the layer finishes (the reduce-scatter input held in the reduce "
    "width until the next layer's, as FSDP2 does); the rank keeps its shard. DeepSpeed's reduce buckets are "
    "the declared bucket_bytes.",
    1: "An approximation: whole parameters and whole gradients, which fill layer by layer during backward "
    "(set_to_none=True); ZeRO-1 reduces them after backward, in the declared bucket_bytes. With a compute "
    "width below the parameter width (autocast), per-op casts of the weights are not counted.",
    0: "An approximation: whole parameters and whole gradients, which fill layer by layer during backward "
    "(set_to_none=True); DDP's gradient buckets are the declared bucket_bytes. With a compute width below the "
    "parameter width (autocast), per-op casts of the weights are not counted.",
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One thing resident at an instant: its category (a key of :data:`CATEGORIES`), bytes and formula.

    The formula is spelled on demand (a receipt asks; the kill lists and checks only add bytes)."""

    category: str
    what: str
    bytes: int
    spell: Callable[[], str] = field(repr=False, compare=False)

    @property
    def formula(self) -> str:
        return self.spell()

    @property
    def part(self) -> str:
        return CATEGORIES[self.category]


@dataclass(frozen=True, slots=True)
class Instant:
    """What is resident at one named instant of the step, and its total (before contingency).

    ``sums`` holds the bytes of each category (:data:`CATEGORIES`' order); the entries, each with its
    formula, are spelled on demand (the checks, kill lists and fit finder need only the sums)."""

    # stable keys: forward-layer-<k>, end-of-forward, loss-backward, head-backward,
    # backward-layer-<k>[-unshard|-done], root-gradients, root-post-backward, optimizer-step
    key: str
    name: str
    phase: str  # forward | loss | backward | optimizer
    total: int
    sums: tuple[int, ...]
    spell: Callable[[int], tuple[Entry, ...]] = field(repr=False, compare=False)  # the walk's, shared by its instants
    index: int = field(default=0, compare=False)  # this instant's place in the walk, for ``spell``

    @property
    def entries(self) -> tuple[Entry, ...]:
        return self.spell(self.index)

    def bytes_of(self, *categories: str) -> int:
        return sum(self.sums[CATEGORY_INDEX[c]] for c in categories)

    def part(self, part: str) -> int:
        """The bytes of the receipt's peak part ``part`` (persistent, gather, buckets, activations, overhead)."""
        return sum(self.sums[i] for i in _PART_INDICES[part])


@dataclass(frozen=True, slots=True)
class Schedule:
    """One stage's instants and the worst of them (the first of equal totals, in step order)."""

    stage: int
    instants: tuple[Instant, ...]
    peak: Instant
    note: str
