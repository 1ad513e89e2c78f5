"""One entry of a saved set (:class:`Saved`), the element widths, and the pieces every family's layer shares: what
its RMSNorms keep of their inputs and what a dense SwiGLU MLP keeps."""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.models.architecture import Architecture

FP32 = 4
MASK = 1  # a dropout mask: one byte per element (torch.bool), whatever the activation width
INDEX = 8  # an int64 index


@dataclass(frozen=True, slots=True)
class Saved:
    """One tensor (or group of equal tensors) a decoder layer keeps for its backward pass.

    ``split``: divided over the ``tp`` ranks even without sequence parallelism (it lives inside
    the tensor-parallel region); with sequence parallelism every entry is divided.
    ``core``: inside the attention core, dropped (recomputed) by the selective policy.
    ``layer_input``: an input of the layer besides the hidden state, which a checkpoint keeps too (full policy).
    ``slots``: one per routed token slot an expert computes on, which the busiest rank under expert parallelism
    holds more of when the routing is imbalanced (:func:`routed`).
    ``attention``: kept by the layer's norms or its attention (a pre-norm SwiGLU layer's: where no gradient enters
    the layer and the attention has nothing that trains, none of it is kept: :func:`~.frozen.lora_first_layer`).
    ``norms``: one equal share per each of the layer's ``norms`` RMSNorms, the input norm's first (whose input, in
    a layer no gradient enters, takes none); ``qk``: a share per query and per key head (q_norm's and k_norm's).
    ``needs``: kept only for a weight's own gradient, so not kept when that weight is frozen
    (:mod:`~app.ledger.models.activations.frozen`): ``norm_w`` the layer norms' weights, ``qk_norm_w`` q_norm's and
    k_norm's, ``in_w`` the projections reading
    the norms' outputs (half for q/k/v, half for the MLP's gate and up), ``down_w`` the MLP's down projection,
    ``o_w`` the attention's output projection where its input is a copy nothing else keeps, ``experts_w`` and
    ``experts_down_w`` a MoE block's experts' gate and up and their down projection (their grouped GEMMs' inputs),
    ``head_w`` the LM head, ``latent_in_w`` deepseek_v3's norm outputs (half for its latents' down-projections, half
    for its dense MLP's or shared experts' gate and up), ``w:<name>`` the weight of the module of that leaf name
    (deepseek_v3's ``q_b_proj``, its latent norms, its router);
    empty: kept whenever a gradient flows through the layer.
    """

    what: str
    shape: str  # symbolic element count, e.g. "2·s·b·h"
    elements: int
    width: int
    split: bool
    core: bool = False
    layer_input: bool = False
    slots: bool = False
    needs: str = ""
    attention: bool = False
    norms: int = 0
    qk: bool = False

    @property
    def bytes(self) -> int:
        return self.elements * self.width


def has_dropout(arch: Architecture) -> bool:
    """Whether the family trains with dropout, as its config defaults say: GPT-2 0.1 (``attn_pdrop``,
    ``resid_pdrop``, ``embd_pdrop``); GPT-NeoX 0 (``attention_dropout``, ``hidden_dropout``: GPT-NeoX-20B and
    Pythia train without). With p = 0 PyTorch keeps neither a mask nor a second copy of the scores."""
    return arch.family == "gpt2"


def norm_inputs(sbh: int, w: int, norms: str, post: bool = False, count: int = 2) -> list[Saved]:
    """What the layer's ``count`` RMSNorms keep of their inputs (``sbh`` = s·b·h elements each): the input itself
    (fused), an FP32 upcast and the normalised input in the activation width (unfused: transformers'
    LlamaRMSNorm), or the FP32 upcast and the normalised input still in FP32 (composite: torch.nn.RMSNorm as
    torch 2.13 decomposes it on CPU, x.float() · rsqrt(…) times the weight before the cast back)."""
    shape, elements = f"{count}·s·b·h", count * sbh
    if norms == "fused":
        read = "the attention's and the MLP's outputs" if post else "layer input, post-attention residual"
        read = "before and after each sublayer" if count == 4 else read
        return [Saved(f"RMSNorm inputs ({read})", shape, elements, w, False, norms=count)]
    upcast = Saved("RMSNorm FP32 upcasts of the inputs (kept by pow and mul)", shape, elements, FP32, False,
                   norms=count)  # fmt: skip
    if norms == "composite":
        return [upcast, Saved("RMSNorm normalised inputs in FP32 (composite: kept by the weight's mul)", shape,
                              elements, FP32, False, needs="norm_w")]  # fmt: skip
    return [upcast, Saved("RMSNorm normalised inputs before the weight (unfused: kept by the weight's mul)",
                          shape, elements, w, False, needs="norm_w")]  # fmt: skip


def dense_swiglu(sb: int, i: int, w: int, act: str = "SiLU", shape: str = "i", whose: str = "") -> list[Saved]:
    """What a dense SwiGLU MLP of width ``i`` keeps (GeGLU the same: its tanh GeLU, like SiLU, needs only its
    input); ``whose``: the MLP's name where a layer has two (deepseek_v3's shared experts)."""
    return [
        Saved(f"{whose}gate_proj and up_proj outputs", f"2·s·b·{shape}", 2 * sb * i, w, True),
        Saved(f"{whose}{act} output", f"s·b·{shape}", sb * i, w, True),
        Saved(f"{whose}down_proj input ({act}(gate) × up)", f"s·b·{shape}", sb * i, w, True, needs="down_w"),
    ]
