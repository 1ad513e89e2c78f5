"""What a decoder layer keeps for backward when only part of the model trains (LoRA, frozen layers).

Autograd saves a tensor for a weight's gradient only when that weight requires one (torch 2.13's derivative
formulas: ``mm`` keeps its input for the weight's gradient only if the weight requires grad, ``mul`` each operand
only if the other requires grad). So a frozen weight keeps nothing of its own: the RMSNorm's normalised input (for
the norm's weight), the q/k/v and gate/up projections' input (the norm's output), the down projection's input, the
head's input. What the *input's* gradient needs is still kept wherever a gradient flows through the layer: the
norms' FP32 upcast and 1/rms, attention's Q, K, V, output and log-sum-exp, the MLP's gate and up outputs and SiLU.

- **LoRA** (PEFT 0.21.0 ``lora.Linear.forward``: ``result + lora_B(lora_A(dropout(x))) * scaling``, dropout 0 an
  identity): a targeted module's input is kept again, by ``lora_A``, and ``lora_B`` keeps ``lora_A``'s output, r
  values per token per targeted module, in the activation width (FSDP2 casts the adapters to the compute dtype).
  LoRA freezes the embedding, so no gradient enters the first layer: its input norm keeps nothing, and where its
  attention carries no adapter neither do its norms and attention (:func:`lora_first_layer`, a kind of its own).
  On a MoE's router and 3-D experts PEFT's ``ParamWrapper`` instead folds the adapter into the weight each forward
  (``_LoraFactorsProxy``: ``baddbmm(W, B, A)`` over the experts' stack, the router's ``W + s·B·A``): the layer's
  GEMMs keep that new weight, whole, for their inputs' gradient, and their inputs for its gradient.
- **Frozen layers** (``requires_grad_(False)`` on the first N): with the embedding trained, the gradient still flows
  through them to it, and they keep what their inputs' gradients need; with the embedding frozen too, nothing below
  the first trained layer needs a gradient, autograd records no graph, and they keep nothing at all (no checkpoint
  either: a non-reentrant checkpoint keeps its inputs only through a graph).
- **Frozen modules by name** (``requires_grad_(False)`` on every layer's ``self_attn``, ``mlp``, ``q_proj`` …): each
  layer keeps what its input's gradient needs and, for the modules still training, what their weights' gradients
  need: a norm's normalised input for each trained norm weight, the norms' outputs for trained projections reading
  them, ``o_proj``'s and ``down_proj``'s own inputs where they train, the experts' grouped-GEMM inputs where the
  experts train. Where the embedding is frozen too and the lowest modules of the first trained layer are frozen, no
  gradient reaches them and that one layer keeps less than counted here (an over-count of at most one layer's
  attention, never an under-count).

Modelled for the families of :data:`WALKED_FAMILIES` (:func:`trains_walked`), whose saved entries carry
``needs`` (:class:`~app.ledger.models.activations.entries.Saved`); held to traces of transformers'
classes with PEFT under FSDP2 (``tests/trace/test_trains_traced.py``, ``test_deepseek_trains_traced.py``).
DeepSeek-V3's two kinds of layer each keep what trains of them (:attr:`Trains.dense`: its dense first layers'
adapters, the attention's alone, or none; their modules still training); with a frozen prefix of layers, a third
kind, each walked run stands for the larger of the kinds of layer it holds (the activation ledger's ``_larger``);
its first layer a gradient enters is counted as one a gradient enters (an over-count: 3 % on a 5-layer model).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.models.activations.entries import Saved
from app.ledger.models.architecture import Architecture

# the families whose layer entries carry ``needs`` and whose layers are traced with LoRA and frozen layers
WALKED_FAMILIES = (
    "llama", "mistral", "qwen2", "qwen3", "olmo2", "gemma2", "gemma3_text", "phi3", "qwen3_moe", "mixtral",
    "deepseek_v3",
)  # fmt: skip
# the projections reading the pre-norms' outputs (Phi-3's fused ones by their own names)
ATTENTION_INPUTS = frozenset({"q_proj", "k_proj", "v_proj", "qkv_proj"})
ATTENTION_TARGETS = ATTENTION_INPUTS | {"o_proj"}  # the attention's projections LoRA may adapt
MLP_INPUTS = frozenset({"gate_proj", "up_proj", "gate_up_proj", "gate"})  # gate: a MoE block's router
# deepseek_v3's latent attention's projections reading the input norm's output; its MLP's readers of the other norm's
# output are its dense MLP's or shared experts' gate and up (its router reads an FP32 copy, its experts a gather)
LATENT_INPUTS = frozenset({"q_a_proj", "kv_a_proj_with_mqa", "q_proj"})
LATENT_MLP_INPUTS = frozenset({"gate_proj", "up_proj"})
# the layer's own norms (of width h), whose normalised inputs their weights keep (not q_norm and k_norm: per head)
LAYER_NORMS = frozenset({"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                         "post_feedforward_layernorm"})  # fmt: skip


def trains_walked(arch: Architecture) -> bool:
    """Whether what a layer of ``arch`` keeps is known entry by entry when only part of it trains: the families of
    :data:`WALKED_FAMILIES`."""
    return arch.family in WALKED_FAMILIES


@dataclass(frozen=True, slots=True)
class Trains:
    """What trains, as the activation ledger needs it: LoRA's rank, the leaf names of the layer modules it wraps
    (every one of them for all-linear) and how many it wraps per layer, or the frozen prefix of layers, the
    embedding, and with modules frozen by name the leaf names of the layer modules still training and how many
    norms of width h a layer has."""

    lora_rank: int = 0
    targets: frozenset[str] = frozenset()
    modules: int = 0
    frozen_layers: int = 0
    freeze_embed: bool = False
    trained_modules: frozenset[str] = frozenset()  # empty: every module of the trained layers trains
    layer_norms: int = 0
    folded: int = 0  # LoRA on a MoE's router or experts: the weights PEFT's ParamWrapper folds, elements per layer
    folded_shape: str = ""
    folded_down: int = 0  # of which the experts' down_proj stack's
    dense: Trains | None = None  # deepseek_v3's dense first layers' (their adapters or their modules still training)

    @property
    def head_frozen(self) -> bool:
        """Whether the LM head's weight is frozen: LoRA never wraps the output layer (all-linear leaves it out)."""
        return self.lora_rank > 0


def _kept(x: Saved, flows: bool, trained: frozenset[str], norms: int = 0, heads: tuple[int, int] = (1, 1)
          ) -> Saved | None:  # fmt: skip
    """``x`` as a layer keeps it where ``trained`` are the leaf names of its modules that train: all of it, a part
    (the norm outputs, read by the attention and the MLP; the normalised inputs of the norms that train, of
    ``norms``; q_norm's or k_norm's share of their ``heads``, (a, kv)), or none."""
    if not flows:
        return None
    if x.needs == "norm_w":
        k = len(trained & LAYER_NORMS)
        if k in (0, norms):
            return x if k else None
        said = f"{x.what}: of the {k} of {norms} norms whose weights train"
        return Saved(said, f"{k}·s·b·h", x.elements // norms * k, x.width, x.split)
    if x.needs == "qk_norm_w":
        q, k = "q_norm" in trained, "k_norm" in trained
        if q == k:
            return x if q else None
        return _qk_share(x, q, heads, "")
    if x.needs in ("experts_w", "experts_down_w"):  # a grouped GEMM's input, kept where its weight trains
        which = "experts.gate_up_proj" if x.needs == "experts_w" else "experts.down_proj"
        return x if trained & {"experts", which} else None
    if x.needs.startswith("w:"):  # kept for the named module's weight alone
        return x if x.needs[2:] in trained else None
    if x.needs == "latent_in_w":
        return _halves(x, bool(trained & LATENT_INPUTS), bool(trained & LATENT_MLP_INPUTS), "the q/kv latents")
    if x.needs in ("down_w", "o_w"):
        return x if ("down_proj" if x.needs == "down_w" else "o_proj") in trained else None
    if x.needs == "in_w":
        return _halves(x, bool(trained & ATTENTION_INPUTS), bool(trained & MLP_INPUTS), "q/k/v")
    return x


def _halves(x: Saved, attention: bool, mlp: bool, reader: str) -> Saved | None:
    """The two norms' outputs (``x``, 2·s·b·h) as kept for the weights reading them: the attention's input half
    (read by ``reader``), the MLP's, both or none."""
    if attention and mlp:
        return x
    if not (attention or mlp):
        return None
    which = reader if attention else "the MLP's gate and up"
    return Saved(f"RMSNorm output read by {which} (a trained weight's input)", "s·b·h", x.elements // 2, x.width,
                 x.split)  # fmt: skip


def _qk_share(x: Saved, q: bool, heads: tuple[int, int], why: str) -> Saved:
    """q_norm's share (``q``) or k_norm's of an entry over s·b·(a + kv) heads, ``heads`` = (a, kv)."""
    a, kv = heads
    return Saved(f"{x.what}: {'q_norm' if q else 'k_norm'}'s alone{why}", f"{'a' if q else 'kv'}/(a + kv) of {x.shape}",
                 x.elements // (a + kv) * (a if q else kv), x.width, x.split)  # fmt: skip


def lora_layer(full_set: tuple[Saved, ...], trains: Trains, s: int, b: int, w: int) -> tuple[Saved, ...]:
    """A layer whose base is frozen and ``trains.modules`` of whose linear modules carry adapters."""
    kept = [k for x in full_set if (k := _kept(x, True, trains.targets)) is not None]
    r, modules = trains.lora_rank, trains.modules
    if modules:
        kept.append(Saved("LoRA lora_B inputs (lora_A outputs), one per targeted module", f"{modules}·s·b·r",
                          modules * s * b * r, w, True))  # fmt: skip
    if trains.folded:  # ParamWrapper: W + s·B·A made whole each forward, the GEMMs keep it for the input's gradient
        kept.append(Saved("LoRA-folded weights W + s·B·A (PEFT's ParamWrapper: the router's, the experts' stacks)",
                          trains.folded_shape, trains.folded, w, False, needs="folded"))  # fmt: skip
    return tuple(kept)


def lora_first_layer(full_set: tuple[Saved, ...], trains: Trains, s: int, b: int, w: int, arch: Architecture
                     ) -> tuple[Saved, ...]:  # fmt: skip
    """The first layer of a LoRA run: the embedding is frozen, so no gradient enters it. Its input norm keeps nothing
    (its input takes no gradient, its weight is frozen), nor do q_norm and k_norm where q_proj and k_proj carry no
    adapter (probed on transformers' layer: the input norm's FP32 upcast and 1/rms are all it keeps less with q and v
    adapted). Where the attention carries no adapter at all, nothing before the MLP needs a gradient: on a pre-norm
    SwiGLU layer its norms and attention keep nothing, and its MLP what the adapted layers' does (an over-count, on
    a MoE, of what a frozen router's softmax and routing product would keep there), but for the folded expert stacks
    whose GEMM's input takes no gradient; OLMo 2's and the Gemma families' norms after the sublayers, which the MLP's
    gradient passes through, are then counted whole."""
    kept = lora_layer(full_set, trains, s, b, w)
    adapted = trains.targets & ATTENTION_TARGETS
    if not adapted:
        pre_norm = not (arch.post_norms or arch.sandwich_norms or arch.eager_attention)
        if not pre_norm:
            return kept
        # a grouped GEMM keeps its folded stack for its input's gradient: the router's and gate_up's inputs take
        # none here, down_proj's only behind an adapted gate_up (probed on transformers' Qwen3-MoE layer)
        down = trains.folded_down if "experts.gate_up_proj" in trains.targets else 0
        out = [x for x in kept if (not x.attention or x.needs == "in_w") and x.needs != "folded"]
        if down:
            out.append(Saved("LoRA-folded expert down_proj stack (its input takes a gradient from gate_up's adapter)",
                             "E·h·i", down, w, False))  # fmt: skip
        return tuple(out)
    q, k = bool(adapted & {"q_proj", "qkv_proj"}), bool(adapted & {"k_proj", "qkv_proj"})
    out = []
    for x in kept:
        # OLMo 2 has no norm before its attention; Gemma 3's trace keeps its input norm's share in the first layer
        # too (about an FP32 upcast of the layer input: why is not yet read off its class), so it stays counted
        if x.norms and not arch.post_norms and arch.family != "gemma3_text":
            share = x.elements // x.norms * (x.norms - 1)
            x = Saved(f"{x.what}: but the input norm's (no gradient enters the first layer)",
                      f"{x.norms - 1}/{x.norms} of {x.shape}", share, x.width, x.split)  # fmt: skip
        elif x.qk and q != k:
            x = _qk_share(x, q, (arch.heads, arch.kv_heads), " (no gradient enters the first layer)")
        elif x.qk and not q:
            continue
        out.append(x)
    return tuple(out)


def frozen_layer(full_set: tuple[Saved, ...], flows: bool) -> tuple[Saved, ...]:
    """A frozen layer: what its input's gradient needs where one flows (``flows``), else nothing."""
    return tuple(k for x in full_set if (k := _kept(x, flows, frozenset())) is not None)


def partial_layer(full_set: tuple[Saved, ...], trains: Trains, heads: tuple[int, int]) -> tuple[Saved, ...]:
    """A layer some of whose modules are frozen by name: what the input's gradient needs (a gradient flows through
    every trained layer) and what the weights still training need."""
    trained, norms = trains.trained_modules, trains.layer_norms
    return tuple(k for x in full_set if (k := _kept(x, True, trained, norms, heads)) is not None)


def head_kept(saved: tuple[Saved, ...], trains: Trains | None, tied: bool) -> tuple[Saved, ...]:
    """The model's end without the head's input where the head's weight is frozen (LoRA; a tied head with a frozen
    embedding)."""
    frozen = trains is not None and (trains.head_frozen or (trains.freeze_embed and tied))
    return tuple(x for x in saved if not (frozen and x.needs == "head_w"))
