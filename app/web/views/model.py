"""``partials/_model.html``: the model's inventory beside the N and U the scenario uses, its FSDP2
shard, and the tensors of its embedding, one decoder layer and its head."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from app.ledger.estimate import Estimate
from app.ledger.models.architecture import Architecture
from app.ledger.models.inventory import Unit, inventory
from app.ledger.models.known import KNOWN_MODELS
from app.receipts.sections.model import fsdp2_section


@dataclass(frozen=True, slots=True)
class UnitRow:
    name: str
    last_layer: int | None  # for the decoder layer: the index of the last one ("layers.0 … layers.31")
    params: int
    each: bool  # the count is per layer
    tensors: tuple[tuple[str, tuple[int, ...]], ...]  # (name, shape)


@dataclass(frozen=True, slots=True)
class ModelSection:
    """``_model.html``: the model's inventory beside the scenario's N and U, and its FSDP2 shard."""

    title: str
    family: str
    source: str
    params: int
    params_source: str
    scenario_params: int | None  # when the scenario overrides the model's count
    layers: int
    hidden: int
    vocab: int
    tied: bool
    unit_name: str
    unit_params: int
    unit_source: str
    scenario_unit_params: int | None
    dp: int
    fsdp2_padded: int | None
    fsdp2_lower_bound: int
    fsdp2_note: str
    units: tuple[UnitRow, ...]
    traits: tuple[str, ...]  # what the family's layer means for memory, one line each


def _latent_traits(arch: Architecture) -> list[str]:
    """deepseek_v3's lines: its latent attention, its two kinds of layer, its shared experts and FP32 router."""
    a, d, v, k = arch.heads, arch.head_dim, arch.v_head_dim, arch.dense_layers
    return [
        f"MLA: K and V cached as a {arch.kv_lora_rank}-wide latent (+ {arch.rope_dim} rotary dims), but training "
        f"expands them to all {a} heads: K ({d} wide) and kv_b_proj's output (V a view of it) are kept; the q and kv "
        "latents' RMSNorms keep their inputs.",
        f"q/k heads of {d}, v heads of {v}: SDPA's flash kernel needs equal sizes, so a GPU runs the memory-efficient "
        "kernel (no s×s scores, which the lab assumes); a CPU falls back to the math kernel, which keeps them.",
        f"The first {k} layers dense (SwiGLU of {arch.dense_intermediate:,}), the other {arch.layers - k} MoE: two "
        "layer sizes, and the largest unit is a MoE layer.",
        f"{arch.shared_experts} shared expert(s): a SwiGLU of {arch.shared_experts * arch.intermediate:,} beside the "
        "routed ones, on every token. The router runs in FP32 (sigmoid scores): it keeps FP32 copies of its input "
        "and of its [E, h] weight in every MoE layer.",
        "The checkpoint's multi-token-prediction module (num_nextn_predict_layers) is not built by transformers "
        "5.23.0, which drops its weights on loading: not counted (DeepSeek-V3's adds 11.5B parameters, the Hub's "
        "685B against 671B).",
    ]


def family_traits(arch: Architecture) -> tuple[str, ...]:
    """What shapes this model's memory beyond its sizes, one line each, in the terms the ledger uses."""
    a, kv, d, h = arch.heads, arch.kv_heads, arch.head_dim, arch.hidden
    out = []
    if kv < a:
        out.append(f"Grouped-query attention: {kv} key/value heads for {a} query heads, so K and V are {kv}/{a} of "
                   "Q's size, saved and gathered (unless the attention expands them: gqa).")  # fmt: skip
    if a * d != h:
        out.append(f"head_dim {d} × {a} heads = {a * d:,} ≠ hidden {h:,}: the attention's width is not the "
                   "residual stream's.")  # fmt: skip
    if arch.qk_norm == "head":
        out.append("q/k RMSNorm per head (before RoPE): each keeps the q and k projections' outputs (FP32 upcasts "
                   "under transformers) and a 1/rms per head per token.")  # fmt: skip
    if arch.qk_norm == "projection":
        out.append("q/k RMSNorm over the whole projections: their weights split with the heads under tensor "
                   "parallelism; each keeps the projections' outputs and a 1/rms per token.")  # fmt: skip
    if arch.post_norms:
        out.append("Norms after the attention and the MLP, the weight multiplied in FP32 (norms = composite under "
                   "transformers); FP32 rotary tables, cast by FSDP2 for every layer.")  # fmt: skip
    if arch.fused:
        out.append("Fused qkv_proj and gate_up_proj: one tensor where others have two or three (the largest tensor "
                   "and FSDP2's padding follow it); V, a view of the fused output, keeps all of it.")  # fmt: skip
    if arch.mla:
        out.extend(_latent_traits(arch))
    if arch.experts:
        out.append(f"Mixture of experts: {arch.experts} experts a layer, {arch.experts_per_token} per token; every "
                   "rank holds all of them unless expert parallelism (ep) splits them.")  # fmt: skip
    if arch.eager_attention:
        out.append("Eager attention (transformers' default for it: SDPA cannot soft-cap): the s×s scores are kept "
                   "three times a layer, soft-capped (tanh), as FP32 softmax and cast for ×V; K and V expanded to "
                   "every head.")  # fmt: skip
    if arch.sandwich_norms:
        out.append("Four RMSNorms a layer, before and after the attention and the MLP, computed in FP32 with "
                   "(1 + weight) (norms = composite under transformers).")  # fmt: skip
    if arch.logit_softcap:
        out.append("Logits soft-capped: the tanh output, s·b·V in the activation width, is kept to the loss's "
                   "backward (on a 256k vocabulary as much as the logits again).")  # fmt: skip
    if arch.fused_experts:
        out.append(f"Experts in two tensors, [{arch.experts}, 2·i, h] and [{arch.experts}, h, i], run by grouped GEMMs "
                   f"(transformers' default): FSDP2 shards them over the experts, so past D = {arch.experts} each "
                   "rank holds a whole expert's rows, the rest padding.")  # fmt: skip
    if arch.topk_renorm:
        out.append("Routing weights renormalised over the top k (norm_topk_prob): the division keeps the k FP32 "
                   "weights and their sum per token.")  # fmt: skip
    if arch.global_every > 1:
        out.append(f"Every {arch.global_every}th layer attends globally, the others through the window: from a "
                   "sequence longer than the window the two kinds keep different sets (a mask and expanded K and V "
                   "in the sliding ones, under transformers' SDPA).")  # fmt: skip
    if arch.sliding_window:
        out.append(f"Sliding window of {arch.sliding_window:,} tokens: from a sequence that long, transformers "
                   "attends through a mask (the hf-fsdp2 stack's gqa becomes expand).")  # fmt: skip
    if arch.tied_embeddings:
        out.append("Tied embeddings: the head is the embedding's tensor, counted once and gathered with it.")
    if arch.learned_positions:
        out.append(f"Learned positions: a parameter of {arch.max_positions:,} × {h:,}; sequences stop there.")
    return tuple(out)


def _unit_row(unit: Unit, layer: bool, layers: int, first: int = 0) -> UnitRow:
    """One row of the units table: a unit, or ``layers`` alike decoder layers from layer ``first``."""
    return UnitRow(
        name=unit.name,
        last_layer=first + layers - 1 if layer and layers > 1 else None,
        params=unit.params,
        each=layer,
        tensors=tuple((t.name, t.shape) for t in unit.tensors),
    )


def model_section(e: Estimate) -> ModelSection | None:
    """The model's section, or None when the scenario names no model (N and U typed as numbers)."""
    md = e.model
    if md is None:
        return None
    s = e.scenario
    inv, arch = md.model.inventory, md.model.architecture
    fsdp2 = fsdp2_section(e)
    return ModelSection(
        title=md.model.title,
        family=arch.family,
        source=md.model.source,
        params=inv.params,
        params_source=s.source_of("params"),
        scenario_params=s.params if s.params != inv.params else None,
        layers=arch.layers,
        hidden=arch.hidden,
        vocab=arch.vocab,
        tied=arch.tied_embeddings,
        unit_name=inv.largest_unit.name,
        unit_params=inv.largest_unit.params,
        unit_source=s.source_of("unit_params"),
        scenario_unit_params=s.unit_params if s.unit_params != inv.largest_unit.params else None,
        dp=s.dp,
        fsdp2_padded=e.fsdp2.padded_elements if e.fsdp2 else None,
        fsdp2_lower_bound=e.fsdp2.lower_bound_elements if e.fsdp2 else 0,
        fsdp2_note=str(fsdp2["note"]) if fsdp2 else "",
        units=(
            _unit_row(inv.embed, False, arch.layers),
            *(_unit_row(unit, True, count, first) for first, count, unit in inv.layer_kinds),
            _unit_row(inv.final, False, arch.layers),
        ),
        traits=family_traits(arch),
    )


# The form's model list, grouped by family (its config.json ``model_type``), each with its exact count.
FAMILY_LABELS = {
    "deepseek_v3": "DeepSeek-V3, latent attention and mixture of experts (deepseek_v3)",
    "llama": "Llama (model_type llama)",
    "mistral": "Mistral (mistral)",
    "mixtral": "Mixtral, mixture of experts (mixtral)",
    "qwen2": "Qwen2 and Qwen2.5 (qwen2)",
    "qwen3": "Qwen3 (qwen3)",
    "qwen3_moe": "Qwen3-MoE, mixture of experts (qwen3_moe)",
    "phi3": "Phi-3, Phi-3.5 and Phi-4 (phi3)",
    "olmo2": "OLMo 2 (olmo2)",
    "gemma2": "Gemma 2 (gemma2)",
    "gemma3_text": "Gemma 3 (gemma3_text)",
    "gpt2": "GPT-2 (gpt2)",
    "gpt_neox": "GPT-NeoX (gpt_neox)",
}


@dataclass(frozen=True, slots=True)
class ModelChoice:
    id: str
    title: str
    params: int


@dataclass(frozen=True, slots=True)
class ModelGroup:
    label: str
    models: tuple[ModelChoice, ...]


@cache
def model_groups() -> tuple[ModelGroup, ...]:
    """The built-in models by family, families in the catalogue's order (computed once: the catalogue is fixed)."""
    by_family: dict[str, list[ModelChoice]] = {}
    for m in KNOWN_MODELS:
        arch = m.architecture()
        by_family.setdefault(arch.family, []).append(ModelChoice(m.id, m.title, inventory(arch).params))
    return tuple(ModelGroup(FAMILY_LABELS.get(f, f), tuple(ms)) for f, ms in by_family.items())
