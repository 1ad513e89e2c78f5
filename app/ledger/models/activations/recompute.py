"""What recomputation costs: extra forward FLOPs as an exact fraction of a step without it."""

from __future__ import annotations

from math import gcd

from app.ledger.models.architecture import GPT_FAMILIES, Architecture


def forward_flops(arch: Architecture, seq_len: int, micro_batch: int) -> tuple[int, int, int]:
    """(one layer's forward FLOPs, its attention-core share, the LM head's forward FLOPs).

    Matmul FLOPs only, 2 per multiply-add: projections 2·s·b·h·(width out), the attention core
    QKᵀ and ×V 2 · 2·b·s²·(heads × head_dim) over the full s×s (causal masking's saving not taken,
    as in the paper), MoE: the router and k experts per token. Norms, activations, softmax and
    bias adds are left out (a few per cent at most of a layer's FLOPs for these sizes).
    """
    s, b, h = seq_len, micro_batch, arch.hidden
    core = 4 * b * s * s * arch.q_width
    if arch.family in GPT_FAMILIES:
        per_token = 3 * h * h + h * h + 2 * h * arch.intermediate
    else:
        mlp = 3 * h * arch.intermediate
        if arch.experts:
            mlp = h * arch.experts + arch.experts_per_token * mlp
        per_token = h * (2 * arch.q_width + 2 * arch.kv_width) + mlp
    return 2 * s * b * per_token + core, core, 2 * s * b * h * arch.vocab


def recompute_fraction(
    arch: Architecture, seq_len: int, micro_batch: int, policy: str, every: int = 1
) -> tuple[int, int]:
    """Extra forward FLOPs of ``policy`` over one step without recomputation, exactly.

    A step is forward + backward ≈ 3 × forward (backward computes two matmuls per forward one).
    Full: one more forward of every layer, L·F_layer ÷ 3·(L·F_layer + F_head) — just under 1/3.
    Selective: one more forward of the attention core, L·4·b·s²·a·d ÷ the same; for a GPT layer
    without the head this is the paper's 4bs²h ÷ 3(24bsh² + 4bs²h) = s ÷ (18h + 3s).
    Op (torchtitan's): the two matmuls it recomputes, wo and w3, 2·s·b·(a·d·h + h·i) per layer.
    """
    if policy == "none":
        return (0, 1)
    layer, core, head = forward_flops(arch, seq_len, micro_batch)
    recomputed = {"full": layer, "selective": core, "op": _op_recomputed_flops(arch, seq_len, micro_batch)}[policy]
    layers = -(-arch.layers // every) if policy == "full" else arch.layers  # every N-th layer: ⌈L ÷ N⌉ of them
    num = layers * recomputed
    den = 3 * (arch.layers * layer + head)
    g = gcd(num, den)
    return (num // g, den // g)


def _op_recomputed_flops(arch: Architecture, seq_len: int, micro_batch: int) -> int:
    """torchtitan's per-op policy recomputes every second of a block's five matmuls: wo and w3."""
    return 2 * seq_len * micro_batch * arch.hidden * (arch.q_width + arch.intermediate)
