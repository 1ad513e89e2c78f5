"""What the model's ends keep for backward (the embedding, the final norm and the head), the expert-parallel
buffers, and the per-rank sum of a saved set over tp (and sequence parallelism).

Integer arithmetic only: where ``tp`` (or sequence parallelism) divides a sum, the per-rank figure is rounded **up**
to a whole byte, once per figure (:func:`per_rank`).
"""

from __future__ import annotations

from app.ledger.arithmetic import ceil_div
from app.ledger.models.activations.entries import FP32, MASK, Saved, has_dropout
from app.ledger.models.architecture import GPT_FAMILIES, Architecture


def embedding_saved(arch: Architecture, s: int, b: int, w: int, mask_kept: bool = False) -> tuple[Saved, ...]:
    """The embedding output (and its dropout mask where the family trains with dropout); ``mask_kept``: the model's
    boolean attention mask (b·s², one byte each), which checkpointed layers keep as an input to their recompute
    (Gemma 2's eager attention: its two additive masks, in the activation width)."""
    out = [Saved("embedding output", "s·b·h", s * b * arch.hidden, w, False)]
    if has_dropout(arch):
        out.append(Saved("embedding dropout mask", "s·b·h", s * b * arch.hidden, MASK, False))
    if mask_kept and arch.eager_attention:  # Gemma2Model makes both, in the activation width, for eager attention
        out.append(Saved("the model's two attention masks (full and sliding, additive), kept by the checkpoints",
                         "2·b·s²", 2 * b * s * s, w, False))  # fmt: skip
    elif mask_kept:
        out.append(Saved("the model's attention mask (bool), kept by the checkpoints", "b·s²", b * s * s, MASK,
                         False))  # fmt: skip
    return tuple(out)


def head_saved(arch: Architecture, s: int, b: int, w: int, norms: str) -> tuple[Saved, ...]:
    """The final norm's output (the LM head input), and what an RMSNorm keeps besides."""
    h = arch.hidden
    out = [Saved("final norm output (LM head input)", "s·b·h", s * b * h, w, False, needs="head_w")]
    if arch.family not in GPT_FAMILIES:
        out.append(Saved("final RMSNorm 1/rms (FP32)", "s·b", s * b, FP32, False))
        # the FP32 upcast; the normalised input stands where the fused model has its input (the residual), in FP32
        # under composite: (4 − w) bytes more per element
        if norms != "fused":
            out.append(Saved(f"final RMSNorm FP32 upcast ({norms})", "s·b·h", s * b * h, FP32, False))
        if norms == "composite" and w < FP32:
            out.append(Saved("final RMSNorm normalised input in FP32, beyond the residual's width", "s·b·h",
                             s * b * h, FP32 - w, False))  # fmt: skip
        if norms != "fused" and arch.sandwich_norms:
            out.append(Saved("final RMSNorm (1 + weight) in FP32", "h", h, FP32, False))
    if arch.logit_softcap:  # Gemma 2: tanh(logits ÷ cap) × cap before the loss; the tanh keeps its output
        out.append(Saved("soft-capped logits (tanh output)", "s·b·V", s * b * arch.vocab, w, True))
    return tuple(out)


def all_to_all_saved(arch: Architecture, s: int, b: int, w: int, pct: int = 100) -> tuple[Saved, ...]:
    """Expert parallelism: one MoE layer's all-to-all send buffer of the k·s·b dispatched token slots and its receive
    buffer, ``pct`` % of them on the busiest rank (100: balanced)."""
    slots = arch.experts_per_token * s * b
    received = ceil_div(slots * pct, 100)
    shape = "k·s·b·h" if pct == 100 else f"{pct}% × k·s·b·h"
    return (
        Saved("all-to-all send buffer", "k·s·b·h", slots * arch.hidden, w, False),
        Saved("all-to-all receive buffer (the busiest rank's)", shape, received * arch.hidden, w, False),
    )


def per_rank(saved: tuple[Saved, ...], tp: int, sp: bool) -> int:
    """Replicated bytes + ⌈split bytes ÷ tp⌉; with sequence parallelism ⌈all bytes ÷ tp⌉."""
    if sp:
        return ceil_div(sum(x.bytes for x in saved), tp)
    replicated = sum(x.bytes for x in saved if not x.split)
    return replicated + ceil_div(sum(x.bytes for x in saved if x.split), tp)
