"""The activation ledger: what the forward pass keeps for backward, per rank, never divided by dp.

ZeRO / FSDP partition model state, not activations: every data-parallel rank runs its own micro
batch through the whole model, so nothing here takes ``dp`` (a test asserts the signature has none).
Tensor parallelism (``tp``) and sequence parallelism do split activations and are inputs.

Two models of a decoder layer, both stated tensor by tensor in :func:`layer_saved`:

- ``gpt2`` / ``gpt_neox``: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  Transformer Models", §4 and Table 2, restated per element so that other activation widths stay
  exact: ``act_bytes`` × (8·s·b·h + 2·s·b·i + 2·a·s²·b) + 1 B × (2·s·b·h + a·s²·b) for the dropout
  masks, which PyTorch keeps as one byte per element whatever the activation width. At 2-byte
  activations and i = 4h this is the paper's s·b·h·(34 + 5·a·s/h) exactly.
- ``llama`` / ``mistral`` / ``qwen2`` / ``mixtral``: SwiGLU MLP, grouped-query attention through a
  FlashAttention-style kernel that keeps no s×s scores (only its FP32 log-sum-exp), RMSNorm that
  keeps its input and FP32 1/rms, no dropout; MoE keeps each token's top-k expert activations.

Integer arithmetic only. Where ``tp`` (or sequence parallelism) divides a sum, the per-rank figure
is rounded **up** to a whole byte, once per figure: per layer, embedding, head, logits.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from app.ledger.arithmetic import ceil_div, n
from app.ledger.bounds import ACT_POLICIES, ACT_WIDTHS, LOGITS_WIDTHS, MICRO_BATCH, NORMS, SEQ_LEN, TP
from app.ledger.models.architecture import GPT_FAMILIES, Architecture

POLICIES: tuple[str, ...] = ACT_POLICIES
POLICY_DESCRIPTIONS: dict[str, str] = {
    "none": "no recomputation: every layer keeps all it saves for backward",
    "selective": "selective recomputation of the attention core (Korthikanti et al. 2022, §5)",
    "full": "full recomputation: each layer keeps only its input and recomputes its forward in backward",
}
# The scenario's own bounds (app/ledger/bounds.py): the activation model accepts what a scenario can hold.
SEQ_LEN_BOUNDS = SEQ_LEN
MICRO_BATCH_BOUNDS = MICRO_BATCH
TP_BOUNDS = TP
FP32 = 4
MASK = 1  # a dropout mask: one byte per element (torch.bool), whatever the activation width
INDEX = 8  # an int64 index


class ActivationInputError(ValueError):
    """An activation input out of bounds; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True, slots=True)
class Saved:
    """One tensor (or group of equal tensors) a decoder layer keeps for its backward pass.

    ``split``: divided over the ``tp`` ranks even without sequence parallelism (it lives inside
    the tensor-parallel region); with sequence parallelism every entry is divided.
    ``core``: inside the attention core, dropped (recomputed) by the selective policy.
    """

    what: str
    shape: str  # symbolic element count, e.g. "2·s·b·h"
    elements: int
    width: int
    split: bool
    core: bool = False

    @property
    def bytes(self) -> int:
        return self.elements * self.width


@dataclass(frozen=True, slots=True)
class ActivationLedger:
    """Activation bytes per rank for one micro batch, and what recomputation costs.

    ``total_bytes`` = ``in_flight`` × (``layers`` × ``per_layer_bytes`` + ``embedding_bytes``) +
    ``working_set_bytes`` + ``head_bytes`` + ``logits_bytes`` + ``all_to_all_bytes``, where ``layers`` are
    the decoder layers on the pipeline stage and a stage without the embedding or the head has 0 for it
    (pp = 1: one stage with both, one micro batch in flight). Under ``full``, ``per_layer_bytes`` is the checkpointed
    layer input and ``working_set_bytes`` one layer's complete saved set during its recompute;
    otherwise the working set is 0. ``recompute_flops`` is the extra forward FLOPs as an exact
    fraction (numerator, denominator) of a step without recomputation (forward + backward).
    """

    policy: str
    per_layer_bytes: int
    layers: int
    working_set_bytes: int
    embedding_bytes: int
    head_bytes: int
    logits_bytes: int
    total_bytes: int
    recompute_flops: tuple[int, int]
    formula: str
    assumptions: str
    saved: tuple[Saved, ...]  # one layer's complete saved set (what `none` keeps; `core`: what selective drops)
    source: str = "modelled"
    # Pipeline parallelism: the stage budgeted (only, first or last), and how many micro batches' activations
    # it keeps at once under 1F1B (the first stage: pp; every other: fewer, the last one).
    stage: str = "only"
    in_flight: int = 1
    all_to_all_bytes: int = 0  # expert parallelism: one MoE layer's dispatch send and receive buffers

    def recompute_fraction_text(self, places: int = 3) -> str:
        """The recompute fraction as a decimal, rounded half up to ``places`` digits (e.g. "0.326")."""
        num, den = self.recompute_flops
        scale = 10**places
        q = (2 * num * scale + den) // (2 * den)
        if places == 0:
            return str(q)
        return f"{q // scale}.{q % scale:0{places}d}"


# ---------------------------------------------------------------------------------------------
# What one layer saves
# ---------------------------------------------------------------------------------------------


def has_dropout(arch: Architecture) -> bool:
    """Whether the family trains with dropout, as its config defaults say: GPT-2 0.1 (``attn_pdrop``,
    ``resid_pdrop``, ``embd_pdrop``); GPT-NeoX 0 (``attention_dropout``, ``hidden_dropout``: GPT-NeoX-20B and
    Pythia train without). With p = 0 PyTorch keeps neither a mask nor a second copy of the scores."""
    return arch.family == "gpt2"


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


def _swiglu_layer(arch: Architecture, s: int, b: int, w: int, unfused: bool = False) -> tuple[Saved, ...]:
    """SwiGLU + GQA with a FlashAttention-style kernel; see the module docstring and ASSUMPTIONS.

    ``unfused``: RMSNorm as transformers' ``LlamaRMSNorm`` (Python ops): each norm keeps an FP32 upcast of its
    input (for ``pow`` and the scaling ``mul``) and the normalised input (for the weight's ``mul``) instead of
    the input itself: 4·s·b·h bytes more per norm at any activation width."""
    h, i, a, d, kv = arch.hidden, arch.intermediate, arch.heads, arch.head_dim, arch.kv_heads
    sb = s * b
    norm_inputs = (
        [
            Saved("RMSNorm FP32 upcasts of the inputs (unfused: kept by pow and mul)", "2·s·b·h", 2 * sb * h, FP32,
                  False),
            Saved("RMSNorm normalised inputs before the weight (unfused: kept by the weight's mul)", "2·s·b·h",
                  2 * sb * h, w, False),
        ]
        if unfused
        else [Saved("RMSNorm inputs (layer input, post-attention residual)", "2·s·b·h", 2 * sb * h, w, False)]
    )  # fmt: skip
    out = [
        *norm_inputs,
        Saved("RMSNorm 1/rms (FP32, per token per norm)", "2·s·b", 2 * sb, FP32, False),
        Saved("RMSNorm outputs (q/k/v input, MLP input)", "2·s·b·h", 2 * sb * h, w, False),
        Saved("Q after RoPE (heads × head_dim)", "s·b·a·d", sb * a * d, w, True),
        Saved("K and V (kv_heads × head_dim each)", "2·s·b·kv·d", 2 * sb * kv * d, w, True),
        Saved("attention output = o_proj input", "s·b·a·d", sb * a * d, w, True),
        Saved("attention log-sum-exp (FP32, per head per token)", "s·b·a", sb * a, FP32, True, core=True),
    ]
    if arch.experts == 0:
        out += [
            Saved("gate_proj and up_proj outputs", "2·s·b·i", 2 * sb * i, w, True),
            Saved("SiLU output", "s·b·i", sb * i, w, True),
            Saved("down_proj input (SiLU(gate) × up)", "s·b·i", sb * i, w, True),
        ]
        return tuple(out)
    e, k = arch.experts, arch.experts_per_token
    out += [
        Saved("router probabilities (FP32 softmax)", "s·b·E", sb * e, FP32, False),
        Saved("top-k routing weights", "s·b·k", sb * k, w, False),
        Saved("top-k dispatch indices (int64)", "s·b·k", sb * k, INDEX, False),
        Saved("expert inputs (each token to its k experts)", "k·s·b·h", k * sb * h, w, False),
        Saved("expert w1 (gate) and w3 (up) outputs", "2·k·s·b·i", 2 * k * sb * i, w, True),
        Saved("expert SiLU outputs", "k·s·b·i", k * sb * i, w, True),
        Saved("expert w2 (down) inputs", "k·s·b·i", k * sb * i, w, True),
        Saved("expert outputs (for the routing-weight product)", "k·s·b·h", k * sb * h, w, False),
    ]
    return tuple(out)


def layer_saved(
    arch: Architecture, seq_len: int, micro_batch: int, act_bytes: int = 2, norms: str = "fused"
) -> tuple[Saved, ...]:
    """Every tensor one decoder layer of ``arch`` keeps for backward with no recomputation (``norms``:
    what an RMSNorm keeps, fused or unfused; LayerNorm models are the same either way)."""
    if arch.family in GPT_FAMILIES:
        return _gpt_layer(arch, seq_len, micro_batch, act_bytes)
    return _swiglu_layer(arch, seq_len, micro_batch, act_bytes, norms == "unfused")


def _per_rank(saved: tuple[Saved, ...], tp: int, sp: bool) -> int:
    """Replicated bytes + ⌈split bytes ÷ tp⌉; with sequence parallelism ⌈all bytes ÷ tp⌉."""
    if sp:
        return ceil_div(sum(x.bytes for x in saved), tp)
    replicated = sum(x.bytes for x in saved if not x.split)
    return replicated + ceil_div(sum(x.bytes for x in saved if x.split), tp)


# ---------------------------------------------------------------------------------------------
# Recompute cost
# ---------------------------------------------------------------------------------------------


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


def recompute_fraction(arch: Architecture, seq_len: int, micro_batch: int, policy: str) -> tuple[int, int]:
    """Extra forward FLOPs of ``policy`` over one step without recomputation, exactly.

    A step is forward + backward ≈ 3 × forward (backward computes two matmuls per forward one).
    Full: one more forward of every layer, L·F_layer ÷ 3·(L·F_layer + F_head) — just under 1/3.
    Selective: one more forward of the attention core, L·4·b·s²·a·d ÷ the same; for a GPT layer
    without the head this is the paper's 4bs²h ÷ 3(24bsh² + 4bs²h) = s ÷ (18h + 3s).
    """
    if policy == "none":
        return (0, 1)
    layer, core, head = forward_flops(arch, seq_len, micro_batch)
    num = arch.layers * (layer if policy == "full" else core)
    den = 3 * (arch.layers * layer + head)
    g = gcd(num, den)
    return (num // g, den // g)


# ---------------------------------------------------------------------------------------------
# The ledger
# ---------------------------------------------------------------------------------------------

_GPT_ASSUMPTIONS = (
    "GPT-style block as in Korthikanti et al. 2022 (§4.1, Table 2): the s×s attention scores are "
    "materialised (softmax output, its dropout mask and the dropout output, 5·a·s²·b bytes at 2-byte "
    "activations), dropout masks at 1 byte per element, everything else at act_bytes; restated per "
    "element, it equals the paper's s·b·h·(34 + 5·a·s/h) at act_bytes = 2 and i = 4h, with the MLP "
    "terms scaling with i otherwise. LayerNorm statistics are not counted (as in the paper). The scores are "
    "what eager attention keeps (transformers' `eager` path, the math path of SDPA); a fused kernel "
    "(FlashAttention, SDPA's flash or memory-efficient backends) keeps none, and this count is then high."
)
_NEOX_NOTE = (
    " GPT-NeoX trains with dropout 0 (its config defaults; GPT-NeoX-20B and Pythia): PyTorch then keeps no "
    "masks and no second copy of the scores, so a layer keeps 7·act_bytes·s·b·h + 2·act_bytes·s·b·i + "
    "act_bytes·a·s²·b, (2 + act_bytes)·s·b·h + (1 + act_bytes)·a·s²·b bytes less than the paper's GPT block: "
    "its parallel residual has both LayerNorms read the layer input, one saved tensor, and the embedding "
    "keeps no dropout mask."
)
_SWIGLU_ASSUMPTIONS = (
    "SwiGLU / GQA block, unfused projections, no dropout; attention by a FlashAttention-style "
    "kernel that keeps q, k, v and its output but no s×s scores (only an FP32 log-sum-exp per head "
    "per token); RoPE keeps only its cos/sin tables (negligible, not counted); RMSNorm keeps its "
    "input and an FP32 1/rms per token; the MLP keeps gate and up outputs, the SiLU output and the "
    "down_proj input (4 × s·b·i); the attention output is the o_proj input (one tensor)."
)
_MOE_NOTE = (
    " MoE (token-choice top-k, no capacity limit, no token dropping): the router's FP32 "
    "probabilities (s·b·E), the top-k weights and int64 indices, and for each token's k experts "
    "its dispatched input, the expert's gate/up/SiLU/down-input activations (4 × i) and its output."
)
_COMMON = (
    " Rounding: each per-rank figure (per layer, embedding, head, logits) is rounded up to a whole "
    "byte once. Tensor parallelism divides what lies inside the TP region (q/k/v, attention, the "
    "MLP's i-wide tensors); residual-stream tensors (norm inputs and outputs, dropout masks on h) "
    "are replicated unless sequence parallelism is on, which divides everything by tp. "
    "The embedding output stands for the one residual-stream tensor outside the per-layer counts "
    "(each layer counts its own input; there are L + 1 such tensors); the head is the final norm's "
    "output (the LM head input); the logits are s·b·V in the loss dtype, vocab-parallel over tp. "
    "Saved tensors only: transient gradients and workspace are not counted, and the parts are "
    "summed as if all held at once. Never divided by dp."
)


def _check(field: str, value: object, lo: int, hi: int) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise ActivationInputError(field, f"must be an integer {lo:,} … {hi:,}")
    return value


def _terms(saved: tuple[Saved, ...], numbers: bool) -> str:
    parts = [f"{n(x.elements) if numbers else x.shape} × {x.width} B" for x in saved]
    return " + ".join(parts) if parts else "0"


def _layer_formula(saved: tuple[Saved, ...], tp: int, sp: bool, numbers: bool) -> str:
    if tp == 1:
        return _terms(saved, numbers)
    t = str(tp) if numbers else "t"
    if sp:
        return f"⌈({_terms(saved, numbers)}) ÷ {t}⌉"
    rep = tuple(x for x in saved if not x.split)
    split = tuple(x for x in saved if x.split)
    return f"({_terms(rep, numbers)}) + ⌈({_terms(split, numbers)}) ÷ {t}⌉"


def activation_ledger(
    arch: Architecture,
    *,
    seq_len: int,
    micro_batch: int,
    act_bytes: int = 2,
    policy: str = "none",
    tp: int = 1,
    sequence_parallel: bool = False,
    logits_bytes: int = 4,
    norms: str = "fused",
    pp: int = 1,
    pp_stage: str = "first",
    ep: int = 1,
) -> ActivationLedger:
    """Per-rank activation bytes of one micro batch of ``arch`` under a recomputation policy.

    ``norms``: ``fused`` (an RMSNorm keeps its input and FP32 1/rms) or ``unfused`` (transformers'
    ``LlamaRMSNorm``: also an FP32 upcast and the normalised input, 4·s·b·h bytes more per norm; what a
    trace on CPU fake tensors reproduces). No effect on LayerNorm models.

    ``act_bytes``: activation element width (BF16 = 2); ``logits_bytes``: the loss dtype's width
    (FP32 loss = 4); ``tp``: tensor-parallel degree (must divide the heads);
    ``sequence_parallel``: Megatron-style sequence parallelism over the same tp ranks.
    Policies: ``none``, ``selective`` (attention core recomputed), ``full`` (layer inputs only,
    plus one layer's saved set while it is recomputed).

    ``pp`` > 1: the stage ``pp_stage`` (``first`` or ``last``) holds L ÷ pp layers. Under 1F1B
    (Narayanan et al. 2021, §2.2) the first stage runs pp forwards before its first backward, so it
    keeps pp micro batches' activations (embedding output included) and no logits; the last keeps one
    micro batch's, with the head's and the logits. Assumes at least pp micro batches per step.
    ``ep`` > 1 (a MoE model): one layer's all-to-all send and receive buffers of the k·s·b dispatched
    tokens are resident beside the saved set (balanced routing, no capacity padding).
    Raises :class:`ActivationInputError`.
    """
    s = _check("seq_len", seq_len, *SEQ_LEN_BOUNDS)
    b = _check("micro_batch", micro_batch, *MICRO_BATCH_BOUNDS)
    t = _check("tp", tp, *TP_BOUNDS)
    if act_bytes not in ACT_WIDTHS or type(act_bytes) is not int:
        raise ActivationInputError("act_bytes", f"must be one of {', '.join(map(str, ACT_WIDTHS))}")
    if logits_bytes not in LOGITS_WIDTHS or type(logits_bytes) is not int:
        raise ActivationInputError("logits_bytes", f"must be one of {', '.join(map(str, LOGITS_WIDTHS))}")
    if norms not in NORMS:
        raise ActivationInputError("norms", f"must be one of {', '.join(NORMS)}")
    if policy not in POLICIES:
        raise ActivationInputError("act_policy", f"must be one of {', '.join(POLICIES)}")
    if type(sequence_parallel) is not bool:
        raise ActivationInputError("sequence_parallel", "must be true or false")
    if arch.heads % t != 0:
        raise ActivationInputError("tp", f"must divide the {arch.heads} attention heads (each rank holds whole heads)")
    if arch.learned_positions and s > arch.max_positions:
        raise ActivationInputError("seq_len", f"exceeds the model's {arch.max_positions:,} learned positions")
    sp = sequence_parallel and t > 1
    w, h = act_bytes, arch.hidden

    unfused = norms == "unfused" and arch.norm == "rmsnorm"
    full_set = layer_saved(arch, s, b, w, "unfused" if unfused else "fused")
    working = _per_rank(full_set, t, sp)
    if policy == "none":
        kept, per_layer, working_set = full_set, working, 0
    elif policy == "selective":
        kept = tuple(x for x in full_set if not x.core)
        per_layer, working_set = _per_rank(kept, t, sp), 0
    else:
        kept = (Saved("checkpointed layer input", "s·b·h", s * b * h, w, False),)
        per_layer, working_set = _per_rank(kept, t, sp), working

    gpt = arch.family in GPT_FAMILIES
    embed_saved = [Saved("embedding output", "s·b·h", s * b * h, w, False)]
    if has_dropout(arch):
        embed_saved.append(Saved("embedding dropout mask", "s·b·h", s * b * h, MASK, False))
    head_saved = [Saved("final norm output (LM head input)", "s·b·h", s * b * h, w, False)]
    if not gpt:
        head_saved.append(Saved("final RMSNorm 1/rms (FP32)", "s·b", s * b, FP32, False))
    if unfused:  # the final norm's FP32 upcast; its normalised input stands where the fused model has its input
        head_saved.append(Saved("final RMSNorm FP32 upcast (unfused)", "s·b·h", s * b * h, FP32, False))
    embedding = _per_rank(tuple(embed_saved), t, sp)
    head = _per_rank(tuple(head_saved), t, sp)
    logits = s * b * ceil_div(arch.vocab, t) * logits_bytes
    stage = "only" if pp == 1 else pp_stage
    if stage not in ("only", "first", "last") or arch.layers % pp:
        raise ActivationInputError("pp", f"must divide the model's {arch.layers:,} layers")
    in_flight = pp if stage == "first" else 1
    if stage == "first":
        head = logits = 0
    elif stage == "last":
        embedding = 0
    all_to_all = 0
    if ep > 1 and arch.experts:
        k = arch.experts_per_token
        all_to_all = _per_rank((Saved("all-to-all send and receive buffers", "2·k·s·b·h", 2 * k * s * b * h, w,
                                      False),), t, sp)  # fmt: skip
    stage_layers = arch.layers // pp
    total = in_flight * (stage_layers * per_layer + embedding) + working_set + head + logits + all_to_all

    variables = f"s={n(s)}, b={n(b)}, h={n(h)}, i={n(arch.intermediate)}, a={arch.heads}"
    if not gpt:
        variables += f", kv={arch.kv_heads}, d={arch.head_dim}"
        if arch.experts:
            variables += f", E={arch.experts}, k={arch.experts_per_token}"
    if t > 1:
        variables += f", t={t}" + (" with sequence parallelism" if sp else "")
    closed = ""
    if (
        has_dropout(arch)
        and not arch.parallel_residual
        and policy == "none"
        and t == 1
        and w == 2
        and arch.intermediate == 4 * h
    ):
        closed = (
            f" = 34·s·b·h + 5·a·s²·b = 34·{n(s)}·{b}·{n(h)} + 5·{arch.heads}·{n(s)}²·{b}"
            " (Korthikanti et al. 2022, Table 2)"
        )
    label = {
        "none": "per layer",
        "selective": "per layer (attention core recomputed)",
        "full": "per layer (checkpoint)",
    }
    lines = [
        f"{label[policy]} = {_layer_formula(kept, t, sp, False)} with {variables}",
        f"  = {_layer_formula(kept, t, sp, True)} = {n(per_layer)} B{closed}",
    ]
    if policy == "full":
        lines.append(f"working set (one layer recomputed) = {_layer_formula(full_set, t, sp, True)} = {n(working)} B")
    lines.append(
        f"logits = s·b·⌈V ÷ t⌉·{logits_bytes} B = {n(s)}·{n(b)}·{n(ceil_div(arch.vocab, t))}·{logits_bytes}"
        f" = {n(logits)} B"
    )
    layers = f"{stage_layers} layer{'' if stage_layers == 1 else 's'}"
    if stage == "only":
        lines.append(
            f"total = {layers} × {n(per_layer)} B + working set {n(working_set)} B + embedding {n(embedding)} B"
            f" + head {n(head)} B + logits {n(logits)} B"
            + (f" + all-to-all {n(all_to_all)} B" if all_to_all else "")
            + f" = {n(total)} B"
        )
    else:
        where = f"the first of {pp} pipeline stages" if stage == "first" else f"the last of {pp} pipeline stages"
        held = f"{in_flight} micro batches in flight (1F1B)" if in_flight > 1 else "1 micro batch in flight"
        ends = f" + embedding {n(embedding)} B" if stage == "first" else ""
        tail = f" + head {n(head)} B + logits {n(logits)} B" if stage == "last" else ""
        lines.append(
            f"total ({where}, {held}) = {in_flight} × ({layers} × {n(per_layer)} B{ends}) + working set "
            f"{n(working_set)} B{tail}"
            + (f" + all-to-all {n(all_to_all)} B" if all_to_all else "")
            + f" = {n(total)} B"
        )

    assumptions = _GPT_ASSUMPTIONS if gpt else _SWIGLU_ASSUMPTIONS
    if arch.family == "gpt_neox":
        assumptions += _NEOX_NOTE
    if arch.experts:
        assumptions += _MOE_NOTE
    if policy == "selective" and not gpt:
        assumptions += (
            " Selective recomputation of the attention core saves only the log-sum-exp here: a "
            "FlashAttention-style kernel already keeps no s×s scores, which is what the policy removes."
        )
    if unfused:
        assumptions += (
            " RMSNorm unfused (transformers' LlamaRMSNorm in Python, as a CPU trace runs it): each norm keeps an "
            "FP32 upcast of its input and the normalised input before the weight instead of the input, 4·s·b·h "
            "bytes more per norm (2 per layer and the final one)."
        )
    assumptions += " " + POLICY_DESCRIPTIONS[policy][0].upper() + POLICY_DESCRIPTIONS[policy][1:] + "." + _COMMON

    return ActivationLedger(
        policy=policy,
        per_layer_bytes=per_layer,
        layers=stage_layers,
        working_set_bytes=working_set,
        embedding_bytes=embedding,
        head_bytes=head,
        logits_bytes=logits,
        total_bytes=total,
        recompute_flops=recompute_fraction(arch, s, b, policy),
        formula="\n".join(lines),
        assumptions=assumptions,
        saved=full_set,
        stage=stage,
        in_flight=in_flight,
        all_to_all_bytes=all_to_all,
    )
