"""What deepseek_v3's multi-head latent attention keeps for backward (transformers 5.23.0's ``DeepseekV3Attention``)."""

from __future__ import annotations

from app.ledger.models.activations.entries import FP32, INDEX, Saved, norm_inputs
from app.ledger.models.architecture import Architecture


def latent_attention(arch: Architecture, s: int, b: int, w: int, norms: str) -> list[Saved]:
    """``DeepseekV3Attention`` (transformers 5.23.0) through the kernel a GPU's SDPA takes for it: q/k heads of d
    and v heads of v rule out the flash kernel, so the memory-efficient one runs, which keeps q, k, v, its output,
    its FP32 log-sum-exp (⌈s ÷ 32⌉·32 rows a head) and its RNG seed and offset, and no s×s scores. Besides the layer's
    two norms: the q latent's RMSNorm (over q_lora_rank) and the kv latent's (over kv_lora_rank) each keep what the
    layer's norms keep, their 1/rms and their output (the up-projections' inputs). Q and K are new tensors (the
    rotated and unrotated parts concatenated, K's shared rotary part copied to every head); V is a view of
    kv_b_proj's output, which it keeps whole (every head's unrotated key too). RoPE keeps only cos and sin.
    Read off a probe of the layer and held to the trace (docs/fidelity.md)."""
    h, a, d, v, sb = arch.hidden, arch.heads, arch.head_dim, arch.v_head_dim, s * b
    nope, lse_rows = d - arch.rope_dim, -(-s // 32) * 32
    out = [
        *norm_inputs(sb * h, w, norms),
        Saved("RMSNorm 1/rms (FP32, per token per norm)", "2·s·b", 2 * sb, FP32, False),
        Saved("RMSNorm outputs (q/kv latent input, MLP input)", "2·s·b·h", 2 * sb * h, w, False, needs="latent_in_w"),
    ]
    latents = [("q_a_layernorm", "q_b_proj", arch.q_lora_rank, "r_q")] if arch.q_lora_rank else []
    for norm, up, r, name in (*latents, ("kv_a_layernorm", "kv_b_proj", arch.kv_lora_rank, "r_kv")):
        if norms == "fused" and norm == "kv_a_layernorm":  # its input is a view of kv_a_proj_with_mqa's output
            out.append(Saved("kv_a_layernorm input (kv_a_proj_with_mqa's output, all of it)", "s·b·(r_kv + r)",
                             sb * (r + arch.rope_dim), w, False))  # fmt: skip
        elif norms == "fused":
            out.append(Saved(f"{norm} input", f"s·b·{name}", sb * r, w, False))
        else:
            out.append(Saved(f"{norm} FP32 upcast of its input", f"s·b·{name}", sb * r, FP32, False))
            out.append(Saved(f"{norm} normalised input ({norms})", f"s·b·{name}", sb * r,
                             FP32 if norms == "composite" else w, False, needs=f"w:{norm}"))  # fmt: skip
        out.append(Saved(f"{norm} 1/rms (FP32)", "s·b", sb, FP32, False))
        out.append(Saved(f"{up} input ({norm} output)", f"s·b·{name}", sb * r, w, False, needs=f"w:{up}"))
    return [
        *out,
        Saved("Q (heads × d, the rotated part concatenated)", "s·b·a·d", sb * a * d, w, True),
        Saved("K expanded to every head (the shared rotary part copied)", "s·b·a·d", sb * a * d, w, True),
        Saved("kv_b_proj output, kept whole by V (a view of it)", "s·b·a·(d_nope + v)", sb * a * (nope + v), w, True),
        Saved("attention output = o_proj input", "s·b·a·v", sb * a * v, w, True),
        Saved(
            "attention log-sum-exp (FP32, ⌈s ÷ 32⌉·32 rows per head)",
            "⌈s ÷ 32⌉·32·b·a",
            lse_rows * b * a,
            FP32,
            True,
            core=True,
        ),
        Saved("the kernel's RNG seed and offset (int64)", "2", 2, INDEX, False, core=True),
    ]
