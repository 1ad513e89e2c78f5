"""A decoder-only architecture read from a Hugging Face ``config.json``, every number bounded.

Why bounded: the inventory, the FSDP2 shard and the activation ledger multiply these numbers
together and are called per request, so a pasted config with ``num_hidden_layers: 10**9`` must be
refused here, by name, before anything is built from it. The bounds are wide enough for every
open model we know of (the largest hidden size in use is 16,384; vocabularies stay under 2^20).

The readers of a ``config.json`` are :mod:`app.ledger.models.readers`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from app.ledger.arithmetic import shown_int

Family = Literal[
    "deepseek_v3",
    "gemma2",
    "gemma3_text",
    "gpt2",
    "gpt_neox",
    "llama",
    "mistral",
    "mixtral",
    "olmo2",
    "phi3",
    "qwen2",
    "qwen3",
    "qwen3_moe",
]
Norm = Literal["rmsnorm", "layernorm"]
Mlp = Literal["swiglu", "gelu"]

FAMILIES: tuple[Family, ...] = (
    "deepseek_v3", "gemma2", "gemma3_text", "gpt2", "gpt_neox", "llama", "mistral", "mixtral", "olmo2", "phi3",
    "qwen2", "qwen3", "qwen3_moe",
)  # fmt: skip
GPT_FAMILIES: frozenset[str] = frozenset({"gpt2", "gpt_neox"})
MOE_FAMILIES: frozenset[str] = frozenset({"deepseek_v3", "mixtral", "qwen3_moe"})  # MLPs of routed experts
_QK_NORM: dict[str, str] = {"qwen3": "head", "qwen3_moe": "head", "gemma3_text": "head", "olmo2": "projection"}
GEMMA_FAMILIES: frozenset[str] = frozenset({"gemma2", "gemma3_text"})  # four norms a layer, each weight used as 1 + w
_WINDOWED: frozenset[str] = frozenset({"mistral", "mixtral", "gemma3_text"})

# Inclusive bounds of every integer of an Architecture (and of the config keys feeding them).
BOUNDS: dict[str, tuple[int, int]] = {
    "hidden": (1, 131_072),
    "layers": (1, 1_024),
    "heads": (1, 2_048),
    "kv_heads": (1, 2_048),
    "head_dim": (1, 2_048),
    "intermediate": (1, 1_048_576),
    "vocab": (1, 2**22),
    "max_positions": (1, 2**24),
    "experts": (0, 1_024),
    "global_every": (0, 1_024),
    "experts_per_token": (0, 1_024),
    "sliding_window": (0, 2**24),
    "dense_layers": (0, 1_024),
    "dense_intermediate": (0, 1_048_576),
    "shared_experts": (0, 1_024),
    "q_lora_rank": (0, 131_072),
    "kv_lora_rank": (0, 131_072),
    "rope_dim": (0, 2_048),
    "v_head_dim": (0, 2_048),
}


class ModelConfigError(ValueError):
    """A config that cannot describe a supported model; ``key`` names the offending key if one does."""

    def __init__(self, message: str, key: str | None = None) -> None:
        self.key = key
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class Architecture:
    """The facts of a decoder-only model that size its tensors and activations.

    ``head_dim`` is explicit because some configs (Mistral's later releases, Qwen3) set it apart
    from hidden ÷ heads; ``kv_heads`` < ``heads`` is grouped-query attention. ``experts`` = 0 is a
    dense MLP; otherwise each layer has ``experts`` SwiGLU experts and a router, and each token
    visits ``experts_per_token`` of them. ``max_positions`` is the config's context length; it is a
    parameter tensor only when ``learned_positions`` (GPT-2's ``wpe``), otherwise (rotary) it sizes
    nothing. Construction validates every bound, so a hand-built Architecture is as safe as a parsed one.
    """

    family: Family
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    max_positions: int
    learned_positions: bool = False
    experts: int = 0
    experts_per_token: int = 0
    norm: Norm = "rmsnorm"  # rmsnorm: a weight; layernorm: a weight and a bias
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    mlp: Mlp = "swiglu"  # swiglu: gate, up, down projections; gelu: up and down
    parallel_residual: bool = False  # gpt_neox: attention and MLP read the same input
    qk_norm: str = ""  # an RMSNorm over the queries and keys before RoPE: "head" (qwen3, qwen3_moe), "projection"
    post_norms: bool = False  # olmo2: the norms after the attention and the MLP, none before them
    fp32_rope: bool = False  # olmo2: the rotary tables stay FP32 (transformers' Llama casts them to the compute dtype)
    sliding_window: int = 0  # mistral, mixtral: each token attends to the last sliding_window (0: no window)
    fused: bool = False  # phi3: q, k, v in one qkv_proj and gate, up in one gate_up_proj
    topk_renorm: bool = False  # the k routing weights over their sum, in FP32: mixtral's; qwen3_moe's norm_topk_prob
    sandwich_norms: bool = False  # gemma2, gemma3_text: an RMSNorm before and after the attention and the MLP
    attn_softcap: bool = False  # gemma2's attn_logit_softcapping: tanh over the scores (eager attention)
    logit_softcap: bool = False  # gemma2's final_logit_softcapping: tanh over the logits
    global_every: int = 0  # gemma3_text: layers N − 1, 2N − 1, … attend globally, the others through the window
    # deepseek_v3: layers 0 … dense_layers − 1 have a dense SwiGLU MLP of dense_intermediate, the others the routed
    # experts (of ``intermediate`` each) beside one SwiGLU MLP of shared_experts × intermediate
    dense_layers: int = 0
    dense_intermediate: int = 0
    shared_experts: int = 0
    # deepseek_v3's multi-head latent attention (kv_lora_rank ≥ 1): queries through a q_lora_rank-wide latent (0: a
    # plain q_proj), keys and values through a kv_lora_rank-wide one; head_dim is the query/key head (the rope_dim
    # rotated dims included), v_head_dim the value head
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    rope_dim: int = 0
    v_head_dim: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in BOUNDS:
                lo, hi = BOUNDS[f.name]
                if type(value) is not int:
                    raise ModelConfigError(f"{f.name} must be an integer, not {type(value).__name__}", f.name)
                if not lo <= value <= hi:
                    raise ModelConfigError(f"{f.name} = {shown_int(value)} is out of bounds ({lo:,} … {hi:,})", f.name)
            elif f.type == "bool" and type(value) is not bool:
                raise ModelConfigError(f"{f.name} must be true or false", f.name)
        if self.family not in FAMILIES:
            raise ModelConfigError(f"family {self.family!r} is not supported; supported: {', '.join(FAMILIES)}")
        if self.norm not in ("rmsnorm", "layernorm"):
            raise ModelConfigError(f"norm {self.norm!r} is not rmsnorm or layernorm", "norm")
        if self.mlp not in ("swiglu", "gelu"):
            raise ModelConfigError(f"mlp {self.mlp!r} is not swiglu or gelu", "mlp")
        if self.heads % self.kv_heads != 0:
            raise ModelConfigError(
                f"heads = {self.heads} is not a multiple of kv_heads = {self.kv_heads} (query groups must be equal)",
                "kv_heads",
            )
        if self.family in GPT_FAMILIES and self.heads * self.head_dim != self.hidden:
            raise ModelConfigError(f"heads × head_dim must equal hidden for fused QKV ({self.family})", "head_dim")
        if self.sliding_window and self.family not in _WINDOWED:
            raise ModelConfigError(
                "a sliding window is read for mistral, mixtral and gemma3_text only", "sliding_window"
            )
        if self.fused != (self.family == "phi3"):
            raise ModelConfigError("fused projections are the phi3 family's, and phi3 has them", "fused")
        if self.qk_norm != _QK_NORM.get(self.family, ""):
            raise ModelConfigError("qk_norm is head for qwen3, qwen3_moe; projection for olmo2; else none", "qk_norm")
        if self.post_norms != (self.family == "olmo2") or self.fp32_rope != (self.family == "olmo2"):
            raise ModelConfigError("post_norms and fp32_rope are the olmo2 family's, and olmo2 has them", "post_norms")
        if (self.experts > 0) != (self.family in MOE_FAMILIES):
            raise ModelConfigError("experts > 0 is a mixtral, qwen3_moe or deepseek_v3 model, which need experts ≥ 1",
                                   "experts")  # fmt: skip
        if self.sandwich_norms != (self.family in GEMMA_FAMILIES):
            raise ModelConfigError("sandwich norms are the gemma families', and they have them", "sandwich_norms")
        if (self.attn_softcap or self.logit_softcap) and self.family != "gemma2":
            raise ModelConfigError("soft-capping is read for gemma2 only", "attn_softcap")
        if (self.global_every > 0) != (self.family == "gemma3_text") or self.global_every < 0:
            raise ModelConfigError("global_every ≥ 1 is gemma3_text's (its layer pattern), 0 otherwise", "global_every")
        if self.topk_renorm != (self.family == "mixtral") and self.family not in ("qwen3_moe", "deepseek_v3"):
            raise ModelConfigError("topk_renorm is mixtral's (always), qwen3_moe's and deepseek_v3's (norm_topk_prob)",
                                   "topk_renorm")  # fmt: skip
        self._check_deepseek()
        if self.experts == 0 and self.experts_per_token != 0:
            raise ModelConfigError("experts_per_token must be 0 for a dense model", "experts_per_token")
        if self.experts > 0 and not 1 <= self.experts_per_token <= self.experts:
            raise ModelConfigError(
                f"experts_per_token = {shown_int(self.experts_per_token)} must be 1 … experts ({self.experts})",
                "experts_per_token",
            )

    def _check_deepseek(self) -> None:
        ours = self.family == "deepseek_v3"
        mla = (self.q_lora_rank, self.rope_dim, self.v_head_dim, self.dense_layers, self.dense_intermediate,
               self.shared_experts)  # fmt: skip
        if not ours:
            if self.kv_lora_rank or any(mla):
                raise ModelConfigError("latent attention and dense-first layers are deepseek_v3's", "kv_lora_rank")
            return
        if self.kv_lora_rank < 1:
            raise ModelConfigError("kv_lora_rank must be at least 1 (deepseek_v3's latent attention)", "kv_lora_rank")
        if not 1 <= self.rope_dim < self.head_dim:
            raise ModelConfigError("qk_rope_head_dim must be 1 … the query/key head size − 1", "rope_dim")
        if self.rope_dim % 2:
            raise ModelConfigError("qk_rope_head_dim must be even (rotary dimensions come in pairs)", "rope_dim")
        if self.v_head_dim < 1:
            raise ModelConfigError("v_head_dim must be at least 1", "v_head_dim")
        if self.kv_heads != self.heads:
            raise ModelConfigError("deepseek_v3's latent attention expands K and V to every head: kv_heads = heads",
                                   "kv_heads")  # fmt: skip
        if self.dense_layers >= self.layers:
            raise ModelConfigError(f"dense_layers must be 0 … layers − 1 ({self.layers - 1:,}: a MoE layer at least)",
                                   "dense_layers")  # fmt: skip
        if self.dense_layers and self.dense_intermediate < 1:
            raise ModelConfigError("dense layers need dense_intermediate ≥ 1", "dense_intermediate")

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (deepseek_v3)."""
        return self.kv_lora_rank > 0

    @property
    def two_kinds(self) -> bool:
        """Whether the layers' parameters come in two kinds (deepseek_v3's dense first layers before MoE ones)."""
        return 0 < self.dense_layers < self.layers

    @property
    def eager_attention(self) -> bool:
        """The attention as transformers' ``eager_attention_forward`` runs it, the s×s scores materialised: Gemma 2's
        only kernel in transformers 5.23.0 besides the flash and flex kernels (``_supports_sdpa = False``: SDPA
        cannot soft-cap), and the one its class takes by default."""
        return self.family == "gemma2"

    @property
    def fused_experts(self) -> bool:
        """A MoE layer's experts held as one tensor per kind, [E, 2·i, h] and [E, h, i], as transformers 5.23.0 holds
        them in memory (``MixtralExperts``, ``Qwen3MoeExperts``: the checkpoint's per-expert tensors are fused on
        loading) and runs them (grouped GEMMs), which FSDP2 shards on the expert dimension."""
        return self.experts > 0

    @property
    def fp32_routing_weights(self) -> bool:
        """The k routing weights stay FP32 into the experts' product (``MixtralTopKRouter``,
        ``DeepseekV3TopkRouter``; Qwen3-MoE's router casts them back to the compute dtype)."""
        return self.family in ("mixtral", "deepseek_v3")

    @property
    def q_width(self) -> int:
        """Width of the query projection's output: heads × head_dim."""
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Width of each of the key and value projections' outputs: kv_heads × head_dim."""
        return self.kv_heads * self.head_dim
