"""The schedule-aware peak: what one rank holds at each named instant of a training step, and the worst.

The seed's declared peak adds maxima that are never alive together (every gradient *and* every
activation *and* the largest gather). A real step holds different things at different instants,
and its peak is one instant. With a model the lab knows the layer structure, so it can walk the
step the way PyTorch's FSDP2 schedules memory (``torch/distributed/fsdp/_fully_shard``: the
parameter group's ``unshard`` / ``wait_for_unshard`` / ``reshard``, ``pre_backward`` with
``_backward_prefetch``, ``post_backward`` with ``foreach_reduce`` and its
``reduce_scatter_states``; checked against ``FSDPMemTracker`` traces in ``docs/fidelity.md``).

The instants (each a list of :class:`Entry` lines, bytes with their formula):

- **forward at layer k** (stage 3; k = 0, 1 and L − 1: the total is linear in k in between): the
  layer's all-gather copy-out, its output beside its unsharded parameters, with the previous unit's
  all-gather output still held (``wait_for_unshard`` frees it after the next copy-out; for layer 0
  the root's), the activations of the layers before it and the hidden state entering it;
- **end of forward**: the model state (no gradients: ``zero_grad(set_to_none=True)``), the root
  unit (embedding, final norm, head) still unsharded — FSDP2 does not reshard the root after
  forward, backward needs the head first —, with ``reshard_after_forward = 0`` every layer
  unsharded too, every saved activation, and the logits in the activation width;
- **loss backward** (``_log_softmax_backward_data``): the same state, the saved activations with the
  loss's saved log-probabilities (s·b·V in the loss width) instead of the logits, and two more
  logits-sized tensors of the loss width (the gradient of the log-probabilities and of the logits);
- **backward at the head**: the root's pre-backward has prefetched the last layer; the logits' gradient
  in the activation width, the head's and final norm's gradients, every saved activation;
- **backward at layer k** (the worst k; between k = max(1, P) and L − 2 the total is linear in k, so
  the candidates are the ends and the first P + 1 layers), three moments of it: the all-gather
  copy-out of its pre-backward (``…-unshard``: its own all-gather output beside its unsharded
  parameters, nothing computed yet), early (below) and done (``…-done``: its activations freed, all its
  weight gradients computed). Early: the sharded gradients of the layers
  after k (they appear layer by layer), the root and layer k unsharded (with
  ``reshard_after_forward = 0`` layers 0 … k), the all-gather output of the layer prefetched for
  the next step of backward (FSDP2's implicit backward prefetch of one unit, or P), the
  reduce-scatter input of layer k + 1 (a whole padded layer in the reduce width: FSDP2 keeps one
  in flight until the next post-backward), the head's and final norm's unsharded gradients (held
  until the root's post-backward, at the very end), the activations of layers 0 … k (under full
  recomputation: their checkpointed inputs and layer k's recomputed set), and the temporaries of
  the layer's backward: its first weight gradient (the MLP's output projection), the activation
  gradient flowing in (s·b·h) and the widest pair of op gradients (2·s·b·i for the MLP, 2·a·s²·b for
  materialised attention scores);
- **backward at the embedding** (stages 2–3): every layer's gradients, the root still unsharded with
  its whole gradients, layer 0's reduce-scatter input still in flight;
- **root post-backward**: all layers' sharded gradients, the root's unsharded gradients and its
  reduce-scatter input (the layer's and the root's unsharded parameters are freed by then);
- **optimizer step**: the model state with every gradient, and the step's temporaries (AdamW one
  tensor at a time: two temporaries of the largest tensor's shard, ``sqrt`` and the denominator).

Stage 3 is FSDP2's schedule as written. Stages 0–2 reuse the instants where they hold (whole
parameters, so nothing is gathered; gradients fill during backward; ZeRO-2 reduce-scatters each
layer as it finishes) and say where they are an approximation (:data:`NOTES`).

The saved activations are the lab's activation ledger (``app/ledger/models/activations.py``) with the
scenario's ``norms``: a trace on CPU fake tensors runs RMSNorm unfused, as transformers writes it.

Every byte count is an exact integer. The declared inputs stay what they are: buckets and
overhead are resident at every instant, the contingency is on top of the worst instant. A typed
(measured) activation figure scales every instant's saved activations by measured ÷ modelled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache, partial

from app.ledger.arithmetic import ceil_div, n
from app.ledger.models.architecture import GPT_FAMILIES, Architecture
from app.ledger.models.defaults import ModelQuery, model_defaults
from app.ledger.models.fsdp2 import padded_rows_elements
from app.ledger.models.inventory import Tensor
from app.ledger.models.reference import resolve
from app.ledger.scenario import Scenario
from app.ledger.state.persistent import LedgerLine, ledger_line
from app.ledger.state.rules import CLASSES, Rules

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
_INDEX: dict[str, int] = {c: i for i, c in enumerate(CATEGORIES)}
_ROW_ORDER = ("state", "gradients", "unsharded_params", "all_gather", "unsharded_grads", "reduce_scatter", "buckets",
              "activations", "temporaries", "overhead")  # fmt: skip
assert tuple(CATEGORIES) == _ROW_ORDER  # _sums builds its rows in this order
_PART_INDICES: dict[str, tuple[int, ...]] = {
    part: tuple(i for i, c in enumerate(CATEGORIES) if CATEGORIES[c] == part) for part in PARTS
}

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
    spell: Callable[[], tuple[Entry, ...]] = field(repr=False, compare=False)

    @property
    def entries(self) -> tuple[Entry, ...]:
        return self.spell()

    def bytes_of(self, *categories: str) -> int:
        return sum(self.sums[_INDEX[c]] for c in categories)

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


# --------------------------------------------------------------------------- when there is a schedule


def not_schedulable(s: Scenario) -> str | None:
    """Why ``s`` has no schedule to walk (its peak is then the declared one), or None when it has one."""
    if not s.model:
        return "no model: without the layer structure there is no schedule to walk"
    if s.source_of("params") != "from config" or s.source_of("unit_params") != "from config":
        return "params or unit_params typed: the model's layer structure no longer describes the scenario"
    if s.tp != 1:
        return "tensor parallelism: the schedule walks one data-parallel mesh (tp = 1)"
    if s.pp != 1:
        return "pipeline parallelism: the schedule walks one whole model per rank (pp = 1)"
    if s.ep != 1:
        return "expert parallelism: the schedule walks every expert on every rank (ep = 1)"
    if s.shard_group != s.dp or s.hpz != 1:
        return "a shard group or hpZ: the schedule walks one flat mesh of D ranks"
    return None


# --------------------------------------------------------------------------- the model's units


@dataclass(frozen=True, slots=True)
class Layout:
    """The model's FSDP2 units at one D: the root (embedding, final norm, head) and the layers."""

    layers: int
    layer_params: int
    root_params: int
    head_grad_params: int  # what the head's backward gives a gradient to: final norm + head (tied: the embedding)
    layer_shard: int  # FSDP2: one layer's elements per rank, dim 0 padded to a multiple of D
    root_shard: int
    layer_unsharded: int  # D × layer_shard: what an all-gather materialises, padding included
    root_unsharded: int
    padded_total: int  # the whole model's elements per rank
    largest_tensor: int  # elements of the largest parameter tensor
    largest_tensor_shard: int  # its FSDP2 rows per rank
    largest_tensor_name: str
    mlp_out_params: int  # the MLP's output projection (one expert's): the first weight gradient of a layer's backward


def _shard(tensors: tuple[Tensor, ...], dp: int) -> int:
    return sum(padded_rows_elements(t, dp) * t.count for t in tensors)


@lru_cache(maxsize=4096)
def layout(model: str, dp: int, padded: bool = True) -> Layout:
    """The units of ``model`` sharded over ``dp`` ranks (cached: the fit finder asks at many D).

    ``padded=False`` gives the same units without FSDP2's dim-0 padding (shards ⌈x ÷ D⌉, units
    whole): a lower bound of every term that never grows with D, for the fit finder."""
    inv = resolve(model).inventory
    arch = inv.architecture
    layer = inv.units[1]
    root_tensors = inv.embed.tensors + inv.final.tensors
    largest = max((t for u in (inv.embed, layer, inv.final) for t in u.tensors), key=lambda t: t.numel)
    root_params = inv.embed.params + inv.final.params
    head = arch.vocab * arch.hidden if arch.tied_embeddings else 0
    if padded:
        layer_shard, root_shard = _shard(layer.tensors, dp), _shard(root_tensors, dp)
        layer_whole, root_whole = dp * layer_shard, dp * root_shard
        total, largest_shard = root_shard + arch.layers * layer_shard, padded_rows_elements(largest, dp)
    else:
        layer_shard, root_shard = ceil_div(layer.params, dp), ceil_div(root_params, dp)
        layer_whole, root_whole = layer.params, root_params
        total, largest_shard = ceil_div(inv.params, dp), ceil_div(largest.numel, dp)
    return Layout(
        layers=arch.layers,
        layer_params=layer.params,
        root_params=root_params,
        head_grad_params=inv.final.params + head,
        layer_shard=layer_shard,
        root_shard=root_shard,
        layer_unsharded=layer_whole,
        root_unsharded=root_whole,
        padded_total=total,
        largest_tensor=largest.numel,
        largest_tensor_shard=largest_shard,
        largest_tensor_name=largest.name,
        mlp_out_params=arch.hidden * arch.intermediate,
    )


# --------------------------------------------------------------------------- activation terms


@dataclass(frozen=True, slots=True)
class ActivationTerms:
    """The activation ledger's parts as the instants need them, and the backward's temporaries."""

    per_layer: int  # a layer's saved set under the policy (full: its checkpointed input)
    recomputed: int  # during a layer's backward: its recomputed set (full: all of it; selective: the core)
    head: int  # the final norm's saved tensors (the LM head's input)
    extra_residual: int  # the residual-stream tensor outside the per-layer counts (the final norm's input)
    logits_saved: int  # the loss's saved log-probabilities: s·b·V in the loss width
    logits_out: int  # the head's output: s·b·V in the activation width
    loss_temporaries: int  # 2·s·b·V in the loss width during the loss backward
    activation_grad: int  # s·b·h in the activation width: the gradient flowing between layers
    op_pair: int  # the widest pair of op gradients inside a layer's backward
    op_pair_formula: str
    modelled_total: int  # the activation ledger's total (the declared peak's modelled activations)
    vocab: int


def activation_terms(s: Scenario) -> ActivationTerms:
    return _activation_terms(s.model, s.seq_len, s.micro_batch, s.act_bytes, s.act_policy, s.logits_bytes, s.norms)


@lru_cache(maxsize=1024)
def _activation_terms(model: str, seq: int, b: int, w: int, policy: str, lw: int, norms: str) -> ActivationTerms:
    # tp = pp = ep = 1: not_schedulable(s) is None
    md = model_defaults(ModelQuery(model, seq, b, w, policy, logits_bytes=lw, norms=norms))
    a = md.activations
    arch = md.model.architecture
    full = sum(x.bytes for x in a.saved)  # tp = 1: one layer's complete saved set
    recomputed = a.working_set_bytes if a.policy == "full" else full - a.per_layer_bytes
    tokens = seq * b
    return ActivationTerms(
        per_layer=a.per_layer_bytes,
        recomputed=recomputed,
        head=a.head_bytes,
        extra_residual=a.embedding_bytes,
        logits_saved=a.logits_bytes,
        logits_out=tokens * arch.vocab * w,
        loss_temporaries=2 * tokens * arch.vocab * lw,
        activation_grad=tokens * arch.hidden * w,
        op_pair=_op_pair(arch, seq, b) * w,
        op_pair_formula=_op_pair_formula(arch, seq, b, w),
        modelled_total=a.total_bytes,
        vocab=arch.vocab,
    )


def _mlp_tokens(arch: Architecture, tokens: int) -> int:
    """Tokens through one MLP at a time: all of them, or one expert's balanced share ⌈k·s·b ÷ E⌉."""
    if arch.experts:
        return ceil_div(arch.experts_per_token * tokens, arch.experts)
    return tokens


def _op_pair(arch: Architecture, seq: int, b: int) -> int:
    mlp = 2 * _mlp_tokens(arch, seq * b) * arch.intermediate
    scores = 2 * arch.heads * seq * seq * b if arch.family in GPT_FAMILIES else 0
    return max(mlp, scores)


def _op_pair_formula(arch: Architecture, seq: int, b: int, w: int) -> str:
    mlp_tokens = _mlp_tokens(arch, seq * b)
    tokens = f"⌈{arch.experts_per_token}·{n(seq * b)} ÷ {arch.experts}⌉" if arch.experts else f"{n(seq)}·{b}"
    mlp = f"2·{tokens}·{n(arch.intermediate)}"
    if arch.family in GPT_FAMILIES and 2 * arch.heads * seq * seq * b > 2 * mlp_tokens * arch.intermediate:
        return f"2·a·s²·b × {w} B = 2·{arch.heads}·{n(seq)}²·{b} × {w} B (the attention scores' gradients)"
    return f"2·s·b·i × {w} B = {mlp} × {w} B (the MLP's gate and up gradients)"


# --------------------------------------------------------------------------- the instants


class _Builder:
    """Entries of one instant; without ``detail`` only their total is kept (the fit finder's use)."""

    def __init__(self, detail: bool) -> None:
        self.detail = detail
        self.entries: list[Entry] = []
        self.total = 0

    def add(self, category: str, what: str, value: int, formula: Callable[[], str]) -> None:
        if value == 0:
            return
        self.total += value
        if self.detail:
            self.entries.append(Entry(category, what, value, formula))


@dataclass(frozen=True, slots=True)
class _Widths:
    grads: int  # the gradient line's width
    gather: int
    reduce: int
    grads_sharded: bool
    state_width: int  # bytes per element of the sharded non-gradient classes (stage 3 padding)


def schedule(
    s: Scenario,
    stage: int,
    lines: tuple[LedgerLine, ...],
    rules: Rules,
    *,
    detail: bool = True,
    padded: bool = True,
) -> Schedule:
    """The instants of one step at ``stage`` for ``s`` (which must be schedulable: see
    :func:`not_schedulable`), with ``lines`` the stage's persistent lines under ``rules``.

    The numbers come from :func:`_sums` (closed forms, fast: the fit finder and the kill lists walk many
    schedules); each instant's entries with their formulas from :class:`_Walk`, spelled once on demand
    (``detail=True`` walks it at once). A property test holds the two equal, instant by instant and
    category by category. ``padded=False`` leaves FSDP2's dim-0 padding out (the fit finder's lower bound)."""
    if detail:
        return _Walk(s, stage, lines, rules, True, padded).run()
    lazy = _Lazy(s, stage, lines, rules, padded)
    instants = tuple(
        Instant(key, name, phase, sum(sums), sums, lazy.entries_of(key))
        for key, name, phase, sums in _sums(s, stage, lines, rules, padded)
    )
    peak = max(instants, key=lambda i: i.total)  # max() keeps the first of equals: step order
    return Schedule(stage, instants, peak, NOTES[stage])


def worst_total(s: Scenario, stage: int, lines: tuple[LedgerLine, ...], rules: Rules, *, padded: bool = True) -> int:
    """The worst instant's total (before contingency), nothing else built: the fit finder's question."""
    return max(sum(sums) for _, _, _, sums in _sums(s, stage, lines, rules, padded))


def saved_activations(s: Scenario, rules: Rules) -> dict[str, int]:
    """Each instant's saved activations, by key. They do not depend on the stage (only which instants a
    stage walks does), so stage 3's walk, which has every key a stage can have, answers for all four."""
    lines = tuple(ledger_line(s, 3, c, rules) for c in CLASSES)
    column = _INDEX["activations"]
    return {key: sums[column] for key, _, _, sums in _sums(s, 3, lines, rules, True)}


class _Lazy:
    """The detailed walk of one schedule's instants, each walked the first time its entries are asked for:
    the page spells only the worst instant's, a receipt every one."""

    def __init__(self, s: Scenario, stage: int, lines: tuple[LedgerLine, ...], rules: Rules, padded: bool) -> None:
        self.args = (s, stage, lines, rules, padded)
        self.walk: _Walk | None = None
        self.by_key: dict[str, tuple[Entry, ...]] = {}

    def entries_of(self, key: str) -> Callable[[], tuple[Entry, ...]]:
        def spell() -> tuple[Entry, ...]:
            if key not in self.by_key:
                if self.walk is None:
                    s, stage, lines, rules, padded = self.args
                    self.walk = _Walk(s, stage, lines, rules, True, padded)
                self.by_key[key] = self.walk.at(key).entries
            return self.by_key[key]

        return spell


def _times(formula: Callable[[], str], measured: int, modelled: int, value: int) -> Callable[[], str]:
    """A modelled activation's formula scaled by a typed measurement (measured ÷ modelled) to ``value``."""
    return lambda: f"⌈({formula()}) × {n(measured)} ÷ {n(modelled)}⌉ (measured ÷ modelled) = {n(value)} B"


def _divided(formula: Callable[[], str], dp: int, value: int) -> Callable[[], str]:
    """The divide-activations-by-dp mutant's formula: ``formula`` ÷ D = ``value``."""
    return lambda: f"({formula()}) ÷ {n(dp)} = {n(value)} B"


class _Walk:
    def __init__(
        self, s: Scenario, stage: int, lines: tuple[LedgerLine, ...], rules: Rules, detail: bool, padded: bool
    ) -> None:
        self.s, self.stage, self.rules, self.detail = s, stage, rules, detail
        self.lines = lines
        self.u = layout(s.model, s.dp, padded)
        self.a = activation_terms(s)
        grad = next(line for line in lines if line.tensor_class == "gradients")
        self.grad_line = grad
        self.w = _Widths(
            grads=grad.width,
            gather=s.gather_bytes,
            reduce=s.reduce_bytes,
            grads_sharded=grad.sharded,
            state_width=sum(ln.width * ln.copies for ln in lines if ln.tensor_class != "gradients" and ln.sharded),
        )
        self.fsdp2 = stage == 3
        self.scale: tuple[int, int] | None = None
        if s.source_of("activation_bytes") == "measured":
            self.scale = (s.activation_bytes, self.a.modelled_total)

    # ------------------------------------------------------------------ shared pieces
    def new(self) -> _Builder:
        return _Builder(self.detail)

    def state(self, out: _Builder) -> None:
        lines = [ln for ln in self.lines if ln.tensor_class != "gradients" and ln.bytes]
        total = sum(ln.bytes for ln in lines)
        out.add(
            "state",
            "parameters, master weights and optimizer states (the persistent lines)",
            total,
            lambda: " + ".join(f"{n(ln.bytes)} B {ln.tensor_class}" for ln in lines) + f" = {n(total)} B",
        )
        if self.fsdp2:
            pad = self._padding()
            out.add(
                "state",
                "FSDP2 dim-0 padding of those shards",
                pad * self.w.state_width,
                lambda: (
                    f"({n(self.u.padded_total)} − ⌈{n(self.s.params)} ÷ {n(self.s.dp)}⌉) elements × "
                    f"{self.w.state_width} B = {n(pad * self.w.state_width)} B"
                ),
            )

    def _padding(self) -> int:
        return max(0, self.u.padded_total - ceil_div(self.s.params, self.s.dp))

    def declared(self, out: _Builder) -> None:
        s = self.s
        out.add("buckets", "communication buckets (declared)", s.bucket_bytes, lambda: f"{n(s.bucket_bytes)} B")
        out.add("overhead", "runtime overhead (declared)", s.overhead_bytes, lambda: f"{n(s.overhead_bytes)} B")

    def all_gradients(self) -> tuple[int, Callable[[], str]]:
        """Every gradient, as after backward: the gradient line (+ its FSDP2 padding when sharded)."""
        line = self.grad_line
        pad = self._padding() * line.width * line.copies if self.fsdp2 and line.sharded else 0
        total = line.bytes + pad
        if pad:
            return total, lambda: f"{line.formula} + FSDP2 padding {n(pad)} B = {n(total)} B"
        return total, lambda: line.formula

    def gradients_so_far(self, out: _Builder, layers_done: int, head_done: bool, what: str) -> None:
        if not self.rules.gradients_fill_during_backward:
            total, formula = self.all_gradients()
            out.add("gradients", "every gradient (kept resident through the step)", total, formula)
            return
        per_layer = self._grad_elements(self.u.layer_params, self.u.layer_shard)
        head = self._grad_elements(self.u.head_grad_params, None) if head_done else 0
        # Offloaded (copies 0): each unit's gradients go to the host once reduced; none stay resident here.
        w = self.w.grads * self.grad_line.copies
        value = (layers_done * per_layer + head) * w
        out.add(
            "gradients",
            what,
            value,
            lambda: (
                f"({layers_done} × {n(per_layer)}"
                + (f" + {n(head)}" if head else "")
                + f") elements × {w} B = {n(value)} B"
            ),
        )

    def _grad_elements(self, params: int, fsdp2_shard: int | None) -> int:
        """One unit's gradient elements on this rank: FSDP2's padded shard, ⌈params ÷ D⌉, or whole."""
        if not self.w.grads_sharded:
            return params
        if self.fsdp2 and fsdp2_shard is not None:
            return fsdp2_shard
        return ceil_div(params, self.s.dp)

    def unsharded(self, out: _Builder, what: str, units: int, whole: int, category: str = "unsharded_params") -> None:
        """``units`` unsharded units of ``whole`` elements each (padding included) in the gather width."""
        if not (self.fsdp2 and self.rules.gather_peak) or units == 0:
            return
        g = self.w.gather
        value = units * whole * g
        out.add(
            category,
            what,
            value,
            lambda: (f"{units} × " if units > 1 else "") + f"{n(whole)} elements × {g} B = {n(value)} B",
        )

    def activations(self, out: _Builder, what: str, value: int, formula: Callable[[], str]) -> None:
        # A typed measurement scales the modelled figure first; the mutant then divides what the rank holds
        # (the user's figure, as the declared peak's mutant does), so with a measured 0 it is equivalent.
        if self.scale is not None:
            measured, modelled = self.scale
            scaled = ceil_div(value * measured, modelled)
            value, formula = scaled, _times(formula, measured, modelled, scaled)
        if self.rules.activations_divided_by_dp:
            divided = value // self.s.dp
            value, formula = divided, _divided(formula, self.s.dp, divided)
        out.add("activations", what, value, formula)

    def instant(self, key: str, name: str, phase: str, out: _Builder) -> Instant:
        self.declared(out)
        entries = tuple(out.entries)
        sums = [0] * len(CATEGORIES)
        for e in entries:
            sums[_INDEX[e.category]] += e.bytes
        return Instant(key, name, phase, out.total, tuple(sums), lambda: entries)

    # ------------------------------------------------------------------ the step
    def _step(self) -> list[tuple[str, Callable[[], Instant]]]:
        """The step's instants in order, each as (key, how to build it): :meth:`run` builds them all,
        :meth:`at` one (each instant is built on its own)."""
        last = self.u.layers - 1
        plan: list[tuple[str, Callable[[], Instant]]] = [
            (f"forward-layer-{k}", partial(self.forward_at, k)) for k in self.forward_layers()
        ]
        plan += [("end-of-forward", self.end_of_forward), ("loss-backward", self.loss_backward),
                 ("head-backward", self.head_backward)]  # fmt: skip
        plan += [
            (_layer_name(k, last, moment)[0], partial(self._backward_at, k, moment))
            for k in self.candidate_layers()
            for moment in self._moments()
        ]
        if self.stage >= 2:
            plan += [("root-gradients", self.root_gradients), ("root-post-backward", self.root_post_backward)]
        plan.append(("optimizer-step", self.optimizer_step))
        return plan

    def at(self, key: str) -> Instant:
        """The instant ``key`` of the step, walked alone: the page spells only the worst instant's entries."""
        build = dict(self._step()).get(key)
        if build is None:
            raise KeyError(f"no instant {key!r} in the step")
        return build()

    def run(self) -> Schedule:
        instants = []
        for key, build in self._step():
            instant = build()
            assert instant.key == key, (instant.key, key)  # the plan's keys are the instants' own
            instants.append(instant)
        peak = max(instants, key=lambda i: i.total)  # max() keeps the first of equals: step order
        return Schedule(self.stage, tuple(instants), peak, NOTES[self.stage])

    def forward_layers(self) -> list[int]:
        """Stage 3's forward unshards worth walking: layer 0 (the root's all-gather output still held)
        and the two ends of the linear stretch 1 … L − 1; stages 0–2 gather nothing in forward, and the
        end of forward holds more than any layer's forward there."""
        if not self.fsdp2:
            return []
        return sorted({0, min(1, self.u.layers - 1), self.u.layers - 1})

    def forward_at(self, k: int) -> Instant:
        """Layer k's forward unshard (the all-gather copy-out): its all-gather output beside its unsharded
        parameters, the previous unit's all-gather output still held (FSDP2 frees it after this copy-out),
        the activations of the layers before it and the hidden state entering it."""
        out = self.new()
        u, a, s = self.u, self.a, self.s
        self.state(out)
        self.gradients_so_far(out, 0, False, "gradients (none yet: zero_grad(set_to_none=True))")
        self._root_and_kept_layers(out, k if not s.reshard_after_forward else 0)
        self.unsharded(out, f"layer {k} unsharded", 1, u.layer_unsharded)
        if s.dp > 1:
            self.unsharded(out, f"layer {k}'s all-gather output (during its copy-out)", 1, u.layer_unsharded,
                           "all_gather")  # fmt: skip
            held, whole = ("the root's", u.root_unsharded) if k == 0 else (f"layer {k - 1}'s", u.layer_unsharded)
            self.unsharded(out, f"{held} all-gather output, held until this copy-out", 1, whole, "all_gather")
        saved = k * a.per_layer
        self.activations(out, f"activations of layers 0 … {k - 1}" if k else "activations (none saved yet)",
                         saved, lambda: f"{k} × {n(a.per_layer)} B = {n(saved)} B")  # fmt: skip
        self.activations(out, f"the hidden state entering layer {k}", a.activation_grad,
                         lambda: f"s·b·h × {s.act_bytes} B = {n(a.activation_grad)} B")  # fmt: skip
        return self.instant(f"forward-layer-{k}", f"forward at layer {k}", "forward", out)

    def candidate_layers(self) -> list[int]:
        """Layers whose backward instant can be the worst, last first: between max(1, P) and L − 2 the
        total is linear in k (each layer adds its shard of gradients and removes its activations), so
        only the ends and the layers whose prefetch is cut short by the start of the model remain."""
        last = self.u.layers - 1
        head = {last, last - 1}
        early = set(range(min(max(1, self.s.prefetch), last) + 1))
        return sorted((k for k in head | early if k >= 0), reverse=True)

    def _root_and_kept_layers(self, out: _Builder, kept_layers: int) -> None:
        self.unsharded(
            out,
            "root unit unsharded (embedding, final norm, head: FSDP2 keeps it from forward to its post-backward)",
            1,
            self.u.root_unsharded,
        )
        if kept_layers:
            self.unsharded(
                out,
                "layers kept unsharded after forward (reshard_after_forward = 0)",
                kept_layers,
                self.u.layer_unsharded,
            )

    def _saved_through_forward(self) -> tuple[int, Callable[[], str]]:
        a, layers = self.a, self.u.layers
        value = layers * a.per_layer + a.extra_residual + a.head
        return (
            value,
            lambda: (
                f"{layers} layers × {n(a.per_layer)} B + residual {n(a.extra_residual)} B + head input {n(a.head)} B"
                f" = {n(value)} B"
            ),
        )

    def _kept_after_forward(self) -> int:
        return self.u.layers if self.fsdp2 and not self.s.reshard_after_forward else 0

    def _forward_done(self) -> _Builder:
        """What the end of forward and the loss backward share: the sharded state, no gradients yet, the
        root (and with ``reshard_after_forward = 0`` every layer) unsharded, every saved activation."""
        out = self.new()
        self.state(out)
        self.gradients_so_far(out, 0, False, "gradients (none yet: zero_grad(set_to_none=True))")
        self._root_and_kept_layers(out, self._kept_after_forward())
        value, formula = self._saved_through_forward()
        self.activations(
            out, "activations saved by every layer, the final norm and the residual stream", value, formula
        )
        return out

    def end_of_forward(self) -> Instant:
        out = self._forward_done()
        a, s = self.a, self.s
        self.activations(
            out,
            "logits (the head's output, in the activation width)",
            a.logits_out,
            lambda: (
                f"s·b·V × {s.act_bytes} B = {n(s.seq_len)}·{s.micro_batch}·{n(a.vocab)} × "
                f"{s.act_bytes} B = {n(a.logits_out)} B"
            ),
        )
        return self.instant("end-of-forward", "end of forward", "forward", out)

    def loss_backward(self) -> Instant:
        out = self._forward_done()
        a, s = self.a, self.s
        self.activations(
            out,
            "the loss's saved log-probabilities (s·b·V in the loss width)",
            a.logits_saved,
            lambda: (
                f"s·b·V × {s.logits_bytes} B = {n(s.seq_len)}·{s.micro_batch}·{n(a.vocab)} × "
                f"{s.logits_bytes} B = {n(a.logits_saved)} B"
            ),
        )
        out.add(
            "temporaries",
            "loss backward: the gradients of the log-probabilities and of the logits",
            a.loss_temporaries,
            lambda: f"2 × {n(s.seq_len)}·{s.micro_batch}·{n(a.vocab)} × {s.logits_bytes} B = {n(a.loss_temporaries)} B",
        )
        return self.instant("loss-backward", "loss backward", "loss", out)

    def backward_at(self, k: int) -> list[Instant]:
        """Layer k's backward, three moments: its all-gather copy-out (stage 3 resharding after forward,
        D > 1), early (every activation of the layer still saved, the MLP's first gradients and its output
        projection's weight gradient computed) and late (the layer's activations freed, all its weight
        gradients computed)."""
        return [self._backward_at(k, moment) for moment in self._moments()]

    def _moments(self) -> list[str]:
        """A layer's backward moments, in order (see :meth:`backward_at`)."""
        unshard = self.fsdp2 and self.s.reshard_after_forward and self.s.dp > 1
        return ["unshard", "early", "late"] if unshard else ["early", "late"]

    def _backward_at(self, k: int, moment: str) -> Instant:
        """``unshard``: layer k's pre-backward copy-out (its all-gather output beside its unsharded
        parameters, nothing computed yet); ``early`` and ``late``: see :meth:`backward_at`."""
        early = moment == "early"
        out = self.new()
        u, a, s, w = self.u, self.a, self.s, self.w
        last = u.layers - 1
        self.state(out)
        stage3 = self.fsdp2
        self.gradients_so_far(
            out,
            last - k,
            not stage3,
            f"gradients of the {last - k} layers after layer {k}" + ("" if stage3 else " and of the head"),
        )
        rebuilt = k + 1 if stage3 and not s.reshard_after_forward else 1
        self.unsharded(out, "root unit unsharded (until its post-backward)", 1, u.root_unsharded)
        self.unsharded(
            out,
            f"layer {k} unsharded" if rebuilt == 1 else f"layers 0 … {k} unsharded (kept since forward)",
            rebuilt,
            u.layer_unsharded,
        )
        if stage3 and s.reshard_after_forward and s.dp > 1:
            # at its copy-out: its own output and the rest of what the layer above prefetched; after its
            # pre-backward: the layers it prefetched below it
            ahead = min(max(1, s.prefetch), k + 1 if moment == "unshard" else k)
            if moment == "unshard":
                why = f"layer {k}'s all-gather output (during its copy-out)"
                if ahead > 1:
                    why += f" and {ahead - 1} more prefetched"
            else:
                why = (f"all-gather output of the {'layer' if ahead == 1 else f'{ahead} layers'} prefetched "
                       "for the backward ahead (the whole padded unit)")  # fmt: skip
            self.unsharded(out, why, ahead, u.layer_unsharded, "all_gather")
        if stage3:
            held = u.head_grad_params * w.gather
            out.add(
                "unsharded_grads",
                "the head's and final norm's unsharded gradients (until the root's post-backward)",
                held,
                lambda: f"{n(u.head_grad_params)} elements × {w.gather} B = {n(held)} B",
            )
        if k < last:
            self._reduce_scatter_input(
                out,
                f"reduce-scatter input of layer {k + 1} (in flight until the next post-backward)",
                u.layer_params,
                u.layer_unsharded,
            )
        lg_width = w.gather if stage3 else w.grads
        params = 0 if moment == "unshard" else u.mlp_out_params if early else u.layer_params
        layer_grads = params * lg_width
        out.add(
            "unsharded_grads" if stage3 or w.grads_sharded else "gradients",
            f"layer {k}'s gradients so far (whole): "
            + ("its MLP output projection's" if early else "all of its parameters'"),
            layer_grads,
            lambda: f"{n(params)} elements × {lg_width} B = {n(layer_grads)} B",
        )
        if moment == "unshard":
            saved = (k + 1) * a.per_layer
            self.activations(
                out, f"activations of layers 0 … {k}", saved, lambda: f"{k + 1} × {n(a.per_layer)} B = {n(saved)} B"
            )
            out.add(
                "temporaries",
                f"the gradient entering layer {k}",
                a.activation_grad,
                lambda: f"s·b·h × {s.act_bytes} B = {n(a.activation_grad)} B",
            )
        elif early:
            saved = (k + 1) * a.per_layer + a.recomputed
            self.activations(
                out,
                f"activations of layers 0 … {k}" + (f" and layer {k}'s recomputed set" if a.recomputed else ""),
                saved,
                lambda: (
                    f"{k + 1} × {n(a.per_layer)} B"
                    + (f" + {n(a.recomputed)} B" if a.recomputed else "")
                    + f" = {n(saved)} B"
                ),
            )
            temps = a.activation_grad + a.op_pair
            out.add(
                "temporaries",
                f"layer {k}'s backward: the activation gradient and the widest pair of op gradients",
                temps,
                lambda: f"s·b·h × {s.act_bytes} B = {n(a.activation_grad)} B + {a.op_pair_formula} = {n(temps)} B",
            )
        else:
            saved = k * a.per_layer
            self.activations(
                out,
                f"activations of layers 0 … {k - 1} (layer {k}'s freed)",
                saved,
                lambda: f"{k} × {n(a.per_layer)} B = {n(saved)} B",
            )
            out.add(
                "temporaries",
                f"layer {k}'s input gradient",
                a.activation_grad,
                lambda: f"s·b·h × {s.act_bytes} B = {n(a.activation_grad)} B",
            )
        key, name = _layer_name(k, last, moment)
        return self.instant(key, name, "backward", out)

    def _reduce_scatter_input(self, out: _Builder, what: str, params: int, whole: int) -> None:
        """The reduce-scatter input of a unit: at stage 3 FSDP2's whole padded unit, at stage 2 the unit."""
        if self.stage < 2 or not self.rules.reduce_scatter_buffer:
            return
        r = self.w.reduce
        elements = whole if self.fsdp2 else params
        value = elements * r
        out.add("reduce_scatter", what, value, lambda: f"{n(elements)} elements × {r} B = {n(value)} B")

    def head_backward(self) -> Instant:
        """After the loss: the root's pre-backward prefetches the last layer(s), the head's matmul backward
        turns the logits' gradient into its weight's gradient and its input's."""
        out = self.new()
        u, a, s, w = self.u, self.a, self.s, self.w
        stage3 = self.fsdp2
        self.state(out)
        self.gradients_so_far(out, 0, False, "gradients (none reduced yet)")
        self._root_and_kept_layers(out, self._kept_after_forward())
        if stage3 and s.reshard_after_forward and s.dp > 1:
            ahead = min(max(1, s.prefetch), u.layers)
            what = "the last layer" if ahead == 1 else f"the last {ahead} layers"
            self.unsharded(out, f"all-gather output of {what}, prefetched by the root's pre-backward", ahead,
                           u.layer_unsharded, "all_gather")  # fmt: skip
        width = w.gather if stage3 else w.grads
        held = u.head_grad_params * width
        out.add(
            "unsharded_grads" if stage3 or w.grads_sharded else "gradients",
            "the head's and final norm's gradients (whole)",
            held,
            lambda: f"{n(u.head_grad_params)} elements × {width} B = {n(held)} B",
        )
        value, formula = self._saved_through_forward()
        self.activations(out, "activations saved by every layer, the final norm and the residual stream", value,
                         formula)  # fmt: skip
        temps = a.logits_out + a.activation_grad
        out.add(
            "temporaries",
            "the logits' gradient (activation width) and the head input's gradient",
            temps,
            lambda: (
                f"s·b·V × {s.act_bytes} B = {n(a.logits_out)} B + s·b·h × {s.act_bytes} B = "
                f"{n(a.activation_grad)} B = {n(temps)} B"
            ),
        )
        return self.instant("head-backward", "backward at the head", "backward", out)

    def root_gradients(self) -> Instant:
        """The embedding's backward done, the root's post-backward not yet run: the root still unsharded,
        its whole gradients computed, layer 0's reduce-scatter input still in flight."""
        out = self.new()
        u, w = self.u, self.w
        self.state(out)
        self.gradients_so_far(out, u.layers, False, "gradients of every layer")
        self.unsharded(out, "root unit unsharded (until its post-backward)", 1, u.root_unsharded)
        width = w.gather if self.fsdp2 else w.grads
        grads = u.root_params * width
        out.add(
            "unsharded_grads",
            "the root's unsharded gradients (embedding, final norm, head)",
            grads,
            lambda: f"{n(u.root_params)} elements × {width} B = {n(grads)} B",
        )
        self._reduce_scatter_input(
            out, "reduce-scatter input of layer 0 (in flight until the root's post-backward)", u.layer_params,
            u.layer_unsharded,
        )  # fmt: skip
        return self.instant("root-gradients", "backward at the embedding (root gradients computed)", "backward", out)

    def root_post_backward(self) -> Instant:
        out = self.new()
        u, w = self.u, self.w
        self.state(out)
        self.gradients_so_far(out, u.layers, False, "gradients of every layer")
        width = w.gather if self.fsdp2 else w.grads
        grads = u.root_params * width
        out.add(
            "unsharded_grads",
            "the root's unsharded gradients (embedding, final norm, head)",
            grads,
            lambda: f"{n(u.root_params)} elements × {width} B = {n(grads)} B",
        )
        self._reduce_scatter_input(out, "reduce-scatter input of the root", u.root_params, u.root_unsharded)
        return self.instant("root-post-backward", "root post-backward", "backward", out)

    def optimizer_step(self) -> Instant:
        out = self.new()
        s, u = self.s, self.u
        self.state(out)
        total, formula = self.all_gradients()
        out.add("gradients", "every gradient", total, formula)
        opt = next(ln for ln in self.lines if ln.tensor_class == "optimizer_states")
        if s.opt_states >= 2 and opt.copies:  # an offloaded optimizer steps on the host
            if opt.sharded:
                shard = u.largest_tensor_shard if self.fsdp2 else ceil_div(u.largest_tensor, s.dp)
            else:
                shard = u.largest_tensor
            value = 2 * shard * s.opt_bytes
            out.add(
                "temporaries",
                f"the optimizer's temporaries for its largest tensor ({u.largest_tensor_name}): "
                "sqrt of the second moment and the update's denominator",
                value,
                lambda: f"2 × {n(shard)} elements × {s.opt_bytes} B = {n(value)} B",
            )
        return self.instant("optimizer-step", "optimizer step", "optimizer", out)


# --------------------------------------------------------------------------- the same numbers, in closed form

Sums = tuple[str, str, str, tuple[int, ...]]  # (key, name, phase, bytes per category)


@lru_cache(maxsize=4096)  # the same few names for every schedule of a model: spelled once
def _layer_name(k: int, last: int, moment: str) -> tuple[str, str]:
    name = f"backward at layer {k}" + (" (the last)" if k == last else " (the first)" if k == 0 else "")
    key, tail = {"unshard": ("-unshard", ": all-gather copy-out"), "early": ("", ""), "late": ("-done", ": done")}[
        moment
    ]
    return f"backward-layer-{k}{key}", name + tail


def _sums(s: Scenario, stage: int, lines: tuple[LedgerLine, ...], rules: Rules, padded: bool) -> list[Sums]:
    """Every instant of :class:`_Walk` as plain integer arithmetic: the bytes per category, nothing spelled.

    Written a second time on purpose, line for line against the walk's methods: the fit finder evaluates
    hundreds of schedules per answer, and tests/ledger/peak/test_schedule.py holds the two equal."""
    u, a = layout(s.model, s.dp, padded), activation_terms(s)
    stage3, dp, last = stage == 3, s.dp, u.layers - 1
    grad = next(line for line in lines if line.tensor_class == "gradients")
    wg, g, r = grad.width, s.gather_bytes, s.reduce_bytes
    state = sum(ln.bytes for ln in lines if ln.tensor_class != "gradients")
    state_width = sum(ln.width * ln.copies for ln in lines if ln.tensor_class != "gradients" and ln.sharded)
    padding = max(0, u.padded_total - ceil_div(s.params, dp)) if stage3 else 0
    state += padding * state_width
    resident = wg * grad.copies  # 0 when the gradients are offloaded: reduced, then copied to the host
    all_grads = grad.bytes + (padding * resident if grad.sharded else 0)

    def grad_elements(params: int, shard: int | None) -> int:
        if not grad.sharded:
            return params
        return shard if stage3 and shard is not None else ceil_div(params, dp)

    layer_grad, head_grad = grad_elements(u.layer_params, u.layer_shard), grad_elements(u.head_grad_params, None)

    def grads(layers_done: int, head_done: bool) -> int:
        if not rules.gradients_fill_during_backward:
            return all_grads
        return (layers_done * layer_grad + (head_grad if head_done else 0)) * resident

    gather_on = stage3 and rules.gather_peak
    root_whole = u.root_unsharded * g if gather_on else 0
    layer_whole = u.layer_unsharded * g if gather_on else 0
    ag = layer_whole if dp > 1 else 0
    rs_on = stage >= 2 and rules.reduce_scatter_buffer
    rs_layer = ((u.layer_unsharded if stage3 else u.layer_params) * r) if rs_on else 0
    rs_root = ((u.root_unsharded if stage3 else u.root_params) * r) if rs_on else 0
    grad_width = g if stage3 else wg
    whole_grads = "unsharded_grads" if stage3 or grad.sharded else "gradients"
    declared = (s.bucket_bytes, s.overhead_bytes)
    scale = (s.activation_bytes, a.modelled_total) if s.source_of("activation_bytes") == "measured" else None

    def act(value: int) -> int:
        held = value if scale is None else ceil_div(value * scale[0], scale[1])
        return held // dp if rules.activations_divided_by_dp else held

    buckets, overhead = declared

    def row(
        gradients: int = 0,
        unsharded_params: int = 0,
        all_gather: int = 0,
        unsharded_grads: int = 0,
        reduce_scatter: int = 0,
        activations: int = 0,
        temporaries: int = 0,
    ) -> tuple[int, ...]:
        """The bytes per category, in :data:`CATEGORIES`' order (asserted below)."""
        return (state, gradients, unsharded_params, all_gather, unsharded_grads, reduce_scatter, buckets,
                activations, temporaries, overhead)  # fmt: skip

    kept = u.layers if stage3 and not s.reshard_after_forward else 0
    saved = act(u.layers * a.per_layer + a.extra_residual + a.head)
    resharding = stage3 and bool(s.reshard_after_forward) and dp > 1
    out: list[Sums] = []
    if stage3:
        for k in sorted({0, min(1, last), last}):
            ag_pair = (ag + (root_whole if k == 0 else layer_whole)) if dp > 1 else 0
            kept_k = 0 if s.reshard_after_forward else k
            out.append(
                (
                    f"forward-layer-{k}",
                    f"forward at layer {k}",
                    "forward",
                    row(
                        gradients=grads(0, False),
                        unsharded_params=root_whole + (kept_k + 1) * layer_whole,
                        all_gather=ag_pair,
                        activations=act(k * a.per_layer) + act(a.activation_grad),
                    ),
                )
            )
    base_unsharded = root_whole + kept * layer_whole
    out.append(
        (
            "end-of-forward",
            "end of forward",
            "forward",
            row(gradients=grads(0, False), unsharded_params=base_unsharded, activations=saved + act(a.logits_out)),
        )
    )
    out.append(
        (
            "loss-backward",
            "loss backward",
            "loss",
            row(
                gradients=grads(0, False),
                unsharded_params=base_unsharded,
                activations=saved + act(a.logits_saved),
                temporaries=a.loss_temporaries,
            ),
        )
    )
    head_parts = {
        "gradients": grads(0, False),
        "unsharded_params": base_unsharded,
        "all_gather": min(max(1, s.prefetch), u.layers) * ag if resharding else 0,
        "unsharded_grads": 0,
        "activations": saved,
        "temporaries": a.logits_out + a.activation_grad,
    }
    head_parts[whole_grads] += u.head_grad_params * grad_width
    out.append(("head-backward", "backward at the head", "backward", row(**head_parts)))
    for k in sorted({last, last - 1, *range(min(max(1, s.prefetch), last) + 1)} - {-1}, reverse=True):
        rebuilt = k + 1 if stage3 and not s.reshard_after_forward else 1
        for moment in ("unshard", "early", "late") if resharding else ("early", "late"):
            ahead = min(max(1, s.prefetch), k + 1 if moment == "unshard" else k) if resharding else 0
            params = 0 if moment == "unshard" else u.mlp_out_params if moment == "early" else u.layer_params
            if moment == "unshard":
                acts, temps = act((k + 1) * a.per_layer), a.activation_grad
            elif moment == "early":
                acts, temps = act((k + 1) * a.per_layer + a.recomputed), a.activation_grad + a.op_pair
            else:
                acts, temps = act(k * a.per_layer), a.activation_grad
            parts = {
                "gradients": grads(last - k, not stage3),
                "unsharded_params": root_whole + rebuilt * layer_whole,
                "all_gather": ahead * ag,
                "unsharded_grads": u.head_grad_params * g if stage3 else 0,
                "reduce_scatter": rs_layer if k < last else 0,
                "activations": acts,
                "temporaries": temps,
            }
            parts[whole_grads] += params * grad_width
            key, name = _layer_name(k, last, moment)
            out.append((key, name, "backward", row(**parts)))
    if stage >= 2:
        root_grads = u.root_params * grad_width
        out.append(
            (
                "root-gradients",
                "backward at the embedding (root gradients computed)",
                "backward",
                row(
                    gradients=grads(u.layers, False),
                    unsharded_params=root_whole,
                    unsharded_grads=root_grads,
                    reduce_scatter=rs_layer,
                ),
            )
        )
        out.append(
            (
                "root-post-backward",
                "root post-backward",
                "backward",
                row(gradients=grads(u.layers, False), unsharded_grads=root_grads, reduce_scatter=rs_root),
            )
        )
    temps = 0
    opt = next(ln for ln in lines if ln.tensor_class == "optimizer_states")
    if s.opt_states >= 2 and opt.copies:
        shard = (
            (u.largest_tensor_shard if stage3 else ceil_div(u.largest_tensor, dp)) if opt.sharded else u.largest_tensor
        )
        temps = 2 * shard * s.opt_bytes
    out.append(("optimizer-step", "optimizer step", "optimizer", row(gradients=all_grads, temporaries=temps)))
    return out
