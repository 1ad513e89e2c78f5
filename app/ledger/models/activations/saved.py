"""What one decoder layer (and the model's ends) keeps for backward: tensor by tensor, per family.

Two models of a decoder layer, both stated tensor by tensor in :func:`layer_saved`:

- ``gpt2`` / ``gpt_neox``: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models", §4 and Table 2, restated per element so that other activation widths stay
  exact: ``act_bytes`` × (8·s·b·h + 2·s·b·i + 2·a·s²·b) + 1 B × (2·s·b·h + a·s²·b) for the dropout
  masks, which PyTorch keeps as one byte per element whatever the activation width. At 2-byte
  activations and i = 4h this is the paper's s·b·h·(34 + 5·a·s/h) exactly.
- ``llama`` / ``mistral`` / ``qwen2`` / ``qwen3`` / ``mixtral``: SwiGLU MLP, grouped-query attention through a
  FlashAttention-style kernel that keeps no s×s scores (only its FP32 log-sum-exp), RMSNorm that
  keeps its input and FP32 1/rms, no dropout; MoE keeps each token's top-k expert activations;
  Qwen3's per-head q/k RMSNorms keep theirs over the q and k heads.
- ``gemma2``: eager attention (the s×s scores, soft-capped), four FP32 RMSNorms a layer, a GeGLU MLP.

Integer arithmetic only. Where ``tp`` (or sequence parallelism) divides a sum, the per-rank figure
is rounded **up** to a whole byte, once per figure (:func:`per_rank`): per layer, embedding, head, logits.
"""

from __future__ import annotations

from dataclasses import replace

from app.ledger.arithmetic import ceil_div
from app.ledger.models.activations.entries import FP32, INDEX, MASK, Saved, dense_swiglu, has_dropout, norm_inputs
from app.ledger.models.activations.latent import latent_attention
from app.ledger.models.architecture import GPT_FAMILIES, Architecture

# ---------------------------------------------------------------------------------------------
# One decoder layer
# ---------------------------------------------------------------------------------------------


def _gpt_layer(arch: Architecture, s: int, b: int, w: int) -> tuple[Saved, ...]:
    """Korthikanti et al. 2022, §4.1, per element: attention 11·s·b·h + 5·a·s²·b, MLP 19·s·b·h,
    two LayerNorms 4·s·b·h bytes at 2-byte activations and i = 4h (dropout masks 1 B/element).

    GPT-NeoX as it trains: no dropout (no masks; the softmax output is the one tensor ``× V`` saves), and
    with its parallel residual both LayerNorms read the layer input, one saved tensor."""
    h, i, a = arch.hidden, arch.intermediate, arch.heads
    sbh, sbi, ass = s * b * h, s * b * i, a * s * s * b
    dropout = has_dropout(arch)
    if arch.parallel_residual:
        norm_inputs = Saved("LayerNorm input (the layer input, read by both: parallel residual)", "s·b·h", sbh, w,
                            False)  # fmt: skip
    else:
        norm_inputs = Saved("LayerNorm inputs (2 per layer)", "2·s·b·h", 2 * sbh, w, False)
    scores = (
        (
            Saved("softmax output", "a·s²·b", ass, w, True, core=True),
            Saved("softmax dropout mask", "a·s²·b", ass, MASK, True, core=True),
            Saved("attention dropout output (for ×V)", "a·s²·b", ass, w, True, core=True),
        )
        if dropout
        else (Saved("softmax output (for its backward and ×V)", "a·s²·b", ass, w, True, core=True),)
    )
    return (
        norm_inputs,
        Saved("QKV projection input", "s·b·h", sbh, w, False),
        Saved("Q and K (for QKᵀ)", "2·s·b·h", 2 * sbh, w, True),
        *scores,
        Saved("V", "s·b·h", sbh, w, True),
        Saved("attention output projection input", "s·b·h", sbh, w, True),
        *((Saved("attention dropout mask", "s·b·h", sbh, MASK, False),) if dropout else ()),
        Saved("MLP first linear input", "s·b·h", sbh, w, False),
        Saved("GeLU input", "s·b·i", sbi, w, True),
        Saved("GeLU output (second linear input)", "s·b·i", sbi, w, True),
        *((Saved("MLP dropout mask", "s·b·h", sbh, MASK, False),) if dropout else ()),
    )


def _sandwich_norms(sb: int, h: int, w: int, norms: str) -> list[Saved]:
    """The Gemma families' four RMSNorms a layer, before and after each sublayer: what their inputs leave kept, and
    (unless fused) the (1 + weight) each multiplies by in FP32 (``Gemma2RMSNorm``, ``Gemma3RMSNorm``)."""
    out = norm_inputs(sb * h, w, norms, count=4)
    if norms != "fused":
        out.append(Saved("RMSNorm (1 + weight) in FP32, one per norm", "4·h", 4 * h, FP32, False))
    return out


def _qk_norms(arch: Architecture, sb: int, w: int, norms: str) -> list[Saved]:
    """The ``q_norm`` and ``k_norm`` of the q_proj and k_proj outputs, before RoPE (transformers 5.23.0): an RMSNorm
    of head_dim over each query and key head (``Qwen3Attention``) or over the whole projections
    (``Olmo2Attention``). Each keeps what the layer's norms keep (``norms``), over s·b·(a + kv)·d elements, and
    its FP32 1/rms, per head per token (Qwen3) or per token (OLMo 2, one per norm). RoPE after them keeps only
    cos and sin (they need no gradient), so the normalised heads are not kept twice. Inside the tensor-parallel
    region: each rank normalises its own heads."""
    heads = arch.heads + arch.kv_heads
    elements = sb * heads * arch.head_dim
    shape = "s·b·(a + kv)·d"
    if norms == "fused":
        kept = [Saved("q_norm and k_norm inputs (q_proj and k_proj outputs)", shape, elements, w, True, qk=True)]
    else:
        normalised = FP32 if norms == "composite" else w
        upcast = "q_norm and k_norm FP32 upcasts of the inputs (kept by pow and mul)"
        before_weight = f"q_norm and k_norm normalised inputs before the weight ({norms})"
        kept = [Saved(upcast, shape, elements, FP32, True, qk=True),
                Saved(before_weight, shape, elements, normalised, True, needs="qk_norm_w")]  # fmt: skip
    if arch.qk_norm == "projection":
        return [*kept, Saved("q_norm and k_norm 1/rms (FP32, per token per norm)", "2·s·b", 2 * sb, FP32, True)]
    if arch.sandwich_norms and norms != "fused":  # Gemma3RMSNorm: (1 + weight) in FP32, one of head_dim per norm
        kept.append(Saved("q_norm and k_norm (1 + weight) in FP32", "2·d", 2 * arch.head_dim, FP32, False))
    return [*kept, Saved("q_norm and k_norm 1/rms (FP32, per head per token)", "s·b·(a + kv)", sb * heads, FP32, True,
                         qk=True)]  # fmt: skip


def _swiglu_attention(arch: Architecture, s: int, b: int, w: int, norms: str, gqa: str) -> list[Saved]:
    """The norms and the attention of a SwiGLU / GQA layer (a FlashAttention-style kernel). ``gqa = expand``:
    transformers' SDPA path with a mask it cannot drop: repeat_kv's K and V for every head, and the mask SDPA
    keeps in the activation width (b·s², one per layer: each call converts it)."""
    if arch.mla:
        return latent_attention(arch, s, b, w, norms)
    h, a, d, kv = arch.hidden, arch.heads, arch.head_dim, arch.kv_heads
    sb = s * b
    count = 4 if arch.sandwich_norms else 2
    kept_by_norms = (
        _sandwich_norms(sb, h, w, norms) if arch.sandwich_norms else norm_inputs(sb * h, w, norms, arch.post_norms)
    )
    # OLMo 2 normalises after each sublayer: what q/k/v and the MLP read is the layer input and the residual
    # stream after the attention, the same sizes as a pre-norm layer's norm outputs
    read = (
        "the layer input (q/k/v input) and the residual (MLP input)"
        if arch.post_norms
        else ("RMSNorm outputs (q/k/v input, MLP input)")
    )
    fused: list[Saved] = []
    if arch.fused:
        # Phi3Attention (transformers 5.23.0): V is a view of the fused qkv_proj output, so SDPA's saved V keeps
        # the whole output; and the CPU SDPA kernel returns its output in q's layout, which RoPE's cat made
        # contiguous: the reshape for o_proj copies it, and SDPA's own output stays saved for its backward.
        # Both read off a probe of the layer and held to the trace (docs/fidelity.md).
        kv_saved = Saved("K after RoPE (kv_heads × head_dim)", "s·b·kv·d", sb * kv * d, w, True)
        qkv = "qkv_proj output, kept whole by V (a view of it)"
        out = "SDPA's output (for its backward), before the reshape's copy"
        fused = [
            Saved(qkv, "s·b·(a + 2·kv)·d", sb * (a + 2 * kv) * d, w, True),
            Saved(out, "s·b·a·d", sb * a * d, w, True, core=True),
        ]
        mask = []
    elif gqa == "expand":
        kv_saved = Saved("K and V expanded to every head (repeat_kv)", "2·s·b·a·d", 2 * sb * a * d, w, True)
        mask = [Saved("attention mask, additive, in the activation width (SDPA's per call)", "b·s²", b * s * s, w,
                      False)]  # fmt: skip
    else:
        kv_saved = Saved("K and V (kv_heads × head_dim each)", "2·s·b·kv·d", 2 * sb * kv * d, w, True)
        mask = []
    # OLMo 2's rotary tables stay FP32 (Olmo2RotaryEmbedding returns them uncast; Llama's casts them to x's
    # dtype); FSDP2 casts each decoder layer's floating-point inputs to the compute width (MixedPrecisionPolicy
    # cast_forward_inputs), so every layer holds its own cos and sin, (1, s, d) each, kept by RoPE's muls.
    tables = [Saved("RoPE cos and sin, cast to the compute width for this layer (OLMo 2's tables are FP32)",
                    "2·s·d", 2 * s * d, w, False, layer_input=True)] if arch.fp32_rope and w < FP32 else []  # fmt: skip
    return [
        *kept_by_norms,
        *tables,
        Saved("RMSNorm 1/rms (FP32, per token per norm)", f"{count}·s·b", count * sb, FP32, False, norms=count),
        Saved(read, "2·s·b·h", 2 * sb * h, w, False, needs="in_w"),
        *(_qk_norms(arch, sb, w, norms) if arch.qk_norm else ()),
        Saved("Q after RoPE (heads × head_dim)", "s·b·a·d", sb * a * d, w, True),
        kv_saved,
        *fused,
        *mask,
        # Phi-3's o_proj reads the reshape's copy (above): kept by o_proj's weight alone; elsewhere a view of SDPA's
        # output, which SDPA keeps for its own backward
        Saved("attention output = o_proj input", "s·b·a·d", sb * a * d, w, True, needs="o_w" if arch.fused else ""),
        Saved("attention log-sum-exp (FP32, per head per token)", "s·b·a", sb * a, FP32, True, core=True),
    ]


def _swiglu_mlp(arch: Architecture, s: int, b: int, w: int, dense: bool = False) -> list[Saved]:
    """A dense SwiGLU MLP (``dense``: deepseek_v3's first layers', of dense_intermediate), or a MoE block's router
    and each token's k expert passes."""
    h, i = arch.hidden, arch.intermediate
    sb = s * b
    if dense and arch.dense_layers:
        return dense_swiglu(sb, arch.dense_intermediate, w, shape="i_dense")
    if arch.experts == 0:
        return dense_swiglu(sb, i, w, "GeLU (tanh)" if arch.sandwich_norms else "SiLU")  # Gemma's MLP is GeGLU
    # transformers' grouped-GEMM experts (5.23.0 integrations/moe.py, the default experts_implementation): the k·s·b
    # token slots sorted by expert (the order, the gather of the inputs, the scatter back: int64 each) and one int32
    # offset per expert; the routing weights renormalised in FP32 keep their sum and the k weights before any cast.
    # Read off a probe of each family's MoE block and held to the trace.
    e, k = arch.experts, arch.experts_per_token
    weights = FP32 if arch.fp32_routing_weights else w
    out = [
        Saved("router probabilities (FP32 softmax)", "s·b·E", sb * e, FP32, False),
        Saved("top-k routing weights, in expert order (for their product)", "k·s·b", k * sb, weights, False),
        Saved("top-k dispatch indices (int64)", "s·b·k", sb * k, INDEX, False),
        Saved("grouped GEMM's sort order, gather and scatter indices (int64)", "3·k·s·b", 3 * k * sb, INDEX, False),
        Saved("grouped GEMM's offsets, one per expert (int32)", "E", e, 4, False),
        # the grouped GEMMs' inputs, kept for the experts' weight gradients alone (frozen experts keep neither)
        Saved(
            "expert inputs (each token to its k experts)",
            "k·s·b·h",
            k * sb * h,
            w,
            False,
            slots=True,
            needs="experts_w",
        ),
        Saved("expert gate and up outputs", "2·k·s·b·i", 2 * k * sb * i, w, True, slots=True),
        Saved("expert SiLU outputs", "k·s·b·i", k * sb * i, w, True, slots=True),
        Saved("expert down_proj inputs", "k·s·b·i", k * sb * i, w, True, slots=True, needs="experts_down_w"),
        Saved("expert outputs (for the routing-weight product)", "k·s·b·h", k * sb * h, w, False, slots=True),
    ]
    if arch.topk_renorm:
        out.append(Saved("top-k weights and their sum before the renormalising division (FP32)", "(k + 1)·s·b",
                         (k + 1) * sb, FP32, False))  # fmt: skip
    if arch.family == "deepseek_v3":  # DeepseekV3TopkRouter scores in FP32; DeepseekV3MoE's shared experts
        out[0] = Saved("router scores (FP32 sigmoid)", "s·b·E", sb * e, FP32, False)
        out += [
            Saved("router input upcast to FP32", "s·b·h", sb * h, FP32, False, needs="w:gate"),
            Saved("router weight upcast to FP32", "E·h", e * h, FP32, False),
            *dense_swiglu(sb, arch.shared_experts * i, w, shape="i_shared", whose="shared experts' "),
        ]
    return out


def _swiglu_layer(
    arch: Architecture, s: int, b: int, w: int, norms: str = "fused", gqa: str = "native", dense: bool = False
) -> tuple[Saved, ...]:
    """SwiGLU + GQA with a FlashAttention-style kernel; see the module docstring and the assumptions text.

    ``norms`` = ``unfused``: RMSNorm as transformers' ``LlamaRMSNorm`` (Python ops): each norm keeps an FP32
    upcast of its input (for ``pow`` and the scaling ``mul``) and the normalised input (for the weight's ``mul``)
    instead of the input itself: 4·s·b·h bytes more per norm at any activation width; ``composite``: the
    normalised input in FP32 too, (4 − w)·s·b·h bytes more per norm again."""
    attention = (replace(x, attention=True) for x in _swiglu_attention(arch, s, b, w, norms, gqa))
    return (*attention, *_swiglu_mlp(arch, s, b, w, dense))


def _gemma2_layer(arch: Architecture, s: int, b: int, w: int, norms: str) -> tuple[Saved, ...]:
    """``Gemma2DecoderLayer`` (transformers 5.23.0) with its eager attention (:attr:`Architecture.eager_attention`).

    Four RMSNorms, before and after each sublayer: ``Gemma2RMSNorm`` computes in FP32 and multiplies by (1 + weight)
    in FP32 (``norms = composite``, the hf-fsdp2 stack's for Gemma 2), so each keeps the FP32 upcast, the FP32
    normalised input, its 1/rms and its (1 + weight), h FP32 elements. The attention expands K and V to every head
    (``repeat_kv``), materialises the s×s scores, soft-caps them (``tanh``, which keeps its output), takes the
    softmax in FP32 (kept) and casts it back for ×V (kept). The post-norms' outputs are added to the residual
    (nothing kept); the pre-norms' outputs are what q/k/v and the MLP read. Read off a probe of the layer (autograd's
    saved tensors by storage) and held to the trace."""
    h, a, d = arch.hidden, arch.heads, arch.head_dim
    sb, ass = s * b, arch.heads * s * s * b
    norm_inputs = _sandwich_norms(sb, h, w, norms)
    capped = [Saved("soft-capped scores (tanh output)", "a·s²·b", ass, w, True, core=True)] if arch.attn_softcap else []
    return (
        *norm_inputs,
        Saved("RMSNorm 1/rms (FP32, per token per norm)", "4·s·b", 4 * sb, FP32, False, norms=4),
        Saved("RMSNorm outputs (q/k/v input, MLP input)", "2·s·b·h", 2 * sb * h, w, False, needs="in_w"),
        Saved("Q after RoPE (heads × head_dim)", "s·b·a·d", sb * a * d, w, True),
        Saved("K and V expanded to every head (repeat_kv)", "2·s·b·a·d", 2 * sb * a * d, w, True),
        *capped,
        Saved("softmax output (FP32)", "a·s²·b", ass, FP32, True, core=True),
        Saved("attention probabilities in the activation width (for ×V)", "a·s²·b", ass, w, True, core=True),
        # eager attention's ×V output is copied (transpose, contiguous) for o_proj, whose weight alone keeps it
        Saved("attention output = o_proj input", "s·b·a·d", sb * a * d, w, True, needs="o_w"),
        *_swiglu_mlp(arch, s, b, w),
    )


def routed(saved: tuple[Saved, ...], pct: int) -> tuple[Saved, ...]:
    """``saved`` on the busiest rank under expert parallelism when the routing sends it ``pct`` % of the balanced
    k·s·b token slots: each per-slot entry ⌈elements × pct ÷ 100⌉ (100: unchanged)."""
    if pct == 100:
        return saved
    return tuple(
        Saved(x.what, f"{pct}% × {x.shape}", ceil_div(x.elements * pct, 100), x.width, x.split, x.core,
              x.layer_input, x.slots) if x.slots else x
        for x in saved
    )  # fmt: skip


def layer_saved(
    arch: Architecture,
    seq_len: int,
    micro_batch: int,
    act_bytes: int = 2,
    norms: str = "fused",
    gqa: str = "native",
    dense: bool = False,
) -> tuple[Saved, ...]:
    """Every tensor one decoder layer of ``arch`` keeps for backward with no recomputation (``norms``:
    what an RMSNorm keeps, fused or unfused; LayerNorm models are the same either way; ``dense``: one of
    deepseek_v3's dense first layers)."""
    if arch.family in GPT_FAMILIES:
        return _gpt_layer(arch, seq_len, micro_batch, act_bytes)
    if arch.eager_attention:
        return _gemma2_layer(arch, seq_len, micro_batch, act_bytes, norms)
    return _swiglu_layer(arch, seq_len, micro_batch, act_bytes, norms, gqa, dense)


def op_saved(arch: Architecture, s: int, b: int, w: int) -> tuple[Saved, ...]:
    """What torchtitan 0.3.0's per-op selective AC (``SelectiveAC``, distributed/activation_checkpoint.py) keeps
    of one of its Llama blocks: the checkpoint's input and the cached outputs of the ops its policy saves. The
    block runs five matmuls — wqkv (fused), wo, w1, w3, w2 — and every second one is recomputed, so wqkv's, w1's
    and w2's outputs are saved; attention (flex, SDPA, a flash kernel) is in its save list: its output and FP32
    log-sum-exp. Norms, RoPE, SiLU, the product and the residual adds are recomputed. A dense SwiGLU layer."""
    h, a, d, kv, i = arch.hidden, arch.heads, arch.head_dim, arch.kv_heads, arch.intermediate
    sb = s * b
    return (
        Saved("checkpointed layer input", "s·b·h", sb * h, w, False),
        Saved("wqkv output (1st matmul: saved)", "s·b·(a + 2·kv)·d", sb * (a + 2 * kv) * d, w, True),
        Saved("attention output (saved)", "s·b·a·d", sb * a * d, w, True),
        Saved("attention log-sum-exp (FP32, saved with the output)", "s·b·a", sb * a, FP32, True),
        Saved("w1 output (3rd matmul: saved)", "s·b·i", sb * i, w, True),
        Saved("w2 output (5th matmul: saved)", "s·b·h", sb * h, w, False),
    )


# Entries of the whole saved set that the op policy's cache holds too (the same tensors, not a copy): during the
# layer's backward, its recomputation rebuilds the rest.
OP_CACHED_IN_FULL = ("attention output = o_proj input", "attention log-sum-exp (FP32, per head per token)")


def op_recomputed(full_set: tuple[Saved, ...], arch: Architecture, s: int, b: int, w: int) -> tuple[Saved, ...]:
    """What the op policy's recomputation rebuilds in a layer's backward: the whole saved set but the tensors the
    cache already holds (the attention output and its log-sum-exp, and w1's output, one of the gate and up
    outputs)."""
    rebuilt = [x for x in full_set if x.what not in OP_CACHED_IN_FULL]
    sbi = s * b * arch.intermediate
    return tuple(
        Saved("up_proj (w3) output (gate's is cached)", "s·b·i", sbi, w, True)
        if x.what == "gate_proj and up_proj outputs"
        else x
        for x in rebuilt
    )


def op_released(arch: Architecture, s: int, b: int, w: int) -> tuple[Saved, ...]:
    """The cache entries a layer's recomputation consumes and its backward does not need, freed as the layer's
    backward begins: torch 2.13's SAC hands each cached output to the recompute once and marks its entry consumed
    (utils/checkpoint.py ``_CachedTorchDispatchMode``), so only what the recomputed graph keeps stays. wqkv's output
    (q, k and v are copied out of it and rotated) and w2's (the MLP's output, added to the residual) are kept by
    nothing; attention's output and log-sum-exp and w1's output are (they stay counted once, in the cache)."""
    h, a, d, kv = arch.hidden, arch.heads, arch.head_dim, arch.kv_heads
    sb = s * b
    return (
        Saved("wqkv output, consumed by the recompute", "s·b·(a + 2·kv)·d", sb * (a + 2 * kv) * d, w, True),
        Saved("w2 output, consumed by the recompute", "s·b·h", sb * h, w, False),
    )


def kept_saved(full_set: tuple[Saved, ...], policy: str, s: int, b: int, h: int, w: int) -> tuple[Saved, ...]:
    """What a layer keeps under ``policy``: everything (``none``), all but the attention core
    (``selective``), or only its input (``full``: the checkpoint); ``op`` is :func:`op_saved`'s."""
    if policy == "none":
        return full_set
    if policy == "selective":
        return tuple(x for x in full_set if not x.core)
    inputs = tuple(x for x in full_set if x.layer_input)
    return (Saved("checkpointed layer input", "s·b·h", s * b * h, w, False), *inputs)
