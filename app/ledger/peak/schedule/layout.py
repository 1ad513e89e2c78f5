"""The model's FSDP2 units at one D, and when the model's layer structure describes the scenario at all."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from app.ledger.models.activations.frozen import WALKED_FAMILIES, trains_walked
from app.ledger.models.fsdp2 import padded_rows_elements
from app.ledger.models.inventory import Tensor, Unit
from app.ledger.models.quant import packed_elements
from app.ledger.models.reference import resolve
from app.ledger.scenario import Scenario
from app.ledger.state.persistent import shard


def not_schedulable(s: Scenario) -> str | None:
    """Why ``s`` has no schedule to walk (its peak is then the declared one), or None when it has one."""
    if not s.model:
        return "no model: without the layer structure there is no schedule to walk"
    if s.source_of("params") != "from config" or s.source_of("unit_params") != "from config":
        return "params or unit_params typed: the model's layer structure no longer describes the scenario"
    if s.tp != 1:
        return "tensor parallelism: the schedule walks one data-parallel mesh (tp = 1)"
    if s.pp != 1:
        return "pipeline parallelism: the schedule walks one whole model per rank (pp = 1)"
    if s.ep != 1:
        return "expert parallelism: the schedule walks every expert on every rank (ep = 1)"
    if s.cp != 1 and s.loss == "chunked":
        return ("context parallelism with the chunked loss: the schedule walks the loss's slices of whole sequences; "
                "the modelled activations are the local sequence's, with ring attention's K/V buffers")  # fmt: skip
    if s.shard_group != s.dp or s.hpz != 1:
        return "a shard group or hpZ: the schedule walks one flat mesh of D ranks"
    if s.trainable_params != s.params:
        return _trains_not_walked(s)
    return None


def _trains_not_walked(s: Scenario) -> str | None:
    """Why a model of which only part trains has no schedule to walk, or None: the walk knows LoRA and frozen
    modules (:mod:`.trained`) on the dense families whose saved tensors it knows by what needs them."""
    if not (s.lora_rank or s.frozen_layers or s.freeze_embed or s.frozen_modules):
        return "trainable_params typed: which units hold gradients is not known (LoRA or frozen modules say it)"
    md = s.model_defaults()
    arch = md.model.architecture if md is not None else None
    if arch is None or not trains_walked(arch):
        return (f"part of the model trains: the schedule walks it on the layers of {', '.join(WALKED_FAMILIES)}; "
                "the modelled activations count what every module saves when all train")  # fmt: skip
    if s.act_policy == "op":
        return "part of the model trains under act_policy op: torchtitan's per-op policy is walked with all training"
    return None


@dataclass(frozen=True, slots=True)
class Layout:
    """The model's FSDP2 units at one D: the root (embedding, final norm, head) and the layers."""

    layers: int
    layer_params: int
    root_params: int
    head_grad_params: int  # what the head's backward gives a gradient to: final norm + head (tied: the embedding)
    layer_shard: int  # FSDP2: one layer's elements per rank, dim 0 padded to a multiple of D
    root_shard: int
    layer_unsharded: int  # D × layer_shard: what an all-gather materialises, padding included
    root_unsharded: int
    padded_total: int  # the whole model's elements per rank
    largest_tensor: int  # elements of the largest parameter tensor
    largest_tensor_shard: int  # its FSDP2 rows per rank
    largest_tensor_name: str
    mlp_out_params: int  # the MLP's output projection (one expert's): the first weight gradient of a layer's backward
    experts_dim: int  # the dim fused 3-D experts are sharded on (0: FSDP2's default; torchtitan's 1 past D > E)
    # wrap = embed-tail (untied): the embedding and the tail (final norm + head) as units of their own
    embed_params: int = 0
    embed_shard: int = 0
    embed_unsharded: int = 0
    tail_shard: int = 0
    tail_unsharded: int = 0
    head_params: int = 0  # the head alone: the tail's first backward gives only it a gradient
    head_unsharded: int = 0
    norm_params: int = 0
    tied: bool = False
    tied_params: int = 0  # tied: the shared embedding and head weight, V × h
    # deepseek_v3: layers 0 … dense_layers − 1 are of another kind (a dense MLP), with these figures; the layer_
    # figures above are then its MoE layers'
    dense_layers: int = 0
    dense_params: int = 0
    dense_shard: int = 0
    dense_unsharded: int = 0
    dense_mlp_out_params: int = 0

    def params_of(self, k: int) -> int:
        """Layer k's parameters."""
        return self.dense_params if k < self.dense_layers else self.layer_params

    def unsharded_of(self, k: int) -> int:
        """What layer k's all-gather materialises (padding included)."""
        return self.dense_unsharded if k < self.dense_layers else self.layer_unsharded

    def mlp_out_of(self, k: int) -> int:
        """Layer k's MLP output projection (all its experts'): the first weight gradient of its backward."""
        return self.dense_mlp_out_params if k < self.dense_layers else self.mlp_out_params

    def runs(self, lo: int, hi: int) -> tuple[tuple[int, int], ...]:
        """Layers lo … hi − 1 as runs of alike layers: (how many, each one's unsharded elements), empty runs left
        out; one run for a model of one kind of layer."""
        dense = max(0, min(hi, self.dense_layers) - lo)
        return tuple(
            (count, whole) for count, whole in ((dense, self.dense_unsharded), (hi - lo - dense, self.layer_unsharded))
            if count > 0
        )  # fmt: skip

    def last_dense(self, done: int) -> int:
        """How many of the top ``done`` layers (those backward reaches first) are of the dense kind."""
        return max(0, done - (self.layers - self.dense_layers))


def _padded_shard(tensors: tuple[Tensor, ...], dp: int, experts: int = 0) -> int:
    return sum(padded_rows_elements(t, dp, experts) for t in tensors)


def _packed(unit: Unit) -> Unit:
    """A decoder layer with its linear weights in 4 bits: each stored as ⌈n ÷ 4⌉ BF16 elements, one column
    (bitsandbytes' ``quant_storage`` layout, which FSDP2 shards on its rows), the rest as it is."""
    tensors = tuple(
        Tensor(t.name, (packed_elements(t.numel), 1), packed_elements(t.numel)) if len(t.shape) == 2 else t
        for t in unit.tensors
    )
    return replace(unit, tensors=tensors, params=sum(t.numel for t in tensors))


@lru_cache(maxsize=4096)
def layout(model: str, dp: int, padded: bool = True, quant: str = "none", experts: int = 0) -> Layout:
    """The units of ``model`` sharded over ``dp`` ranks (cached: the fit finder asks at many D); ``experts``: the dim
    a mixture of experts' fused experts are sharded on (:func:`~app.ledger.models.fsdp2.experts_dim`).

    ``padded=False`` gives the same units without FSDP2's dim-0 padding (shards ⌈x ÷ D⌉, units
    whole): a lower bound of every term that never grows with D, for the fit finder. ``quant`` (QLoRA's
    ``nf4``, ``nf4-dq``): the layers' linear weights are gathered and sharded as their packed BF16 elements, so every
    unit figure counts stored elements (``layer_params`` too)."""
    inv = resolve(model).inventory
    arch = inv.architecture
    kinds = inv.layer_kinds
    dense, layer = (kinds[0][2], kinds[-1][2]) if len(kinds) == 2 else (None, kinds[0][2])
    if quant != "none":  # a model of one kind of layer: the 4-bit base is refused for two
        layer = _packed(layer)
        kinds = ((0, arch.layers, layer),)
    root_tensors = inv.embed.tensors + inv.final.tensors
    layer_tensors = tuple(t for _, _, unit in kinds for t in unit.tensors)
    largest = max(
        (t for ts in (inv.embed.tensors, layer_tensors, inv.final.tensors) for t in ts), key=lambda t: t.numel
    )
    root_params = inv.embed.params + inv.final.params
    head = arch.vocab * arch.hidden if arch.tied_embeddings else 0
    head_tensors = tuple(t for t in inv.final.tensors if t.numel == arch.vocab * arch.hidden)
    head_params = sum(t.numel for t in head_tensors)
    dense_count = arch.dense_layers if dense is not None else 0
    if padded:
        embed_shard, tail_shard = _padded_shard(inv.embed.tensors, dp), _padded_shard(inv.final.tensors, dp)
        head_whole = dp * _padded_shard(head_tensors, dp)
        layer_shard, root_shard = _padded_shard(layer.tensors, dp, experts), _padded_shard(root_tensors, dp)
        dense_shard = _padded_shard(dense.tensors, dp) if dense is not None else 0
        layer_whole, root_whole, dense_whole = dp * layer_shard, dp * root_shard, dp * dense_shard
        total = root_shard + (arch.layers - dense_count) * layer_shard + dense_count * dense_shard
        largest_shard = padded_rows_elements(largest, dp, experts)
    else:
        embed_shard, tail_shard, head_whole = shard(inv.embed.params, dp), shard(inv.final.params, dp), head_params
        layer_shard, root_shard = shard(layer.params, dp), shard(root_params, dp)
        layer_whole, root_whole = layer.params, root_params
        dense_whole = dense.params if dense is not None else 0
        dense_shard = shard(dense_whole, dp)
        stored = root_params + (arch.layers - dense_count) * layer.params + dense_count * dense_whole
        total, largest_shard = shard(stored, dp), shard(largest.numel, dp)
    return Layout(
        layers=arch.layers,
        layer_params=layer.params,
        root_params=root_params,
        head_grad_params=inv.final.params + head,
        layer_shard=layer_shard,
        root_shard=root_shard,
        layer_unsharded=layer_whole,
        root_unsharded=root_whole,
        padded_total=total,
        largest_tensor=largest.numel,
        largest_tensor_shard=largest_shard,
        largest_tensor_name=largest.name,
        # the experts' down projections in one tensor: the grouped GEMM's weight gradient is all of theirs at once
        mlp_out_params=arch.hidden * arch.intermediate * (arch.experts if arch.fused_experts else 1),
        embed_params=inv.embed.params,
        embed_shard=embed_shard,
        embed_unsharded=dp * embed_shard if padded else inv.embed.params,
        tail_shard=tail_shard,
        tail_unsharded=dp * tail_shard if padded else inv.final.params,
        head_params=head_params,
        head_unsharded=head_whole,
        norm_params=inv.final.params - head_params,
        tied=arch.tied_embeddings,
        tied_params=head,
        dense_layers=dense_count,
        dense_params=dense.params if dense is not None else 0,
        dense_shard=dense_shard,
        dense_unsharded=dense_whole,
        dense_mlp_out_params=arch.hidden * arch.dense_intermediate,
        experts_dim=experts if padded else 0,
    )
