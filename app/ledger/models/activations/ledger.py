"""The activation ledger: what the forward pass keeps for backward, per rank, never divided by dp.

ZeRO / FSDP partition model state, not activations: every data-parallel rank runs its own micro
batch through the whole model, so nothing here takes ``dp`` (a test asserts the signature has none).
Tensor parallelism (``tp``) and sequence parallelism do split activations and are inputs. What one
layer saves is :mod:`~app.ledger.models.activations.saved`; the cost of recomputing it,
:mod:`~app.ledger.models.activations.recompute`; the formula and assumptions in words,
:mod:`~app.ledger.models.activations.explain`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from app.ledger.arithmetic import ceil_div
from app.ledger.bounds import (
    ACT_POLICIES,
    ACT_WIDTHS,
    LOGITS_WIDTHS,
    MICRO_BATCH,
    NORMS,
    ROUTING_IMBALANCE,
    SEQ_LEN,
    TP,
)
from app.ledger.formula import Formula
from app.ledger.models.activations.ends import all_to_all_saved, embedding_saved, head_saved, per_rank
from app.ledger.models.activations.entries import Saved
from app.ledger.models.activations.explain import assumptions, formula
from app.ledger.models.activations.figures import ActivationInputError, ActivationLedger
from app.ledger.models.activations.frozen import (
    Trains,
    frozen_layer,
    head_kept,
    lora_first_layer,
    lora_layer,
    partial_layer,
    trains_walked,
)
from app.ledger.models.activations.recompute import recompute_fraction
from app.ledger.models.activations.ring import local_seq_len, ring_kv_bytes
from app.ledger.models.activations.saved import (
    kept_saved,
    layer_saved,
    op_recomputed,
    op_released,
    op_saved,
    routed,
)
from app.ledger.models.architecture import GPT_FAMILIES, Architecture

POLICIES: tuple[str, ...] = ACT_POLICIES
# The scenario's own bounds (app/ledger/bounds.py): the activation model accepts what a scenario can hold.
SEQ_LEN_BOUNDS = SEQ_LEN
MICRO_BATCH_BOUNDS = MICRO_BATCH
TP_BOUNDS = TP
IMBALANCE_BOUNDS = ROUTING_IMBALANCE


def _check(field: str, value: object, lo: int, hi: int) -> int:
    if type(value) is not int or not lo <= value <= hi:
        raise ActivationInputError(field, f"must be an integer {lo:,} … {hi:,}")
    return value


def _check_choices(act_bytes: int, logits_bytes: int, norms: str, policy: str, sequence_parallel: bool) -> None:
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


def _check_gqa(arch: Architecture, gqa: str) -> None:
    if gqa not in ("native", "expand"):
        raise ActivationInputError("gqa", "must be one of native, expand")
    if gqa == "expand" and (arch.kv_heads == arch.heads or arch.family in GPT_FAMILIES):
        raise ActivationInputError("gqa", f"expand needs grouped K/V heads; {arch.family} has as many as query heads")
    if gqa == "expand" and arch.fused:
        raise ActivationInputError("gqa", "expand is not modelled for phi3's fused qkv_proj (not yet traced)")


def _check_every(policy: str, every: int, layers: int) -> None:
    if type(every) is not int or every < 1:
        raise ActivationInputError("ac_every", "must be an integer ≥ 1")
    if every > 1 and policy != "full":
        raise ActivationInputError("ac_every", f"{every}: checkpointing every N-th layer is act_policy full's")
    if every > layers:
        raise ActivationInputError("ac_every", f"{every} is above the model's {layers:,} layers (this stage's)")


def llama_block(arch: Architecture) -> bool:
    """A dense SwiGLU layer shaped as Llama's (no experts, q/k norms or fused projections, its norms before the
    sublayers): what torchtitan's per-op checkpointing policy (``op``) is written for."""
    return not (arch.family in GPT_FAMILIES or arch.experts or arch.qk_norm or arch.fused or arch.post_norms)


def _check_policy(arch: Architecture, policy: str) -> None:
    if policy == "op" and not llama_block(arch):
        raise ActivationInputError(
            "act_policy",
            "op is torchtitan's per-op checkpointing of its Llama block: a dense SwiGLU model shaped as Llama's "
            f"(llama, mistral, qwen2), not {arch.family}" + (" with experts" if arch.experts else ""),
        )


def _check_model(arch: Architecture, s: int, t: int) -> None:
    if arch.heads % t != 0:
        raise ActivationInputError("tp", f"must divide the {arch.heads} attention heads (each rank holds whole heads)")
    if arch.learned_positions and s > arch.max_positions:
        raise ActivationInputError("seq_len", f"exceeds the model's {arch.max_positions:,} learned positions")


def _stage(arch: Architecture, pp: int, pp_stage: str) -> tuple[str, int]:
    """(the stage budgeted, the micro batches it keeps in flight under 1F1B)."""
    stage = "only" if pp == 1 else pp_stage
    if stage not in ("only", "first", "last") or arch.layers % pp:
        raise ActivationInputError("pp", f"must divide the model's {arch.layers:,} layers")
    return stage, pp if stage == "first" else 1


_Kind = tuple[tuple[Saved, ...], tuple[Saved, ...], int, int, int]


def _layer_kind(
    arch: Architecture,
    s: int,
    b: int,
    w: int,
    t: int,
    sp: bool,
    policy: str,
    kernel: str,
    gqa: str,
    pct: int,
    dense: bool = False,
    trained: Callable[[tuple[Saved, ...]], tuple[Saved, ...]] | None = None,
) -> _Kind:
    """One kind of layer: (its whole saved set, what it keeps under ``policy``, those bytes per rank, the working set
    its recompute rebuilds, its whole set's bytes per rank); ``dense``: deepseek_v3's dense first layers; ``trained``:
    what of the whole set the layer keeps when only part of the model trains (:mod:`.frozen`)."""
    full_set = routed(layer_saved(arch, s, b, w, kernel, gqa, dense), pct)
    if trained is not None:
        full_set = trained(full_set)
        if not full_set:  # no gradient flows through it: no graph, no checkpoint
            return full_set, (), 0, 0, 0
    if policy == "op":
        kept, working = op_saved(arch, s, b, w), op_recomputed(full_set, arch, s, b, w)
    else:
        kept, working = kept_saved(full_set, policy, s, b, arch.hidden, w), full_set
    working_set = per_rank(working, t, sp) if policy in ("full", "op") else 0
    if policy == "op":  # what the recompute rebuilds, less the cache entries it frees
        working_set -= per_rank(op_released(arch, s, b, w), t, sp)
    return full_set, kept, per_rank(kept, t, sp), working_set, per_rank(full_set, t, sp)


def _figures(kind: _Kind) -> tuple[int, int, int]:
    """(kept, whole set, working set) bytes per rank of one kind of layer."""
    return kind[2], kind[4], kind[3]


def _trained_kinds(
    arch: Architecture, s: int, b: int, w: int, t: int, sp: bool, policy: str, kernel: str, gqa: str, trains: Trains
) -> tuple[_Kind, _Kind, int]:
    """(the trained layers' kind, the frozen first layers' kind, how many of those) when part of the model trains;
    deepseek_v3 (no frozen prefix): its MoE layers' kind and its dense first layers', each with what trains of it."""
    heads = (arch.heads, arch.kv_heads)
    if arch.two_kinds:
        moe = _layer_kind(arch, s, b, w, t, sp, policy, kernel, gqa, 100, trained=_kept_when(trains, arch, s, b, w))
        dense = _layer_kind(arch, s, b, w, t, sp, policy, kernel, gqa, 100, dense=True,
                            trained=_kept_when(trains.dense or Trains(), arch, s, b, w))  # fmt: skip
        n, k = trains.frozen_layers, arch.dense_layers
        if not n:
            return moe, dense, k
        # a frozen prefix as well, a third kind: each walked kind stands for the larger of the layers it counts
        flows = not trains.freeze_embed
        prefix = [_layer_kind(arch, s, b, w, t, sp, policy, kernel, gqa, 100, dense=kind,
                              trained=lambda full: frozen_layer(full, flows)) for kind in (True, False)]  # fmt: skip
        return _larger(moe, dense) if n < k else moe, _larger(*prefix) if n > k else prefix[0], n
    if trains.lora_rank:
        lora = _layer_kind(arch, s, b, w, t, sp, policy, kernel, gqa, 100,
                           trained=lambda full: lora_layer(full, trains, s, b, w))  # fmt: skip
        if arch.mla:
            return lora, lora, 0
        first = _layer_kind(arch, s, b, w, t, sp, policy, kernel, gqa, 100,
                            trained=lambda full: lora_first_layer(full, trains, s, b, w, arch))  # fmt: skip
        return lora, first, 1
    partly = (lambda full: partial_layer(full, trains, heads)) if trains.trained_modules else None
    trained = _layer_kind(arch, s, b, w, t, sp, policy, kernel, gqa, 100, trained=partly)
    flows = not trains.freeze_embed
    frozen = _layer_kind(arch, s, b, w, t, sp, policy, kernel, gqa, 100,
                         trained=lambda full: frozen_layer(full, flows))  # fmt: skip
    return trained, frozen, trains.frozen_layers


def _larger(a: _Kind, b: _Kind) -> _Kind:
    """One kind standing for layers of two (deepseek_v3's dense and MoE layers in one run): the saved set of the one
    that keeps more, each figure the larger of the two (an over-count of the difference, never an under-count)."""
    big = a if a[2] >= b[2] else b
    return big[0], big[1], max(a[2], b[2]), max(a[3], b[3]), max(a[4], b[4])


def _kept_when(trains: Trains, arch: Architecture, s: int, b: int, w: int
               ) -> Callable[[tuple[Saved, ...]], tuple[Saved, ...]] | None:  # fmt: skip
    """What of a layer's whole saved set it keeps when ``trains`` says what trains of it (deepseek_v3's kinds): its
    adapters', nothing where a LoRA run adapts nothing in it (no gradient reaches layers below every adapter: its
    dense first layers when only the experts carry adapters), its modules' still training, or all."""
    if trains.lora_rank:
        if not trains.targets:
            return lambda full: frozen_layer(full, False)
        return lambda full: lora_layer(full, trains, s, b, w)
    if trains.trained_modules:
        return lambda full: partial_layer(full, trains, (arch.heads, arch.kv_heads))
    return None


def _first_kinds(trains: Trains | None, alt_first: int, two_kinds: bool) -> tuple[str, str]:
    """The names of (the others, the first ``alt_first`` layers): deepseek_v3's own two kinds unless a frozen prefix
    makes the first ones frozen."""
    if trains is None or not alt_first or (two_kinds and not trains.frozen_layers):
        return "MoE", "dense"
    return ("adapted", "first") if trains.lora_rank else ("trained", "frozen")


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
    every: int = 1,
    gqa: str = "native",
    imbalance_pct: int = 100,
    cp: int = 1,
    trains: Trains | None = None,
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
    tokens are resident beside the saved set (no capacity padding); ``imbalance_pct`` (100–1,000) is the busiest
    rank's routed token slots over the balanced k·s·b: its experts' per-slot activations and its receive buffer
    grow with it (at ep = 1 every rank runs all experts on its own tokens, and the routing moves nothing).
    ``every`` > 1 (``full`` only): layers 0, every, 2·every, … are checkpointed and the others keep their whole
    saved set (transformers' ``activation_checkpointing_enable(every_n_layers=every)``).
    ``cp`` > 1 (context parallelism, :mod:`app.ledger.models.activations.ring`): every figure is the local
    sequence's, s ÷ cp tokens, and the layer in flight also holds ring attention's all-gathered K and V.
    ``trains`` (LoRA, frozen layers; Llama-shaped layers only, :mod:`.frozen`): what a layer keeps when only part of
    the model trains; the frozen first layers are then the second kind (``alt_first``).
    Raises :class:`ActivationInputError`.
    """
    s = _check("seq_len", seq_len, *SEQ_LEN_BOUNDS)
    b = _check("micro_batch", micro_batch, *MICRO_BATCH_BOUNDS)
    t = _check("tp", tp, *TP_BOUNDS)
    _check_choices(act_bytes, logits_bytes, norms, policy, sequence_parallel)
    _check_model(arch, s, t)
    _check_policy(arch, policy)
    sp = sequence_parallel and t > 1
    w = act_bytes

    kernel = norms if arch.norm == "rmsnorm" else "fused"  # LayerNorm models: one kind
    _check_gqa(arch, gqa)
    s = local_seq_len(arch, s, cp, gqa)  # context parallelism: from here on, the rank's own tokens
    pct = _check("routing_imbalance_pct", imbalance_pct, *IMBALANCE_BOUNDS) if ep > 1 and arch.experts else 100
    # gemma3_text: its global layers attend without a mask, natively; the sliding-window ones as ``gqa`` says
    alt_every = arch.global_every if arch.global_every > 1 and gqa == "expand" else 0
    kinds = _layer_kind(arch, s, b, w, t, sp, policy, kernel, "native" if arch.global_every == 1 else gqa, pct)
    full_set, kept, per_layer, working_set, full_layer = kinds
    alt_first = arch.dense_layers if arch.two_kinds else 0
    if arch.two_kinds:  # deepseek_v3: its first layers dense, the others MoE
        alt = _layer_kind(arch, s, b, w, t, sp, policy, kernel, gqa, pct, dense=True)
    else:
        alt = _layer_kind(arch, s, b, w, t, sp, policy, kernel, "native", pct) if alt_every else kinds
    frozen_kinds = None
    if trains is not None and trains_walked(arch):
        kinds, alt, alt_first = _trained_kinds(arch, s, b, w, t, sp, policy, kernel, gqa, trains)
        full_set, kept, per_layer, working_set, full_layer = kinds
        if alt_every:  # gemma3_text: its global layers (native, trained or frozen) beside the sliding-window ones
            frozen_sliding = alt
            alt, frozen_global, _ = _trained_kinds(arch, s, b, w, t, sp, policy, kernel, "native", trains)
            if alt_first:
                frozen_kinds = (_figures(frozen_sliding), _figures(frozen_global))

    mask_kept = (gqa == "expand" or arch.eager_attention) and policy in ("full", "op")
    embedding = per_rank(embedding_saved(arch, s, b, w, mask_kept), t, sp)
    head = per_rank(head_kept(head_saved(arch, s, b, w, kernel), trains, arch.tied_embeddings), t, sp)
    logits = s * b * ceil_div(arch.vocab, t) * logits_bytes
    stage, in_flight = _stage(arch, pp, pp_stage)
    if stage == "first":
        head = logits = 0
    elif stage == "last":
        embedding = 0
    all_to_all = per_rank(all_to_all_saved(arch, s, b, w, pct), t, sp) if ep > 1 and arch.experts else 0
    ring_kv = ring_kv_bytes(arch, s, b, w, cp, t)
    stage_layers = arch.layers // pp
    _check_every(policy, every, stage_layers)
    first_layer = arch.layers - stage_layers if stage == "last" else 0
    figures = ActivationLedger(
        policy=policy,
        per_layer_bytes=per_layer,
        layers=stage_layers,
        working_set_bytes=working_set,
        embedding_bytes=embedding,
        head_bytes=head,
        logits_bytes=logits,
        total_bytes=0,  # below: what each of the stage's layers keeps, summed
        recompute_flops=recompute_fraction(arch, s, b, policy, every),
        formula=Formula(),
        assumptions=assumptions(arch, policy, kernel),
        saved=full_set,
        stage=stage,
        in_flight=in_flight,
        all_to_all_bytes=all_to_all,
        ring_kv_bytes=ring_kv,
        cp=cp,
        every=every,
        full_layer_bytes=full_layer,
        alt_every=alt_every,
        first_layer=first_layer,
        alt_first=alt_first,
        first_kinds=_first_kinds(trains, alt_first, arch.two_kinds),
        alt_per_layer_bytes=alt[2],
        alt_full_layer_bytes=alt[4],
        alt_working_set_bytes=alt[3],
        frozen_kinds=frozen_kinds,
    )
    layers_bytes = figures.kept_before(stage_layers)
    working = figures.largest_working()
    figures = replace(
        figures, total_bytes=in_flight * (layers_bytes + embedding) + working + head + logits + all_to_all + ring_kv
    )
    rank = trains.lora_rank if trains is not None else 0
    text = formula(figures, arch, kept, s=s, b=b, w=w, t=t, sp=sp, logits_width=logits_bytes, pp=pp, rank=rank)
    return replace(figures, formula=text)
