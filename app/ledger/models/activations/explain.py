"""The activation ledger in words: its formula with the numbers substituted, and its assumptions."""

from __future__ import annotations

from app.ledger.arithmetic import ceil_div, n
from app.ledger.formula import Formula, Part, Remark
from app.ledger.models.activations.entries import Saved, has_dropout
from app.ledger.models.activations.figures import ActivationLedger
from app.ledger.models.activations.saved import op_recomputed, op_released
from app.ledger.models.architecture import GPT_FAMILIES, Architecture

POLICY_DESCRIPTIONS: dict[str, str] = {
    "none": "no recomputation: every layer keeps all it saves for backward",
    "selective": "selective recomputation of the attention core (Korthikanti et al. 2022, §5)",
    "op": "torchtitan 0.3.0's per-op selective checkpointing: each layer keeps its input and the outputs of the "
    "ops its policy saves (wqkv, w1 and w2, every second matmul; attention's output and log-sum-exp) and "
    "recomputes the rest in backward",
    "full": "full recomputation: each layer keeps only its input and recomputes its forward in backward",
}
# A layer's line by policy: its label, and the subject its remarks are said with. The checkpointed
# layer's label keeps its one-word tag in the arithmetic, so its remarks stand alone.
_LABELS: dict[str, tuple[Part, ...]] = {
    "none": ("per layer",),
    "selective": ("per layer", Remark("attention core recomputed", subject="per layer")),
    "op": ("per layer (op checkpoint)",),
    "full": ("per layer (checkpoint)",),
}
_SUBJECTS = {"none": "per layer", "selective": "per layer", "op": "", "full": ""}

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
    " MoE (token-choice top-k, no capacity limit, no token dropping) as transformers 5.23.0 runs it, grouped GEMMs "
    "over the k·s·b token slots sorted by expert (its default experts implementation: what it keeps does not "
    "depend on the routing): the router's FP32 probabilities (s·b·E), the top-k weights and int64 indices, the "
    "sort, gather and scatter indices, and for each token's k experts its dispatched input, the expert's "
    "gate/up/SiLU/down-input activations (4 × i) and its output; renormalised weights keep their FP32 sum."
)
_GEMMA2_NOTE = (
    " Gemma 2 (transformers 5.23.0, eager attention: its class refuses SDPA, which cannot soft-cap; a flash or "
    "flex kernel, if chosen, keeps no s×s scores and this count is then high): K and V expanded to every head, "
    "the scores soft-capped (the tanh output, a·s²·b), the softmax in FP32 and its cast for ×V (a·s²·b each); "
    "four RMSNorms a layer, computed in FP32 with (1 + weight); a GeGLU MLP (tanh GeLU: the same tensors as "
    "SwiGLU's); the soft-capped logits' tanh output kept to the loss's backward."
)
_GEMMA3_NOTE = (
    " Gemma 3 (transformers 5.23.0, SDPA): four RMSNorms a layer and the q/k norms per head, computed in FP32 with "
    "(1 + weight); a GeGLU MLP; every N-th layer global, the others through a sliding window, which from a longer "
    "sequence attend through a mask (K and V expanded, the mask kept per call): two kinds of layer, each counted."
)
_SELECTIVE_FLASH_NOTE = (
    " Selective recomputation of the attention core saves only the log-sum-exp here: a "
    "FlashAttention-style kernel already keeps no s×s scores, which is what the policy removes."
)
_UNFUSED_NOTE = (
    " RMSNorm unfused (transformers' LlamaRMSNorm in Python, as a CPU trace runs it): each norm keeps an "
    "FP32 upcast of its input and the normalised input before the weight instead of the input, 4·s·b·h "
    "bytes more per norm (2 per layer and the final one)."
)
_COMPOSITE_NOTE = (
    " RMSNorm composite (torch.nn.RMSNorm without a fused kernel, as torchtitan's runs on CPU): each norm keeps "
    "an FP32 upcast of its input and the normalised input in FP32 before the weight, (8 − act_bytes)·s·b·h "
    "bytes more per norm than a fused kernel (2 per layer and the final one)."
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


def assumptions(arch: Architecture, policy: str, norms: str) -> str:
    """What the count assumes, for ``arch``'s family under ``policy``."""
    gpt = arch.family in GPT_FAMILIES
    out = _GPT_ASSUMPTIONS if gpt else _SWIGLU_ASSUMPTIONS
    if arch.family == "gpt_neox":
        out += _NEOX_NOTE
    if arch.experts:
        out += _MOE_NOTE
    if arch.eager_attention:
        out += _GEMMA2_NOTE
    elif arch.sandwich_norms:
        out += _GEMMA3_NOTE
    if policy == "selective" and not gpt and not arch.eager_attention:
        out += _SELECTIVE_FLASH_NOTE
    out += {"unfused": _UNFUSED_NOTE, "composite": _COMPOSITE_NOTE}.get(norms, "")
    return out + " " + POLICY_DESCRIPTIONS[policy][0].upper() + POLICY_DESCRIPTIONS[policy][1:] + "." + _COMMON


# ---------------------------------------------------------------------------------------------
# The formula
# ---------------------------------------------------------------------------------------------


def _terms(saved: tuple[Saved, ...], numbers: bool) -> str:
    parts = [f"{n(x.elements) if numbers else x.shape} × {x.width} B" for x in saved]
    return " + ".join(parts) if parts else "0"


def layer_formula(saved: tuple[Saved, ...], tp: int, sp: bool, numbers: bool) -> str:
    """The per-rank sum of ``saved``: in symbols, or with the element counts (``numbers``)."""
    if tp == 1:
        return _terms(saved, numbers)
    t = str(tp) if numbers else "t"
    if sp:
        return f"⌈({_terms(saved, numbers)}) ÷ {t}⌉"
    rep = tuple(x for x in saved if not x.split)
    split = tuple(x for x in saved if x.split)
    return f"({_terms(rep, numbers)}) + ⌈({_terms(split, numbers)}) ÷ {t}⌉"


def _variables(arch: Architecture, s: int, b: int, t: int, sp: bool, subject: str, rank: int = 0) -> Formula:
    out = f"s={n(s)}, b={n(b)}, h={n(arch.hidden)}, i={n(arch.intermediate)}, a={arch.heads}"
    if arch.family not in GPT_FAMILIES:
        out += f", kv={arch.kv_heads}, d={arch.head_dim}"
        if arch.experts:
            out += f", E={arch.experts}, k={arch.experts_per_token}"
    if rank:
        out += f", r={rank}"
    if t > 1:
        out += f", t={t}"
    return Formula.of(out, Remark("with sequence parallelism", subject, bare=True) if t > 1 and sp else "")


def _closed_form(arch: Architecture, policy: str, s: int, b: int, w: int, t: int) -> Formula:
    """The paper's Table 2 form, where the layer is exactly the paper's GPT block."""
    if not (
        has_dropout(arch)
        and not arch.parallel_residual
        and policy == "none"
        and t == 1
        and w == 2
        and arch.intermediate == 4 * arch.hidden
    ):
        return Formula()
    return Formula.of(
        f" = 34·s·b·h + 5·a·s²·b = 34·{n(s)}·{b}·{n(arch.hidden)} + 5·{arch.heads}·{n(s)}²·{b}",
        Remark("Korthikanti et al. 2022, Table 2", subject="per layer"),
    )


def _total_line(led: ActivationLedger, pp: int) -> Formula:
    all_to_all = f" + all-to-all {n(led.all_to_all_bytes)} B" if led.all_to_all_bytes else ""
    if led.ring_kv_bytes:  # context parallelism: the ring's K/V buffers (the rest is already the local sequence's)
        all_to_all += f" + ring K/V (cp = {led.cp}) {n(led.ring_kv_bytes)} B"
    if led.alt_every or led.alt_first:  # two kinds of layer, each at its own size
        alt = sum(led.is_alt(k) for k in range(led.layers))
        kept = n(led.kept_before(led.layers))
        kinds = ("sliding-window", "global") if led.alt_every else led.first_kinds
        frozen = sum(led.is_frozen(k) for k in range(led.layers))
        layers = f"{led.layers - alt} {kinds[0]} and {alt} {kinds[1]} layers"
        entered = "frozen" if led.first_kinds[1] == "frozen" else "entered by no gradient"  # or LoRA's first layer
        layers += (f" ({frozen} {entered})" if frozen else "") + f" {kept} B"
    elif led.every > 1:  # full, every N-th layer: the checkpointed layers and the others, each at their own size
        c = led.checkpointed(led.layers)
        others = led.layers - c
        layers = (f"{c} checkpointed layer{'' if c == 1 else 's'} (every {led.every}) × {n(led.per_layer_bytes)} B"
                  f" + {others} other{'' if others == 1 else 's'} × {n(led.full_layer_bytes)} B")  # fmt: skip
    else:
        layers = f"{led.layers} layer{'' if led.layers == 1 else 's'} × {n(led.per_layer_bytes)} B"
    working = led.largest_working()
    if led.stage == "only":
        return Formula.of(
            f"total = {layers} + working set {n(working)} B"
            f" + embedding {n(led.embedding_bytes)} B + head {n(led.head_bytes)} B + logits {n(led.logits_bytes)} B"
            + all_to_all
            + f" = {n(led.total_bytes)} B"
        )
    first = led.stage == "first"
    where = f"the first of {pp} pipeline stages" if first else f"the last of {pp} pipeline stages"
    held = f"{led.in_flight} micro batches in flight (1F1B)" if led.in_flight > 1 else "1 micro batch in flight"
    ends = f" + embedding {n(led.embedding_bytes)} B" if first else ""
    tail = f" + head {n(led.head_bytes)} B + logits {n(led.logits_bytes)} B" if led.stage == "last" else ""
    return Formula.of(
        "total",
        Remark(f"{where}, {held}", subject="total"),
        f" = {led.in_flight} × ({layers}{ends}) + working set {n(working)} B{tail}"
        + all_to_all
        + f" = {n(led.total_bytes)} B",
    )


def formula(
    led: ActivationLedger,
    arch: Architecture,
    kept: tuple[Saved, ...],
    *,
    s: int,
    b: int,
    w: int,
    t: int,
    sp: bool,
    logits_width: int,
    pp: int,
    rank: int = 0,
) -> Formula:
    """``led``'s formula: one layer in symbols and in numbers, the recompute working set (``full``), the
    logits and the total of the stage (``rank``: LoRA's r, which the layer's adapters' entries read)."""
    subject = _SUBJECTS[led.policy]
    lines = [
        Formula.of(
            *_LABELS[led.policy],
            f" = {layer_formula(kept, t, sp, False)} with ",
            *_variables(arch, s, b, t, sp, subject, rank).parts,
        ),
        Formula.of(
            f"  = {layer_formula(kept, t, sp, True)} = {n(led.per_layer_bytes)} B",
            *_closed_form(arch, led.policy, s, b, w, t).parts,
        ),
    ]
    if led.policy in ("full", "op"):
        rebuilt = led.saved if led.policy == "full" else op_recomputed(led.saved, arch, s, b, w)
        what = "one layer recomputed"
        freed = ""
        if led.policy == "op":
            what = "one layer recomputed, less its cached outputs and the cache entries the recompute frees"
            freed = f" − ({layer_formula(op_released(arch, s, b, w), t, sp, True)})"
        lines.append(
            Formula.of(
                "working set",
                Remark(what, subject="working set"),
                f" = {layer_formula(rebuilt, t, sp, True)}{freed} = {n(led.working_set_bytes)} B",
            )
        )
    if led.alt_every:
        lines.append(
            Formula.of(
                f"a global layer (every {led.alt_every}th: no mask, K and V not expanded) keeps "
                f"{n(led.alt_per_layer_bytes)} B"
                + (f", rebuilds {n(led.alt_working_set_bytes)} B" if led.alt_working_set_bytes else "")
            )
        )
    elif led.alt_first:  # deepseek_v3's dense first layers, or the frozen first layers
        lines.append(Formula.of(f"{led.first_kinds[1]} layer = {n(led.alt_per_layer_bytes)} B"))
    if led.frozen_kinds is not None:  # gemma3_text's frozen first layers (or LoRA's first), of either kind
        sliding, global_ = led.frozen_kinds
        first = "frozen" if led.first_kinds[1] == "frozen" else "first"
        lines.append(Formula.of(f"a {first} sliding-window layer keeps {n(sliding[0])} B, a {first} global one "
                                f"{n(global_[0])} B"))  # fmt: skip
    lines.append(
        Formula.of(
            f"logits = s·b·⌈V ÷ t⌉·{logits_width} B = {n(s)}·{n(b)}·{n(ceil_div(arch.vocab, t))}·{logits_width}"
            f" = {n(led.logits_bytes)} B"
        )
    )
    if led.ring_kv_bytes:  # context parallelism: s above is the local sequence, s ÷ cp
        kv = ceil_div(arch.kv_heads, t)
        said = f"cp = {led.cp}: s is each rank's s ÷ cp tokens; ring attention all-gathers the whole sequence's K and V"
        lines.append(
            Formula.of(
                "ring K/V",
                Remark(said + " of the layer in flight", subject="ring K/V"),
                f" = (cp + 1)·2·s·b·⌈kv ÷ t⌉·d·{w} B = {led.cp + 1}·2·{n(s)}·{n(b)}·{kv}·{arch.head_dim}·{w}"
                f" = {n(led.ring_kv_bytes)} B",
            )
        )
    lines.append(_total_line(led, pp))
    return Formula.lines(*lines)
