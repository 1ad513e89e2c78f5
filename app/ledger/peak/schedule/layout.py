"""The model's FSDP2 units at one D, and when the model's layer structure describes the scenario at all."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from app.ledger.models.fsdp2 import padded_rows_elements
from app.ledger.models.inventory import Tensor
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
    if s.shard_group != s.dp or s.hpz != 1:
        return "a shard group or hpZ: the schedule walks one flat mesh of D ranks"
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


def _padded_shard(tensors: tuple[Tensor, ...], dp: int) -> int:
    return sum(padded_rows_elements(t, dp) for t in tensors)


@lru_cache(maxsize=4096)
def layout(model: str, dp: int, padded: bool = True) -> Layout:
    """The units of ``model`` sharded over ``dp`` ranks (cached: the fit finder asks at many D).

    ``padded=False`` gives the same units without FSDP2's dim-0 padding (shards ⌈x ÷ D⌉, units
    whole): a lower bound of every term that never grows with D, for the fit finder."""
    inv = resolve(model).inventory
    arch = inv.architecture
    layer = inv.units[1]
    root_tensors = inv.embed.tensors + inv.final.tensors
    largest = max((t for u in (inv.embed, layer, inv.final) for t in u.tensors), key=lambda t: t.numel)
    root_params = inv.embed.params + inv.final.params
    head = arch.vocab * arch.hidden if arch.tied_embeddings else 0
    head_tensors = tuple(t for t in inv.final.tensors if t.numel == arch.vocab * arch.hidden)
    head_params = sum(t.numel for t in head_tensors)
    if padded:
        embed_shard, tail_shard = _padded_shard(inv.embed.tensors, dp), _padded_shard(inv.final.tensors, dp)
        head_whole = dp * _padded_shard(head_tensors, dp)
        layer_shard, root_shard = _padded_shard(layer.tensors, dp), _padded_shard(root_tensors, dp)
        layer_whole, root_whole = dp * layer_shard, dp * root_shard
        total, largest_shard = root_shard + arch.layers * layer_shard, padded_rows_elements(largest, dp)
    else:
        embed_shard, tail_shard, head_whole = shard(inv.embed.params, dp), shard(inv.final.params, dp), head_params
        layer_shard, root_shard = shard(layer.params, dp), shard(root_params, dp)
        layer_whole, root_whole = layer.params, root_params
        total, largest_shard = shard(inv.params, dp), shard(largest.numel, dp)
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
    )
