"""Every parameter tensor of an architecture, its exact count, and the units FSDP2 / DeepSpeed gather.

Names and shapes are those of the Hugging Face checkpoint (``model.layers.0.self_attn.q_proj.weight``
of shape [4096, 4096]; GPT-2's Conv1D weights stored [in, out]), because FSDP2 pads dim 0 of
exactly these tensors. A tied LM head is the embedding tensor itself and is counted once.

Wrapped units follow the usual decoder wrap (torchtitan's ``fully_shard`` per block, DeepSpeed /
FSDP ``transformer_auto_wrap_policy``): ``embed`` (token embedding, plus GPT-2's learned position
embedding), one unit per decoder layer ``layers.0`` … ``layers.{L-1}``, and ``final`` (the final
norm with the untied LM head, which the root unit holds when nothing else wraps them). With a tied
head the ``final`` unit is the norm alone: the head's matmul reuses the ``embed`` unit's weight.

The decoder layers of a kind are identical (one kind in most models; deepseek_v3's dense first layers and its MoE
ones), so the layer units of a kind share one tuple of tensors whose names are relative to the unit's prefix, and a
MoE layer's experts are two fused tensors, as transformers 5.23.0 holds them; :meth:`Inventory.tensors` spells out
every full name lazily. That keeps an inventory of Llama-2-70B (80 layers) or of 1,024 layers of 1,024 experts a few
dozen objects, cheap to build and to answer per request.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from app.ledger.models.architecture import Architecture


@dataclass(frozen=True, slots=True)
class Tensor:
    """One parameter tensor: its name, shape, and elements (the shape's product)."""

    name: str
    shape: tuple[int, ...]
    numel: int


@dataclass(frozen=True, slots=True)
class Unit:
    """One wrapped unit: all-gathered at once under ZeRO-3 / FSDP.

    ``tensors`` carry names relative to ``prefix`` (the full name is ``prefix + tensor.name``);
    decoder layers share the same tuple.
    """

    name: str
    prefix: str
    tensors: tuple[Tensor, ...]
    params: int

    def full_tensors(self) -> Iterator[Tensor]:
        """This unit's tensors one by one, with their full checkpoint names."""
        for t in self.tensors:
            yield Tensor(self.prefix + t.name, t.shape, t.numel)


@dataclass(frozen=True, slots=True)
class Inventory:
    """The parameter inventory of one architecture.

    ``params`` is the exact count (a tied head counted once) and equals the sum of every
    tensor's ``numel``; ``units`` are in execution order; ``largest_unit`` is the first unit of
    the greatest size (the ``U`` of the ledger).
    """

    architecture: Architecture
    units: tuple[Unit, ...]
    params: int
    largest_unit: Unit
    tensor_count: int

    @property
    def embed(self) -> Unit:
        return self.units[0]

    @property
    def final(self) -> Unit:
        return self.units[-1]

    @property
    def layer_kinds(self) -> tuple[tuple[int, int, Unit], ...]:
        """(first layer, how many, one such layer's unit) per run of alike layers: one run for most models;
        deepseek_v3's dense first layers, then its MoE ones."""
        arch = self.architecture
        if not arch.two_kinds:
            return ((0, arch.layers, self.units[1]),)
        k = arch.dense_layers
        return ((0, k, self.units[1]), (k, arch.layers - k, self.units[1 + k]))

    def tensors(self) -> Iterator[Tensor]:
        """Every parameter tensor with its full name, in unit order, one by one (lazily: as many as
        the model has, millions for the largest MoE configs, so callers that answer a request list
        ``units`` and their grouped ``tensors`` instead)."""
        for unit in self.units:
            yield from unit.full_tensors()

    def unit_sizes(self) -> tuple[tuple[str, int], ...]:
        """(name, params) of every unit, as the receipt lists them."""
        return tuple((u.name, u.params) for u in self.units)


def _t(name: str, *shape: int) -> Tensor:
    return Tensor(name, shape, math.prod(shape))


def _norm(arch: Architecture, name: str) -> list[Tensor]:
    """RMSNorm holds a weight; LayerNorm a weight and a bias."""
    out = [_t(f"{name}.weight", arch.hidden)]
    if arch.norm == "layernorm":
        out.append(_t(f"{name}.bias", arch.hidden))
    return out


def _linear(name: str, out_features: int, in_features: int, bias: bool) -> list[Tensor]:
    """``nn.Linear``: weight [out, in] and an optional bias [out]."""
    out = [_t(f"{name}.weight", out_features, in_features)]
    if bias:
        out.append(_t(f"{name}.bias", out_features))
    return out


def _conv1d(name: str, in_features: int, out_features: int) -> list[Tensor]:
    """GPT-2's ``Conv1D``: weight stored [in, out] (transposed against nn.Linear), bias [out]."""
    return [_t(f"{name}.weight", in_features, out_features), _t(f"{name}.bias", out_features)]


def _fused_layer(arch: Architecture) -> list[Tensor]:
    """Phi3DecoderLayer (transformers 5.23.0), in its modules' order: ``o_proj`` is registered before the fused
    ``qkv_proj`` [(a + 2·kv)·d, h]; the MLP's fused ``gate_up_proj`` [2·i, h]; no biases."""
    h, i = arch.hidden, arch.intermediate
    out = _linear("self_attn.o_proj", h, arch.q_width, False)
    out += _linear("self_attn.qkv_proj", arch.q_width + 2 * arch.kv_width, h, False)
    out += _linear("mlp.gate_up_proj", 2 * i, h, False) + _linear("mlp.down_proj", h, i, False)
    return out + _norm(arch, "input_layernorm") + _norm(arch, "post_attention_layernorm")


def _attention(arch: Architecture) -> list[Tensor]:
    """The attention's projections (and q/k norms) of a SwiGLU layer; deepseek_v3's latent attention apart."""
    if arch.mla:
        return _latent_attention(arch)
    h = arch.hidden
    out = _linear("self_attn.q_proj", arch.q_width, h, arch.qkv_bias)
    out += _linear("self_attn.k_proj", arch.kv_width, h, arch.qkv_bias)
    out += _linear("self_attn.v_proj", arch.kv_width, h, arch.qkv_bias)
    out += _linear("self_attn.o_proj", h, arch.q_width, arch.o_bias)
    if arch.qk_norm == "head":  # Qwen3Attention: one RMSNorm weight of head_dim for all query heads, one for all keys
        out += [_t("self_attn.q_norm.weight", arch.head_dim), _t("self_attn.k_norm.weight", arch.head_dim)]
    elif arch.qk_norm == "projection":  # Olmo2Attention: an RMSNorm over the whole q and k projections
        out += [_t("self_attn.q_norm.weight", arch.q_width), _t("self_attn.k_norm.weight", arch.kv_width)]
    return out


def _latent_attention(arch: Architecture) -> list[Tensor]:
    """DeepseekV3Attention (transformers 5.23.0), in its modules' order: the query through a q_lora_rank latent and its
    RMSNorm (or one q_proj), the keys and values through ``kv_a_proj_with_mqa`` (the kv_lora_rank latent and the
    rope_dim shared rotary key), the latent's RMSNorm and ``kv_b_proj`` (every head's unrotated key and value),
    ``o_proj``. ``attention_bias`` reaches q_a_proj, kv_a_proj_with_mqa and o_proj only."""
    h, a, bias = arch.hidden, arch.heads, arch.qkv_bias
    if arch.q_lora_rank:
        out = _linear("self_attn.q_a_proj", arch.q_lora_rank, h, bias)
        out += [_t("self_attn.q_a_layernorm.weight", arch.q_lora_rank)]
        out += _linear("self_attn.q_b_proj", arch.q_width, arch.q_lora_rank, False)
    else:
        out = _linear("self_attn.q_proj", arch.q_width, h, False)
    nope = arch.head_dim - arch.rope_dim
    out += _linear("self_attn.kv_a_proj_with_mqa", arch.kv_lora_rank + arch.rope_dim, h, bias)
    out += [_t("self_attn.kv_a_layernorm.weight", arch.kv_lora_rank)]
    out += _linear("self_attn.kv_b_proj", a * (nope + arch.v_head_dim), arch.kv_lora_rank, False)
    return out + _linear("self_attn.o_proj", h, a * arch.v_head_dim, arch.o_bias)


def _dense_mlp(arch: Architecture, width: int, prefix: str = "mlp") -> list[Tensor]:
    h = arch.hidden
    out = _linear(f"{prefix}.gate_proj", width, h, arch.mlp_bias)
    out += _linear(f"{prefix}.up_proj", width, h, arch.mlp_bias)
    return out + _linear(f"{prefix}.down_proj", h, width, arch.mlp_bias)


def _experts(arch: Architecture) -> list[Tensor]:
    """A MoE block as transformers 5.23.0 holds it in memory (what FSDP2 shards; the checkpoint's per-expert tensors
    are fused on loading): Mixtral's and Qwen3-MoE's router ``mlp.gate`` [E, h] then ``mlp.experts``
    (MixtralExperts, Qwen3MoeExperts: every expert's gate and up projections in one [E, 2·i, h], the down
    projections in one [E, h, i]); DeepseekV3MoE registers the experts first, then the router, then its shared
    experts' SwiGLU of shared × i."""
    h, i, e = arch.hidden, arch.intermediate, arch.experts
    router = [_t("mlp.gate.weight", e, h)]
    experts = [_t("mlp.experts.gate_up_proj", e, 2 * i, h), _t("mlp.experts.down_proj", e, h, i)]
    if arch.family != "deepseek_v3":
        return router + experts
    shared = _dense_mlp(arch, arch.shared_experts * i, "mlp.shared_experts") if arch.shared_experts else []
    return experts + router + shared


def _swiglu_layer(arch: Architecture, dense: bool = False) -> list[Tensor]:
    """One SwiGLU layer; ``dense``: deepseek_v3's first layers, whose MLP is a dense one of dense_intermediate."""
    if arch.fused:
        return _fused_layer(arch)
    out = _attention(arch)
    if dense and arch.dense_layers:
        out += _dense_mlp(arch, arch.dense_intermediate)
    elif arch.experts == 0:
        out += _dense_mlp(arch, arch.intermediate)
    else:
        out += _experts(arch)
    if arch.sandwich_norms:  # Gemma2DecoderLayer: before and after the attention and the MLP
        names = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm")
        return out + [t for name in (*names, "post_feedforward_layernorm") for t in _norm(arch, name)]
    if arch.post_norms:  # Olmo2DecoderLayer: after the attention and after the MLP, none before
        return out + _norm(arch, "post_attention_layernorm") + _norm(arch, "post_feedforward_layernorm")
    return out + _norm(arch, "input_layernorm") + _norm(arch, "post_attention_layernorm")


def _gpt2_layer(arch: Architecture) -> list[Tensor]:
    h, i = arch.hidden, arch.intermediate
    return (
        _norm(arch, "ln_1")
        + _conv1d("attn.c_attn", h, 3 * h)
        + _conv1d("attn.c_proj", h, h)
        + _norm(arch, "ln_2")
        + _conv1d("mlp.c_fc", h, i)
        + _conv1d("mlp.c_proj", i, h)
    )


def _gpt_neox_layer(arch: Architecture) -> list[Tensor]:
    h, i = arch.hidden, arch.intermediate
    return (
        _norm(arch, "input_layernorm")
        + _norm(arch, "post_attention_layernorm")
        + _linear("attention.query_key_value", 3 * h, h, arch.qkv_bias)
        + _linear("attention.dense", h, h, arch.o_bias)
        + _linear("mlp.dense_h_to_4h", i, h, arch.mlp_bias)
        + _linear("mlp.dense_4h_to_h", h, i, arch.mlp_bias)
    )


def _unit(name: str, prefix: str, tensors: list[Tensor] | tuple[Tensor, ...]) -> Unit:
    tensors = tuple(tensors)
    return Unit(name, prefix, tensors, sum(t.numel for t in tensors))


def _ends(arch: Architecture) -> tuple[list[Tensor], str, list[Tensor]]:
    """Embedding tensors, the layer-name prefix pattern, and final-unit tensors of each family."""
    head = [] if arch.tied_embeddings else [_t("lm_head.weight", arch.vocab, arch.hidden)]
    if arch.family == "gpt2":
        embed = [_t("transformer.wte.weight", arch.vocab, arch.hidden)]
        if arch.learned_positions:
            embed.append(_t("transformer.wpe.weight", arch.max_positions, arch.hidden))
        return embed, "transformer.h.{}.", _norm(arch, "transformer.ln_f") + head
    if arch.family == "gpt_neox":
        out = [] if arch.tied_embeddings else [_t("embed_out.weight", arch.vocab, arch.hidden)]
        embed = [_t("gpt_neox.embed_in.weight", arch.vocab, arch.hidden)]
        return embed, "gpt_neox.layers.{}.", _norm(arch, "gpt_neox.final_layer_norm") + out
    return (
        [_t("model.embed_tokens.weight", arch.vocab, arch.hidden)],
        "model.layers.{}.",
        _norm(arch, "model.norm") + head,
    )


def _count(unit: Unit) -> int:
    return len(unit.tensors)


@lru_cache(maxsize=64)
def inventory(arch: Architecture) -> Inventory:
    """The inventory of ``arch`` (cached: an Architecture is a frozen, hashable value)."""
    if arch.family == "gpt2":
        layer_tensors = _gpt2_layer(arch)
    elif arch.family == "gpt_neox":
        layer_tensors = _gpt_neox_layer(arch)
    else:
        layer_tensors = _swiglu_layer(arch)
    embed_tensors, prefix, final_tensors = _ends(arch)
    embed = _unit("embed", "", embed_tensors)
    moe = _unit(f"layers.{arch.dense_layers}", prefix.format(arch.dense_layers), layer_tensors)
    # deepseek_v3: its first dense_layers layers are of another kind, the dense MLP's
    dense = _unit("layers.0", prefix.format(0), _swiglu_layer(arch, dense=True)) if arch.two_kinds else moe
    layers = [
        Unit(f"layers.{k}", prefix.format(k), kind.tensors, kind.params)
        for k in range(arch.layers)
        for kind in (dense if k < arch.dense_layers else moe,)
    ]
    final = _unit("final", "", final_tensors)
    units = (embed, *layers, final)
    kinds = (dense, moe) if arch.two_kinds else (moe,)
    dense_count = arch.dense_layers if arch.two_kinds else 0
    params = embed.params + dense_count * dense.params + (arch.layers - dense_count) * moe.params + final.params
    # First unit of the greatest size; the layers of a kind are equal, so a few candidates decide it.
    largest = max((embed, *kinds, final), key=lambda u: u.params)
    count = _count(embed) + dense_count * _count(dense) + (arch.layers - dense_count) * _count(moe) + _count(final)
    return Inventory(arch, units, params, largest, count)
