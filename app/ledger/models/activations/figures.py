"""The activation ledger's values: the per-rank figures of one micro batch, and the input error."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.formula import Formula
from app.ledger.models.activations.entries import Saved


class ActivationInputError(ValueError):
    """An activation input out of bounds; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True, slots=True)
class ActivationLedger:
    """Activation bytes per rank for one micro batch, and what recomputation costs.

    ``total_bytes`` = ``in_flight`` × (``layers`` × ``per_layer_bytes`` + ``embedding_bytes``) +
    ``working_set_bytes`` + ``head_bytes`` + ``logits_bytes`` + ``all_to_all_bytes`` + ``ring_kv_bytes``, where
    ``layers`` are
    the decoder layers on the pipeline stage and a stage without the embedding or the head has 0 for it
    (pp = 1: one stage with both, one micro batch in flight). Under ``full``, ``per_layer_bytes`` is the checkpointed
    layer input and ``working_set_bytes`` one layer's complete saved set during its recompute;
    otherwise the working set is 0. ``recompute_flops`` is the extra forward FLOPs as an exact
    fraction (numerator, denominator) of a step without recomputation (forward + backward).
    """

    policy: str
    per_layer_bytes: int
    layers: int
    working_set_bytes: int
    embedding_bytes: int
    head_bytes: int
    logits_bytes: int
    total_bytes: int
    recompute_flops: tuple[int, int]
    formula: Formula
    assumptions: str
    saved: tuple[Saved, ...]  # one layer's complete saved set (what `none` keeps; `core`: what selective drops)
    source: str = "modelled"
    # Pipeline parallelism: the stage budgeted (only, first or last), and how many micro batches' activations
    # it keeps at once under 1F1B (the first stage: pp; every other: fewer, the last one).
    stage: str = "only"
    in_flight: int = 1
    all_to_all_bytes: int = 0  # expert parallelism: one MoE layer's dispatch send and receive buffers
    # context parallelism: ring attention's all-gathered K and V of the layer in flight (and its send buffer); the
    # other figures are already the local sequence's (s ÷ cp tokens)
    ring_kv_bytes: int = 0
    cp: int = 1
    # full with every > 1: only layers 0, every, 2·every, … are checkpointed (per_layer_bytes each); the others keep
    # their whole saved set (full_layer_bytes each)
    every: int = 1
    full_layer_bytes: int = 0
    # Two kinds of layer (gemma3_text from a sequence longer than its window): the model's layers N − 1, 2N − 1, …
    # (``alt_every`` = N) attend globally and keep the ``alt_`` figures, the others through the window the figures
    # above; 0: every layer alike. ``first_layer``: the stage's first layer in the model (pp > 1, the last stage).
    alt_every: int = 0
    first_layer: int = 0
    # or (deepseek_v3) the model's first ``alt_first`` layers, its dense ones, keep the ``alt_`` figures
    alt_first: int = 0
    first_kinds: tuple[str, str] = ("MoE", "dense")  # with alt_first: the names of (the others, the first layers)
    alt_per_layer_bytes: int = 0
    alt_full_layer_bytes: int = 0
    alt_working_set_bytes: int = 0
    # both at once (gemma3_text with a frozen prefix): the first ``alt_first`` layers are frozen, each of its kind;
    # (kept, whole set, working set) of a frozen sliding-window layer and of a frozen global one
    frozen_kinds: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None

    def checkpointed(self, k: int) -> int:
        """How many of layers 0 … k − 1 keep ``per_layer_bytes``: all of them, or under ``full`` every
        ``every``-th from layer 0 (⌈k ÷ every⌉)."""
        return -(-k // self.every) if self.policy == "full" else k

    def is_alt(self, k: int) -> bool:
        """Whether the stage's layer k is of the second kind (a global layer of gemma3_text, a dense one of
        deepseek_v3, a frozen one)."""
        if self.alt_every:
            return (self.first_layer + k + 1) % self.alt_every == 0
        return self.first_layer + k < self.alt_first

    def is_frozen(self, k: int) -> bool:
        """Whether the stage's layer k is one of gemma3_text's frozen first layers (:attr:`frozen_kinds`)."""
        return self.frozen_kinds is not None and self.first_layer + k < self.alt_first

    def figures(self, k: int) -> tuple[int, int, int]:
        """(kept, whole set, working set) of the stage's layer k's kind."""
        if self.frozen_kinds is not None and self.is_frozen(k):
            return self.frozen_kinds[self.is_alt(k)]
        if self.is_alt(k):
            return self.alt_per_layer_bytes, self.alt_full_layer_bytes, self.alt_working_set_bytes
        return self.per_layer_bytes, self.full_layer_bytes, self.working_set_bytes

    def kept(self, k: int) -> int:
        """Bytes the stage's layer k keeps for backward: a checkpointed layer its checkpoint, another its whole set."""
        checkpointed = self.policy != "full" or k % self.every == 0
        kept, whole, _ = self.figures(k)
        return kept if checkpointed else whole

    def recomputed(self, k: int | None = None) -> int:
        """What the stage's layer k (None: a layer of the first kind, every layer's when all are alike) rebuilds in its
        backward beside what it keeps: under full and op its kind's working set, under selective what it dropped (the
        layer then holds its whole set again)."""
        first = (self.per_layer_bytes, self.full_layer_bytes, self.working_set_bytes)
        kept, whole, working = first if k is None else self.figures(k)
        return working if self.policy in ("full", "op") else whole - kept

    def largest_working(self) -> int:
        """The largest working set any of the stage's layers rebuilds: one layer recomputes at a time."""
        return max(self.working(k) for k in range(self.layers))

    def kept_before(self, k: int) -> int:
        """Bytes the stage's layers 0 … k − 1 keep: checkpointed ones their checkpoint, others their whole set; with
        two kinds of layer, layer by layer (≤ 1,024 of them)."""
        if self.alt_every or (self.alt_first and self.every > 1):
            return sum(self.kept(j) for j in range(k))
        if self.alt_first:  # every layer checkpointed alike: the dense run first, then the others
            alt = max(0, min(k, self.alt_first - self.first_layer))
            return alt * self.alt_per_layer_bytes + (k - alt) * self.per_layer_bytes
        c = self.checkpointed(k)
        return c * self.per_layer_bytes + (k - c) * self.full_layer_bytes

    def working(self, k: int) -> int:
        """What the stage's layer k rebuilds in its backward when it recomputes (its kind's working set)."""
        return self.figures(k)[2]

    def recompute_fraction_text(self, places: int = 3) -> str:
        """The recompute fraction as a decimal, rounded half up to ``places`` digits (e.g. "0.326")."""
        num, den = self.recompute_flops
        scale = 10**places
        q = (2 * num * scale + den) // (2 * den)
        if places == 0:
            return str(q)
        return f"{q // scale}.{q % scale:0{places}d}"
