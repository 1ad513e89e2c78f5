"""One rank's share of a model under tensor, pipeline and expert parallelism.

ZeRO / FSDP shard whatever one rank is responsible for; *which* parameters those are is decided
first by the model-parallel layout, Megatron-LM's (Shoeybi et al. 2019, Narayanan et al. 2021):

- **Tensor parallelism** (``tp``) splits each decoder layer's matmuls: the column-parallel ones
  (attention's query, key and value, the MLP's up and gate projections, each expert's ``w1`` and
  ``w3``) along their output features, weight and bias; the row-parallel ones (attention's output
  projection, the MLP's down projection, each expert's ``w2``) along their input features, the bias
  kept whole on every rank; the token embedding and the LM head along the vocabulary (vocab
  parallel). Norms, the MoE router and GPT-2's learned position embedding are replicated. The
  busiest rank holds ⌈x ÷ tp⌉ of a split dimension (a key/value projection with fewer heads than
  ``tp`` is then one head per rank, replicated, as inference engines do; Megatron refuses it).
- **Pipeline parallelism** (``pp``) gives each stage L ÷ pp decoder layers (``pp`` must divide L,
  Megatron's default split). The first stage also holds the embedding; the last the final norm and
  the LM head, and with tied embeddings a copy of the embedding (Megatron's and DeepSpeed's
  ``TiedLayerSpec``: the two copies' gradients are all-reduced). Middle stages hold the same layers
  and neither end, so the first or the last stage is the busiest rank.
- **Expert parallelism** (``ep``) gives each rank E ÷ ep of every MoE layer's experts (``ep`` must
  divide E). The ZeRO sharding degree of expert parameters is then D ÷ ep (DeepSpeed-MoE's
  expert-data-parallel group), of the rest D.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from app.ledger.arithmetic import ceil_div, n
from app.ledger.models.architecture import Architecture
from app.ledger.models.inventory import Inventory, Tensor, Unit, inventory

# How tensor parallelism splits each module's weight (bias: column-parallel splits it, row-parallel keeps it).
# "col"/"row": nn.Linear, weight [out, in]; "col_conv1d"/"row_conv1d": GPT-2's Conv1D, weight [in, out];
# "vocab": split along the vocabulary (dim 0); "whole": replicated on every tensor-parallel rank.
_MODULE_SPLIT: dict[str, str] = {
    **dict.fromkeys(
        (
            "q_proj",
            "k_proj",
            "v_proj",
            "gate_proj",
            "up_proj",
            "w1",
            "w3",
            "query_key_value",
            "dense_h_to_4h",
            "qkv_proj",
            "gate_up_proj",
            "q_b_proj",
            "kv_b_proj",
        ),
        "col",
    ),
    **dict.fromkeys(("o_proj", "down_proj", "w2", "dense", "dense_4h_to_h"), "row"),
    "c_attn": "col_conv1d",
    "c_fc": "col_conv1d",
    "c_proj": "row_conv1d",
    **dict.fromkeys(("embed_tokens", "wte", "embed_in", "lm_head", "embed_out"), "vocab"),
    **dict.fromkeys(
        (
            "input_layernorm",
            "post_attention_layernorm",
            # Qwen3's q_norm and k_norm are head_dim wide, one weight for every head: whole on each rank (OLMo 2's
            # span the projections and split with their heads: tp_elements)
            "q_norm",
            "k_norm",
            "post_feedforward_layernorm",
            "pre_feedforward_layernorm",
            "ln_1",
            "ln_2",
            "ln_f",
            "norm",
            "final_layer_norm",
            "gate",
            "wpe",
            # DeepSeek's latents are replicated (Megatron's MLA: only their up-projections split by head)
            "q_a_proj",
            "q_a_layernorm",
            "kv_a_proj_with_mqa",
            "kv_a_layernorm",
        ),
        "whole",
    ),
}
_VOCAB_EMBEDDINGS = ("embed_tokens", "wte", "embed_in")  # the tensor a tied head is (not GPT-2's wpe)


class ParallelLayoutError(ValueError):
    """A layout the model cannot take: ``field`` names the input (``pp`` or ``ep``)."""

    def __init__(self, field: str, message: str, allowed: str) -> None:
        self.field = field
        self.allowed = allowed
        super().__init__(message)


def _split_dim(t: Tensor) -> int | None:
    """The dimension tensor parallelism splits in ``t`` (None: replicated)."""
    *path, kind = t.name.split(".")
    module = path[-1]
    split = _MODULE_SPLIT.get(module)
    if split is None:
        raise ValueError(f"no tensor-parallel rule for {t.name}")  # a new family must say how it splits
    if split == "vocab":
        return 0
    if split == "whole":
        return None
    conv = split.endswith("conv1d")
    if split.startswith("col"):  # output features: Linear dim 0, Conv1D dim 1; the bias [out] too
        return 0 if kind == "bias" else (1 if conv else 0)
    return None if kind == "bias" else (0 if conv else 1)  # row: input features; the bias stays whole


_HEAD_SPLIT = ("q_proj", "k_proj", "v_proj", "o_proj", "q_b_proj")  # split by whole heads of head_dim rows


def tp_elements(t: Tensor, tp: int, arch: Architecture | None = None) -> int:
    """Elements of one ``t`` on the busiest tensor-parallel rank: ⌈split dimension ÷ tp⌉ × the rest, or
    for the attention projections ⌈heads ÷ tp⌉ whole heads (a rank never holds part of a head: with fewer
    key/value heads than tp each rank keeps one, replicated). A fused projection (phi3) splits each of its
    parts so: ``qkv_proj`` ⌈a ÷ tp⌉ + 2 × ⌈kv ÷ tp⌉ heads, ``gate_up_proj`` 2 × ⌈i ÷ tp⌉ rows."""
    if len(t.shape) == 3:  # a MoE layer's experts in one tensor [E, out, in] (Qwen3MoeExperts, transformers 5.23.0)
        experts, out, inner = t.shape
        if t.name.endswith("gate_up_proj"):  # packed column parallel: the gate's and the up's features each split
            return experts * 2 * ceil_div(out // 2, tp) * inner
        return experts * out * ceil_div(inner, tp)  # down_proj, row parallel on its input features
    module = t.name.split(".")[-2]
    if arch is not None and arch.qk_norm == "projection" and module in ("q_norm", "k_norm") and tp > 1:
        return ceil_div(t.numel // arch.head_dim, tp) * arch.head_dim  # OLMo 2: the rank's heads of the projection
    dim = _split_dim(t)
    if dim is None or tp == 1:
        return t.numel
    rest = t.numel // t.shape[dim]
    if arch is not None and module == "qkv_proj":
        return (ceil_div(arch.heads, tp) + 2 * ceil_div(arch.kv_heads, tp)) * arch.head_dim * rest
    if arch is not None and module == "gate_up_proj":
        return 2 * ceil_div(arch.intermediate, tp) * rest
    if arch is not None and arch.mla and module in ("kv_b_proj", "o_proj"):  # per head: nope + v rows; v inputs
        per_head = t.shape[dim] // arch.heads
        return ceil_div(arch.heads, tp) * per_head * rest
    if arch is not None and module in _HEAD_SPLIT:
        return ceil_div(t.shape[dim] // arch.head_dim, tp) * arch.head_dim * rest
    return ceil_div(t.shape[dim], tp) * rest


def _is_expert(t: Tensor) -> bool:
    return ".experts." in t.name


@dataclass(frozen=True, slots=True)
class UnitShare:
    """One wrapped unit on one rank: its dense and expert elements there."""

    name: str
    dense: int
    experts: int

    @property
    def params(self) -> int:
        return self.dense + self.experts


@dataclass(frozen=True, slots=True)
class RankShare:
    """The parameters one rank holds before ZeRO shards them, and how they were counted.

    ``dense`` are sharded by ZeRO over the whole sharding degree D, ``experts`` over D ÷ ep.
    ``stage`` is the pipeline stage budgeted: ``only`` (pp = 1), ``first`` or ``last``.
    """

    tp: int
    pp: int
    ep: int
    stage: str
    layers: int  # decoder layers on this pipeline stage
    units: tuple[UnitShare, ...]  # the stage's units in order (the layers as one entry, "× layers")
    dense: int
    experts: int
    largest: UnitShare  # the largest unit on the rank: the U the ZeRO-3 gather materialises
    whole_model: int
    lines: tuple[str, ...]  # the counting, one line each

    @property
    def params(self) -> int:
        return self.dense + self.experts


def _unit_share(unit: Unit, tp: int, ep: int, arch: Architecture, name: str | None = None) -> UnitShare:
    dense = experts = 0
    for t in unit.tensors:
        each = tp_elements(t, tp, arch)
        if _is_expert(t):
            experts += each // ep  # one [E, …] tensor: E ÷ ep experts a rank (ep divides E)
        else:
            dense += each
    return UnitShare(name or unit.name, dense, experts)


def _embedding_copy(inv: Inventory, tp: int) -> UnitShare:
    """The tied head's copy of the token embedding on the last pipeline stage."""
    tensors = tuple(t for t in inv.embed.tensors if t.name.split(".")[-2] in _VOCAB_EMBEDDINGS)
    return UnitShare("embedding copy (tied head)", sum(tp_elements(t, tp) for t in tensors), 0)


def check_layout(arch: Architecture, pp: int, ep: int) -> None:
    """Refuse a layout the model cannot take, naming the input (:class:`ParallelLayoutError`)."""
    if arch.layers % pp:
        raise ParallelLayoutError(
            "pp",
            f"{pp:,} does not divide the model's {arch.layers:,} layers (each stage holds L ÷ pp of them)",
            f"a divisor of the model's {arch.layers:,} layers",
        )
    if ep > 1 and arch.experts == 0:
        raise ParallelLayoutError("ep", f"{ep:,} needs a mixture-of-experts model; this one has no experts", "1")
    if ep > 1 and arch.experts % ep:
        raise ParallelLayoutError("ep", f"{ep:,} does not divide the model's {arch.experts:,} experts per layer",
                                  f"a divisor of the model's {arch.experts:,} experts")  # fmt: skip


def _layer_line(layer: UnitShare, count: int, arch: Architecture, tp: int, ep: int) -> str:
    """How one decoder layer (of a kind: ``count`` of them on the stage) is counted on a rank."""
    which = "one decoder layer" if len(inventory(arch).layer_kinds) == 1 else f"{layer.name} (and its {count} alike)"
    return (
        f"{which} per rank: {n(layer.dense)} dense"
        + (
            f" + {n(layer.experts)} expert ({arch.experts // ep} of {arch.experts} experts, ep = {ep})"
            if layer.experts
            else ""
        )
        + (f" (tensor-parallel shares, t = {tp})" if tp > 1 else "")
        + f" = {n(layer.params)} parameters"
    )


@lru_cache(maxsize=1024)
def rank_share(arch: Architecture, tp: int = 1, pp: int = 1, stage: str = "first", ep: int = 1) -> RankShare:
    """The parameters of ``arch`` one rank holds on pipeline stage ``stage`` (``first`` or ``last``;
    ignored when pp = 1) under ``tp``, ``pp`` and ``ep``. Raises :class:`ParallelLayoutError`."""
    check_layout(arch, pp, ep)
    inv = inventory(arch)
    layers = arch.layers // pp
    where = "only" if pp == 1 else stage
    first = arch.layers - layers if where == "last" else 0  # the stage's first layer in the model
    kinds = [
        (_unit_share(unit, tp, ep, arch, unit.name), max(0, min(start + count, first + layers) - max(start, first)))
        for start, count, unit in inv.layer_kinds
    ]
    kinds = [(share, count) for share, count in kinds if count]
    embed, final = _unit_share(inv.embed, tp, ep, arch), _unit_share(inv.final, tp, ep, arch)
    ends: list[UnitShare] = []
    if where in ("only", "first"):
        ends.append(embed)
    if where in ("only", "last"):
        if where == "last" and arch.tied_embeddings:
            copy = _embedding_copy(inv, tp)
            final = UnitShare("final (with the tied embedding copy)", final.dense + copy.dense, 0)
        ends.append(final)
    dense = sum(count * share.dense for share, count in kinds) + sum(u.dense for u in ends)
    experts = sum(count * share.experts for share, count in kinds)
    stage_layers = tuple(share for share, _ in kinds)
    units = (*ends[:1], *stage_layers, *ends[1:]) if where != "last" else (*stage_layers, *ends)
    largest = max(units, key=lambda u: u.params)
    lines = [_layer_line(share, count, arch, tp, ep) for share, count in kinds]
    stage_text = {"only": "the whole model (pp = 1)", "first": f"the first of {pp} pipeline stages",
                  "last": f"the last of {pp} pipeline stages"}[where]  # fmt: skip
    ends_text = " + ".join(f"{u.name} {n(u.params)}" for u in ends)
    counted = " + ".join(f"{count} layer{'' if count == 1 else 's'} × {n(share.params)}" for share, count in kinds)
    lines.append(
        f"{stage_text}: {counted}"
        + (f" + {ends_text}" if ends_text else "")
        + f" = {n(dense + experts)} parameters per rank"
        + (f" (of which {n(experts)} expert, sharded over D ÷ ep)" if experts and ep > 1 else "")
    )
    return RankShare(tp, pp, ep, where, layers, units, dense, experts, largest, inv.params, tuple(lines))
