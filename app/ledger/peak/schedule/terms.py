"""The activation ledger's parts as the instants need them, and the temporaries of the step's ops.

The saved activations are the lab's activation ledger (``app/ledger/models/``) with the scenario's
``norms``: a trace on CPU fake tensors runs RMSNorm unfused, as transformers writes it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import lru_cache

from app.ledger.arithmetic import n
from app.ledger.models.architecture import GPT_FAMILIES, Architecture
from app.ledger.models.defaults import ModelQuery, model_defaults
from app.ledger.models.trains import Lora
from app.ledger.scenario import Scenario


@dataclass(frozen=True, slots=True)
class ActivationTerms:
    """The activation ledger's parts as the instants need them, and the backward's temporaries."""

    per_layer: int  # a layer's saved set under the policy (full: its checkpointed input)
    recomputed: int  # during a layer's backward: its recomputed set (full: all of it; op: all but its cache;
    # selective: the core)
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
    hidden: int = 0  # h: the chunked loss's slices are s ÷ N · b · h
    every: int = 1  # full: every N-th layer checkpointed (per_layer), the others keep full_layer
    full_layer: int = 0
    # gemma3_text from a sequence longer than its window: layers N − 1, 2N − 1, … (alt_every = N) are of a second
    # kind; kept_before[k] is then what layers 0 … k − 1 keep, and recomputed_each[k] what layer k rebuilds
    alt_every: int = 0
    kept_before: tuple[int, ...] = ()
    recomputed_each: tuple[int, ...] = ()
    alt_first: int = 0  # or (deepseek_v3) layers 0 … alt_first − 1, its dense ones, are the second kind
    first_kinds: tuple[str, str] = ("MoE", "dense")  # (the others, the first alt_first): or trained and frozen
    ring_kv: int = 0  # context parallelism: ring attention's all-gathered K and V of the layer in flight

    def checkpointed(self, k: int) -> int:
        """How many of layers 0 … k − 1 are checkpointed: all (every = 1, or a policy that treats every layer
        alike), or every ``every``-th from layer 0."""
        return -(-k // self.every) if self.every > 1 else k

    def saved_before(self, k: int) -> int:
        """Bytes layers 0 … k − 1 keep for backward."""
        if self.alt_every or self.alt_first:
            return self.kept_before[k]
        c = self.checkpointed(k)
        return c * self.per_layer + (k - c) * self.full_layer

    def saved_formula(self, k: int) -> str:
        """:meth:`saved_before`'s arithmetic (without its result)."""
        if self.alt_every:
            alt = k // self.alt_every
            what = "frozen" if self.first_kinds[1] == "frozen" else "entered by no gradient"  # LoRA's first layer
            frozen = f", the first {min(k, self.alt_first)} of them {what}" if self.alt_first else ""
            return (f"the sum over {k - alt} sliding-window and {alt} global layers{frozen} "
                    f"({n(self.kept_before[k])} B)")  # fmt: skip
        if self.alt_first:
            alt = min(k, self.alt_first)
            first, others = self.first_kinds[1], self.first_kinds[0]
            return f"the sum over {alt} {first} and {k - alt} {others} layers ({n(self.kept_before[k])} B)"
        if self.every == 1:
            return f"{k} × {n(self.per_layer)} B"
        c = self.checkpointed(k)
        return f"{c} × {n(self.per_layer)} B (checkpointed) + {k - c} × {n(self.full_layer)} B"

    def recomputed_at(self, k: int) -> int:
        """What layer k's backward rebuilds beside what it keeps: its recomputed set (its kind's), or nothing for a
        layer that every-N-th checkpointing leaves whole."""
        if k % self.every:
            return 0
        return self.recomputed_each[k] if self.recomputed_each else self.recomputed


def activation_terms(s: Scenario) -> ActivationTerms:
    trains = (s.lora_rank, s.lora_targets, s.frozen_layers, s.freeze_embed, s.frozen_modules)
    return _activation_terms(
        s.model, s.seq_len, s.micro_batch, s.act_bytes, s.act_policy, s.logits_bytes, s.norms, s.ac_every, s.gqa,
        trains, s.cp,
    )  # fmt: skip


@lru_cache(maxsize=1024)
def _activation_terms(
    model: str, seq: int, b: int, w: int, policy: str, lw: int, norms: str, every: int, gqa: str,
    trains: tuple[int, str, int, int, str], cp: int,
) -> ActivationTerms:  # fmt: skip
    # tp = pp = ep = 1: not_schedulable(s) is None; trains: (lora_rank, lora_targets, frozen_layers, freeze_embed,
    # frozen_modules)
    rank, targets, frozen, embed, modules = trains
    md = model_defaults(
        ModelQuery(
            model,
            seq,
            b,
            w,
            policy,
            logits_bytes=lw,
            norms=norms,
            ac_every=every,
            gqa=gqa,
            lora_rank=rank,
            lora_targets=targets,
            frozen_layers=frozen,
            freeze_embed=embed,
            frozen_modules=modules,
            cp=cp,
        )
    )
    seq //= cp  # context parallelism: each rank's tokens (the ledger above is the local sequence's already)
    a = md.activations
    arch = md.model.architecture
    two_kinds = a.alt_every or a.alt_first
    kept_before = tuple(itertools.accumulate((a.kept(k) for k in range(a.layers)), initial=0)) if two_kinds else ()
    recomputed_each = tuple(a.recomputed(k) for k in range(a.layers)) if two_kinds else ()
    tokens = seq * b
    folded = _folded_pair(md.lora, arch, tokens)
    return ActivationTerms(
        per_layer=a.per_layer_bytes,
        recomputed=a.recomputed(),
        head=a.head_bytes,
        extra_residual=a.embedding_bytes,
        logits_saved=a.logits_bytes,
        logits_out=tokens * arch.vocab * w,
        loss_temporaries=2 * tokens * arch.vocab * lw,
        activation_grad=tokens * arch.hidden * w,
        op_pair=max(_op_pair(arch, seq, b), folded[0]) * w,
        op_pair_formula=_op_pair_formula(arch, seq, b, w, folded),
        modelled_total=a.total_bytes,
        vocab=arch.vocab,
        hidden=arch.hidden,
        every=a.every,
        full_layer=a.full_layer_bytes,
        alt_every=a.alt_every,
        kept_before=kept_before,
        recomputed_each=recomputed_each,
        alt_first=a.alt_first,
        first_kinds=a.first_kinds,
        ring_kv=a.ring_kv_bytes,
    )


def _mlp_tokens(arch: Architecture, tokens: int) -> int:
    """Token slots through the MLP at once: all the tokens, or for a MoE layer's grouped GEMMs all k·s·b slots (every
    expert in one call)."""
    return arch.experts_per_token * tokens if arch.experts else tokens


def _op_pair(arch: Architecture, seq: int, b: int) -> int:
    mlp = 2 * _mlp_tokens(arch, seq * b) * arch.intermediate
    scores = 2 * arch.heads * seq * seq * b if arch.family in GPT_FAMILIES else 0
    return max(mlp, scores)


def _folded_pair(adapters: Lora | None, arch: Architecture, tokens: int) -> tuple[int, str]:
    """LoRA on a MoE's experts (PEFT's ParamWrapper): the backward of the first folded stack a layer's backward
    reaches makes a gradient of the whole stack, E·out·in; elements and their formula, (0, "") without. down_proj's
    comes beside its grouped GEMM's input gradient, k·s·b·i (its output's gradient replaces the expert outputs,
    which the walk still counts). Where only gate_up's is folded, its gradient comes after the SiLU and the gate
    and up outputs are freed (k·s·b·(3i + h) of the layer's set, with the expert outputs), beside the gate and up
    gradients and its input's (k·s·b·(2i + h)): E·2i·h − k·s·b·i in all. The router's folded E·h is far below the
    MLP's op pair."""
    stacks = {m.leaf for m in adapters.modules} if adapters is not None else set()
    slots, e, i, h = arch.experts_per_token * tokens, arch.experts, arch.intermediate, arch.hidden
    if "experts.down_proj" in stacks:
        return e * h * i + slots * i, f"(E·h·i + k·s·b·i) = ({e}·{n(h)}·{n(i)} + {n(slots)}·{n(i)})"
    if "experts.gate_up_proj" in stacks:
        return e * 2 * i * h - slots * i, f"(E·2i·h − k·s·b·i) = ({e}·{n(2 * i)}·{n(h)} − {n(slots)}·{n(i)})"
    return 0, ""


def _op_pair_formula(arch: Architecture, seq: int, b: int, w: int, folded: tuple[int, str]) -> str:
    if folded[0] > _op_pair(arch, seq, b):
        return f"{folded[1]} × {w} B = {n(folded[0])} × {w} B (a folded expert stack's gradient and its GEMM's)"
    mlp_tokens = _mlp_tokens(arch, seq * b)
    tokens = f"{arch.experts_per_token}·{n(seq * b)}" if arch.experts else f"{n(seq)}·{b}"
    mlp = f"2·{tokens}·{n(arch.intermediate)}"
    if arch.family in GPT_FAMILIES and 2 * arch.heads * seq * seq * b > 2 * mlp_tokens * arch.intermediate:
        return f"2·a·s²·b × {w} B = 2·{arch.heads}·{n(seq)}²·{b} × {w} B (the attention scores' gradients)"
    return f"2·s·b·i × {w} B = {mlp} × {w} B (the MLP's gate and up gradients)"
