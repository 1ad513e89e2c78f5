"""The independent oracle: a second, direct stage table.

Deliberately naive and written separately from the ledger: it imports nothing from the
project, has no ownership table and no helpers, and spells out every cell. Check 1 compares
the ledger against it class by class.
"""

from __future__ import annotations


def stage_table(
    params: int,
    dp: int,
    param_bytes: int,
    grad_bytes: int,
    master_bytes: int,
    opt_states: int,
    opt_bytes: int,
    optimizer_offloaded: bool = False,
    params_offloaded: bool = False,
    expert_params: int = 0,
    ep: int = 1,
    shard_group: int = 0,
    hpz: int = 1,
    trainable: int = 0,
    frozen_bytes: int = 0,
    cp: int = 1,
    frozen_stored: int = 0,
) -> dict[int, dict[str, int]]:
    """Persistent bytes per busiest rank on the device for stages 0–3, by class, straight from the ZeRO
    paper; with offload, ZeRO-Offload's (Ren et al., ATC'21, §4) and ZeRO-Infinity's moves zero a cell.

    ``expert_params`` of the ``params`` are sharded over dp ÷ ep ranks (DeepSpeed-MoE), the rest over
    ``shard_group`` ranks (HSDP / MiCS; 0 = all dp); ``hpz`` > 1 adds ZeRO++'s secondary partition of
    ⌈params ÷ hpz⌉ parameters at stage 3 (Wang et al., ZeRO++, §3.2). ``trainable`` (0 = all of them) of the
    params train: only they have gradients, master weights and optimizer states; the frozen rest keep
    ``frozen_bytes`` (0 = param_bytes) per parameter. ``cp`` context-parallel ranks hold the same parameters as their
    data-parallel rank and FSDP shards over them too (torchtitan 0.3.0 parallel_dims.py: fsdp = dp_shard × cp): the
    shard group is cp times larger. ``frozen_stored`` (0 = one per frozen parameter): the elements the frozen
    parameters are stored in (QLoRA's packed 4-bit codes: :func:`qlora_stored`)."""
    group = (shard_group if shard_group else dp) * cp
    if expert_params:
        # dense over the shard group, experts over their expert-data-parallel ranks, each rounded up
        dense = params - expert_params
        shard = (dense + group - 1) // group + (expert_params + dp // ep - 1) // (dp // ep)
    else:
        shard = (params + group - 1) // group  # the busiest rank's share, rounded up
    trains = trainable if trainable else params
    frozen = frozen_stored if frozen_stored else params - trains
    trains_shard = shard if trains == params else (trains + group - 1) // group
    frozen_shard = (frozen + group - 1) // group
    frozen_width = frozen_bytes if frozen_bytes else param_bytes
    if frozen and (frozen_width != param_bytes or frozen_stored):  # each part at its own width
        whole_params = trains * param_bytes + frozen * frozen_width
        sharded_params = trains_shard * param_bytes + frozen_shard * frozen_width
    else:
        whole_params, sharded_params = params * param_bytes, shard * param_bytes
    table = {
        0: {
            "parameters": whole_params,
            "gradients": trains * grad_bytes,
            "master_weights": trains * master_bytes,
            "optimizer_states": trains * opt_states * opt_bytes,
        },
        1: {
            "parameters": whole_params,
            "gradients": trains * grad_bytes,
            "master_weights": trains_shard * master_bytes,
            "optimizer_states": trains_shard * opt_states * opt_bytes,
        },
        2: {
            "parameters": whole_params,
            "gradients": trains_shard * grad_bytes,
            "master_weights": trains_shard * master_bytes,
            "optimizer_states": trains_shard * opt_states * opt_bytes,
        },
        3: {
            "parameters": sharded_params,
            "gradients": trains_shard * grad_bytes,
            "master_weights": trains_shard * master_bytes,
            "optimizer_states": trains_shard * opt_states * opt_bytes,
        },
    }
    if hpz > 1:  # the secondary partition sits beside the primary shard
        table[3]["parameters"] += (params + hpz - 1) // hpz * param_bytes
    if optimizer_offloaded:  # stages 1–3: master and optimizer states on the host; stages 2–3 the gradients too
        table[1]["master_weights"] = table[1]["optimizer_states"] = 0
        table[2]["master_weights"] = table[2]["optimizer_states"] = table[2]["gradients"] = 0
        table[3]["master_weights"] = table[3]["optimizer_states"] = table[3]["gradients"] = 0
    if params_offloaded:  # stage 3 only
        table[3]["parameters"] = 0
    return table


def host_table(
    params: int,
    dp: int,
    param_bytes: int,
    grad_bytes: int,
    master_bytes: int,
    opt_states: int,
    opt_bytes: int,
    offload_optimizer: str,
    offload_param: str,
    ranks_per_node: int,
    largest_tensor: int,
    world: int = 0,
    expert_params: int = 0,
    ep: int = 1,
    shard_group: int = 0,
    trainable: int = 0,
    cp: int = 1,
) -> dict[int, int]:
    """Host RAM per node during training for stages 0–3, spelled out from DeepSpeed's offload
    allocations (stage_1_and_2.py, stage3.py, the swappers), every cell by hand. The optimizer's terms are over the
    ``trainable`` parameters' partition (0 = all train), the parameter offload's over every parameter; ``cp``: the
    shard group is cp times larger (as :func:`stage_table` says)."""
    group = (shard_group if shard_group else dp) * cp
    if expert_params:
        everything = (params - expert_params + group - 1) // group + (expert_params + dp // ep - 1) // (dp // ep)
    else:
        everything = (params + group - 1) // group
    p = everything if not trainable or trainable == params else (trainable + group - 1) // group
    opt = opt_states * opt_bytes
    master = master_bytes if master_bytes else 4  # FP32 training: the CPU optimizer's own FP32 copy
    cpu, nvme = offload_optimizer == "cpu", offload_optimizer == "nvme"
    below3 = cpu or nvme  # stages 1–2 have no NVMe path: the state stays in host RAM either way
    per_rank = {
        0: 0,
        # master (or FP32 copy) + optimizer + FP32 grads + 16-bit staging copy + the largest parameter's gradient buffer
        1: (p * master + p * opt + p * 4 + p * param_bytes + largest_tensor * param_bytes) if below3 else 0,
        2: (p * master + p * opt + p * 4 + p * param_bytes + largest_tensor * param_bytes) if below3 else 0,
        3: 0,
    }
    if cpu:  # master + optimizer + FP32 grads in RAM, and the 16-bit gradient partition
        per_rank[3] += p * master + p * opt + p * 4 + p * grad_bytes
    if nvme:  # the state is on NVMe: RAM keeps the 16-bit gradient partition and 4 swap buffers
        per_rank[3] += p * grad_bytes + 4 * min(p, 1_000_000_000) * 4
    if offload_param == "cpu":
        per_rank[3] += everything * param_bytes
    if offload_param == "nvme":  # max_in_cpu (10⁹) elements kept in RAM, and 5 swap buffers of 10⁸ elements
        per_rank[3] += min(everything, 1_000_000_000) * param_bytes + 5 * 100_000_000 * param_bytes
    gpus = world if world else dp
    ranks = ranks_per_node if ranks_per_node < gpus else gpus  # a run of fewer GPUs than a node has
    return {stage: ranks * per_rank[stage] for stage in (0, 1, 2, 3)}


def rank_params(
    family: str,
    hidden: int,
    layers: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    intermediate: int,
    vocab: int,
    experts: int,
    tied: bool,
    qkv_bias: bool,
    o_bias: bool,
    mlp_bias: bool,
    layernorm: bool,
    positions: int,
    tp: int = 1,
    pp: int = 1,
    stage: str = "first",
    ep: int = 1,
    qk_norm: str = "",
    *,
    q_lora_rank: int = 0,
    kv_lora_rank: int = 0,
    rope_dim: int = 0,
    v_head_dim: int = 0,
    dense_layers: int = 0,
    dense_intermediate: int = 0,
    shared_experts: int = 0,
) -> tuple[int, int]:
    """(dense, experts): the parameters one rank holds under Megatron-LM's layout, before ZeRO shards them,
    spelled out family by family from the checkpoint shapes (Shoeybi et al. 2019; Narayanan et al. 2021).

    Tensor parallelism splits a column-parallel weight on its output features (its bias too), a row-parallel weight
    on its input features (its bias kept whole), the token embedding and the LM head on the vocabulary; norms, the
    MoE router and GPT-2's ``wpe`` (``positions`` rows, read by GPT-2 alone: the others are rotary) are whole.
    Attention splits by whole heads: the busiest rank holds ⌈heads ÷ tp⌉ query heads and ⌈kv_heads ÷ tp⌉ key/value
    heads (fewer key/value heads than tp: one each, replicated, as inference engines do), of the other split
    dimensions (the MLP's intermediate features, the vocabulary) ⌈dim ÷ tp⌉. Pipeline stage ``stage`` (``first`` or
    ``last``; either is the whole model when pp = 1) holds layers ÷ pp decoder layers, the first the embedding, the
    last the final norm and the head, and with ``tied`` embeddings and pp > 1 a copy of the token embedding. A rank
    holds experts ÷ ep of each MoE layer's experts: ``experts`` of the answer counts theirs (at ep = 1 all of them,
    which ZeRO then shards like the rest). ``layernorm``: each norm has a weight and a bias (else a weight).
    ``qk_norm``: two more RMSNorm weights per layer, of head_dim each and whole on every rank (``head``, Qwen3), or
    over the whole q and k projections and split with their heads (``projection``, OLMo 2).
    deepseek_v3 (the keyword arguments, :data:`LATENT_KEYS`): the latents (q_a_proj, kv_a_proj_with_mqa and their
    norms) whole, q_b_proj and kv_b_proj split by whole heads, o_proj by its heads' v inputs; the first
    ``dense_layers`` layers a dense MLP of ``dense_intermediate``, the others the routed experts, the router and one
    shared MLP of ``shared_experts`` × ``intermediate``.

    Llama-2-7B, pp = 4, first stage: 8 layers × (4 × 4,096² + 3 × 4,096 × 11,008 + 2 × 4,096 = 202,383,360)
    + the embedding 32,000 × 4,096 = 131,072,000, so 1,750,138,880 dense. Mixtral-8x7B, ep = 4: 32 layers ×
    (4,096² × 2 + 1,024 × 4,096 × 2 + 8 × 4,096 + 2 × 4,096 = 41,984,000) + 131,072,000 × 2 + 4,096 =
    1,605,636,096 dense and 32 × 2 × 3 × 4,096 × 14,336 = 11,274,289,152 expert.
    """
    h, i = hidden, intermediate
    norm = 2 * h if layernorm else h  # one norm's parameters
    vocab_rows = (vocab + tp - 1) // tp  # the busiest rank's rows of the embedding and of the head
    layer = expert = 0  # one decoder layer's dense parameters per rank, and one expert's
    if family == "phi3":  # fused projections, no biases: Phi3Attention's qkv_proj, Phi3MLP's gate_up_proj
        q = (heads + tp - 1) // tp * head_dim
        kv = (kv_heads + tp - 1) // tp * head_dim
        inner = (i + tp - 1) // tp
        layer += (q + 2 * kv) * h  # qkv_proj [(a + 2·kv)·d, h], column parallel: each part by whole heads
        layer += h * q  # o_proj [h, a·d], row parallel
        layer += 2 * inner * h + h * inner  # gate_up_proj [2·i, h] (gate and up each split), down_proj [h, i]
        layer += 2 * norm
        embed = vocab_rows * h
        final = norm + (0 if tied else vocab_rows * h)
    elif family in ("llama", "mistral", "qwen2", "qwen3", "olmo2", "mixtral", "qwen3_moe", "gemma2", "gemma3_text"):
        q = (heads + tp - 1) // tp * head_dim  # column parallel, whole heads: the query's output features
        kv = (kv_heads + tp - 1) // tp * head_dim  # each of the key's and the value's (fewer than tp: one, replicated)
        layer += q * h + (q if qkv_bias else 0)  # q_proj [heads·d, h]
        layer += 2 * (kv * h + (kv if qkv_bias else 0))  # k_proj, v_proj [kv·d, h]
        layer += h * q + (h if o_bias else 0)  # o_proj [h, heads·d], row parallel: input features, bias whole
        inner = (i + tp - 1) // tp  # the MLP's intermediate features per rank
        if experts == 0:
            layer += 2 * (inner * h + (inner if mlp_bias else 0))  # gate_proj, up_proj [i, h], column parallel
            layer += h * inner + (h if mlp_bias else 0)  # down_proj [h, i], row parallel, bias whole
        else:
            layer += experts * h  # the router gate [E, h], whole on every rank
            expert = inner * h + h * inner + inner * h  # w1 [i, h] column, w2 [h, i] row, w3 [i, h] column
        layer += 2 * norm  # input_layernorm, post_attention_layernorm
        if family in ("gemma2", "gemma3_text"):
            layer += 2 * norm  # and pre_feedforward_layernorm, post_feedforward_layernorm: a norm after each sublayer
        if qk_norm == "head":
            layer += 2 * head_dim  # self_attn.q_norm, self_attn.k_norm [d], whole
        elif qk_norm == "projection":
            layer += q + kv  # self_attn.q_norm [a·d], k_norm [kv·d]: the rank's heads
        embed = vocab_rows * h  # model.embed_tokens [V, h]
        final = norm + (0 if tied else vocab_rows * h)  # model.norm, lm_head [V, h]
    elif family == "gpt2":
        row = (heads + tp - 1) // tp * head_dim  # whole heads per rank: the attention's h features split
        qkv = 3 * row  # c_attn is Conv1D [h, 3h]: column parallel on dim 1 (q, k, v of the rank's heads), bias too
        inner = (i + tp - 1) // tp
        layer += 2 * norm  # ln_1, ln_2 (weight and bias)
        layer += h * qkv + qkv  # attn.c_attn
        layer += row * h + h  # attn.c_proj Conv1D [h, h]: row parallel on dim 0, bias whole
        layer += h * inner + inner  # mlp.c_fc Conv1D [h, i], column parallel on dim 1
        layer += inner * h + h  # mlp.c_proj Conv1D [i, h], row parallel on dim 0, bias whole
        embed = vocab_rows * h + positions * h  # transformer.wte [V, h] split, wpe [positions, h] whole
        final = norm + (0 if tied else vocab_rows * h)  # transformer.ln_f, lm_head
    elif family == "gpt_neox":
        row = (heads + tp - 1) // tp * head_dim  # whole heads per rank
        qkv = 3 * row  # query_key_value Linear [3h, h], column parallel (q, k, v of the rank's heads)
        inner = (i + tp - 1) // tp
        layer += 2 * norm  # input_layernorm, post_attention_layernorm
        layer += qkv * h + (qkv if qkv_bias else 0)  # attention.query_key_value
        layer += h * row + (h if o_bias else 0)  # attention.dense [h, h], row parallel, bias whole
        layer += inner * h + (inner if mlp_bias else 0)  # mlp.dense_h_to_4h [i, h], column parallel
        layer += h * inner + (h if mlp_bias else 0)  # mlp.dense_4h_to_h [h, i], row parallel, bias whole
        embed = vocab_rows * h  # gpt_neox.embed_in
        final = norm + (0 if tied else vocab_rows * h)  # gpt_neox.final_layer_norm, embed_out
    elif family == "deepseek_v3":
        rank_heads = (heads + tp - 1) // tp
        if q_lora_rank:  # q_a_proj [r, h] (bias), q_a_layernorm [r], q_b_proj [heads·d, r]
            layer += (
                q_lora_rank * h + (q_lora_rank if qkv_bias else 0) + q_lora_rank + rank_heads * head_dim * q_lora_rank
            )
        else:
            layer += rank_heads * head_dim * h  # q_proj
        latent = kv_lora_rank + rope_dim
        layer += latent * h + (latent if qkv_bias else 0) + kv_lora_rank  # kv_a_proj_with_mqa, kv_a_layernorm
        layer += rank_heads * (head_dim - rope_dim + v_head_dim) * kv_lora_rank  # kv_b_proj [heads·(nope + v), r]
        layer += h * rank_heads * v_head_dim + (h if o_bias else 0)  # o_proj [h, heads·v]
        layer += 2 * norm
        dense_mlp = 3 * h * ((dense_intermediate + tp - 1) // tp)
        inner = (i + tp - 1) // tp
        moe_only = experts * h + 3 * h * ((shared_experts * i + tp - 1) // tp)  # router; shared experts' SwiGLU
        expert = 3 * inner * h
        embed = vocab_rows * h
        final = norm + (0 if tied else vocab_rows * h)
        stage_layers = layers // pp
        first = layers - stage_layers if pp > 1 and stage == "last" else 0
        dense_here = max(0, min(dense_layers, first + stage_layers) - first)
        moe_here = stage_layers - dense_here
        dense = stage_layers * layer + dense_here * dense_mlp + moe_here * moe_only
        return _with_ends(dense, embed, final, pp, stage, vocab_rows * h if tied else 0), moe_here * (
            experts // ep
        ) * expert
    else:
        raise ValueError(f"no tensor-parallel layout for family {family!r}")
    stage_layers = layers // pp
    dense = _with_ends(stage_layers * layer, embed, final, pp, stage, vocab_rows * h if tied else 0)
    return dense, stage_layers * (experts // ep) * expert


def _with_ends(layers: int, embed: int, final: int, pp: int, stage: str, tied_copy: int) -> int:
    """A stage's layers with its ends: the whole model (pp = 1), the first stage the embedding, the last the final
    norm and head, and a tied head's own copy of the token embedding (``tied_copy``)."""
    if pp == 1:  # one stage: the whole model
        return layers + embed + final
    if stage == "first":
        return layers + embed
    if stage == "last":
        return layers + final + tied_copy
    raise ValueError(f"pipeline stage {stage!r} is not first or last")


# The keyword arguments of :func:`rank_params` a deepseek_v3 model adds (its Architecture's fields of these names).
LATENT_KEYS = ("q_lora_rank", "kv_lora_rank", "rope_dim", "v_head_dim", "dense_layers", "dense_intermediate",
               "shared_experts")  # fmt: skip


# PEFT 0.21.0's LoRA on a Llama-shaped layer, from the plain dimensions: each linear module's (in, out) features,
# by the name PEFT matches; its default targets for these families are q_proj and v_proj.
LORA_FAMILIES = ("llama", "mistral", "qwen2", "qwen3")


def lora_params(
    layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int, intermediate: int, rank: int, targets: str
) -> int:
    """Adapter parameters ``LoraConfig(r=rank, target_modules=targets)`` adds: r × (in + out) per targeted module
    per layer (``lora_A`` r × in, ``lora_B`` out × r)."""
    q, kv = heads * head_dim, kv_heads * head_dim
    features = {
        "q_proj": (hidden, q), "k_proj": (hidden, kv), "v_proj": (hidden, kv), "o_proj": (q, hidden),
        "gate_proj": (hidden, intermediate), "up_proj": (hidden, intermediate), "down_proj": (intermediate, hidden),
    }  # fmt: skip
    named = [t.strip() for t in targets.split(",") if t.strip()] or ["q_proj", "v_proj"]
    chosen = list(features) if named == ["all-linear"] else named
    return layers * sum(rank * sum(features[name]) for name in chosen)


def qlora_stored(
    layers: int, hidden: int, heads: int, kv_heads: int, head_dim: int, intermediate: int, frozen: int
) -> int:
    """The elements ``frozen`` parameters of a Llama-shaped model are stored in when its layers' seven linear weights
    are 4-bit codes, two per byte, in 2-byte elements (bitsandbytes' quant_storage bfloat16): ⌈n ÷ 4⌉ each."""
    q, kv = heads * head_dim, kv_heads * head_dim
    weights = [hidden * q, hidden * kv, hidden * kv, q * hidden, hidden * intermediate, hidden * intermediate,
               intermediate * hidden]  # fmt: skip
    return frozen - layers * sum(weights) + layers * sum((w + 3) // 4 for w in weights)
