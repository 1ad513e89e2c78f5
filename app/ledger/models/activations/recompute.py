"""What recomputation costs: extra forward FLOPs as an exact fraction of a step without it."""

from __future__ import annotations

from math import gcd

from app.ledger.models.architecture import GPT_FAMILIES, Architecture


def forward_flops(arch: Architecture, seq_len: int, micro_batch: int, dense: bool = False) -> tuple[int, int, int]:
    """(one layer's forward FLOPs, its attention-core share, the LM head's forward FLOPs); ``dense``: deepseek_v3's
    dense first layers.

    Matmul FLOPs only, 2 per multiply-add: projections 2·s·b·h·(width out), the attention core
    QKᵀ and ×V 2 · 2·b·s²·(heads × head_dim) over the full s×s (causal masking's saving not taken,
    as in the paper; MLA: 2·b·s²·a·(d + v), its value heads narrower), MoE: the router, k experts per token and
    the shared experts. Norms, activations, softmax and bias adds are left out (a few per cent at most of a layer's
    FLOPs for these sizes).
    """
    s, b, h = seq_len, micro_batch, arch.hidden
    core = 4 * b * s * s * arch.q_width
    if arch.family in GPT_FAMILIES:
        per_token = 3 * h * h + h * h + 2 * h * arch.intermediate
    else:
        mlp = 3 * h * (arch.dense_intermediate if dense and arch.dense_layers else arch.intermediate)
        if arch.experts and not (dense and arch.dense_layers):
            mlp = h * arch.experts + arch.experts_per_token * mlp + 3 * h * arch.shared_experts * arch.intermediate
        per_token = h * (2 * arch.q_width + 2 * arch.kv_width) + mlp
        if arch.mla:
            core = 2 * b * s * s * arch.heads * (arch.head_dim + arch.v_head_dim)
            per_token = _latent_projections(arch) + mlp
    return 2 * s * b * per_token + core, core, 2 * s * b * h * arch.vocab


def _latent_projections(arch: Architecture) -> int:
    """MLA's projections per token (multiply-adds): the query latent and its up-projection (or q_proj), the kv
    latent, its up-projection to every head's key and value, o_proj."""
    h, a, d, v = arch.hidden, arch.heads, arch.head_dim, arch.v_head_dim
    q = h * arch.q_lora_rank + arch.q_lora_rank * a * d if arch.q_lora_rank else h * a * d
    kv = h * (arch.kv_lora_rank + arch.rope_dim) + arch.kv_lora_rank * a * (d - arch.rope_dim + v)
    return q + kv + a * v * h


def recompute_fraction(
    arch: Architecture, seq_len: int, micro_batch: int, policy: str, every: int = 1
) -> tuple[int, int]:
    """Extra forward FLOPs of ``policy`` over one step without recomputation, exactly.

    A step is forward + backward ≈ 3 × forward (backward computes two matmuls per forward one).
    Full: one more forward of every layer, L·F_layer ÷ 3·(L·F_layer + F_head) — just under 1/3.
    Selective: one more forward of the attention core, L·4·b·s²·a·d ÷ the same; for a GPT layer
    without the head this is the paper's 4bs²h ÷ 3(24bsh² + 4bs²h) = s ÷ (18h + 3s).
    Op (torchtitan's): the two matmuls it recomputes, wo and w3, 2·s·b·(a·d·h + h·i) per layer.
    Two kinds of layer (deepseek_v3): each layer at its kind's FLOPs.
    """
    if policy == "none":
        return (0, 1)
    layer, core, head = forward_flops(arch, seq_len, micro_batch)
    dense_layer, dense_core, _ = forward_flops(arch, seq_len, micro_batch, dense=True)
    k = arch.dense_layers  # deepseek_v3's first k layers are of the dense kind (0 elsewhere)
    if policy == "full":  # every N-th layer from layer 0: ⌈L ÷ N⌉ of them, ⌈k ÷ N⌉ of the dense kind
        dense_done, done = -(-k // every), -(-arch.layers // every)
        num = dense_done * dense_layer + (done - dense_done) * layer
    elif policy == "selective":
        num = k * dense_core + (arch.layers - k) * core
    else:
        num = arch.layers * _op_recomputed_flops(arch, seq_len, micro_batch)
    den = 3 * (k * dense_layer + (arch.layers - k) * layer + head)
    g = gcd(num, den)
    return (num // g, den // g)


def _op_recomputed_flops(arch: Architecture, seq_len: int, micro_batch: int) -> int:
    """torchtitan's per-op policy recomputes every second of a block's five matmuls: wo and w3."""
    return 2 * seq_len * micro_batch * arch.hidden * (arch.q_width + arch.intermediate)
