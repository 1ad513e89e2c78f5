"""The units' gradients when only part of the model trains: a :class:`Layout` of what trains in each unit.

FSDP2 all-gathers a unit whole, frozen parameters with the rest, but gives a gradient only to the parameters that
require one, and reduce-scatters only those (torch 2.13 ``FSDPParamGroup.post_backward``: ``fsdp_params_with_grad``). So
every gradient term of the walk — a unit's whole gradients, its reduce-scatter input (the trained parameters' padded
shards × D), the gradient shards, the optimizer's temporaries — reads this layout, while what is gathered reads the
model's (with LoRA its layers' adapters too: :func:`gathered_layout`). With LoRA every layer's trained parameters are
its adapters (``lora_A`` r × in, ``lora_B`` out × r, in the layer's unit) and the root trains nothing; with frozen
layers, the first N layers are a second kind of layer with no trained parameter (the layout's ``dense_`` run, as
deepseek_v3's dense first layers are the other kind there), a frozen embedding leaves the root its final norm and an
untied head, and modules frozen by name leave each other layer the parameters outside them (its reduce-scatter input
their padded shards × D).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from app.ledger.models.fsdp2 import padded_rows_elements
from app.ledger.models.inventory import Tensor
from app.ledger.models.reference import resolve
from app.ledger.models.trains import Lora, adapter_tensors, trained_layer, trained_root
from app.ledger.peak.schedule.layout import Layout
from app.ledger.state.persistent import shard


def _shard_of(tensors: tuple[Tensor, ...], dp: int, padded: bool, experts: int = 0) -> int:
    if padded:
        return sum(padded_rows_elements(t, dp, experts) for t in tensors)
    return shard(sum(t.numel for t in tensors), dp)


def _largest(u: Layout, tensors: tuple[Tensor, ...], dp: int, padded: bool) -> Layout:
    if not tensors:
        return replace(u, largest_tensor=0, largest_tensor_shard=0, largest_tensor_name="(none trains)")
    big = max(tensors, key=lambda t: t.numel)
    rows = padded_rows_elements(big, dp, u.experts_dim) if padded else shard(big.numel, dp)
    return replace(u, largest_tensor=big.numel, largest_tensor_shard=rows, largest_tensor_name=big.name)


def _lora(u: Layout, adapters: Lora, dp: int, padded: bool) -> Layout:
    tensors, dense = adapter_tensors(adapters), adapter_tensors(adapters, dense=True)
    per_rank, dense_rank = _shard_of(tensors, dp, padded), _shard_of(dense, dp, padded)
    whole = dp * per_rank if padded else adapters.per_layer
    dense_whole = dp * dense_rank if padded else adapters.dense_per_layer
    down = sum(m.params for m in adapters.modules if m.name.endswith("down_proj"))
    k = u.dense_layers  # deepseek_v3's dense first layers: their attention's adapters alone
    out = replace(
        u, layer_params=adapters.per_layer, layer_shard=per_rank, layer_unsharded=whole, root_params=0,
        head_grad_params=0, root_shard=0, root_unsharded=0, padded_total=(u.layers - k) * per_rank + k * dense_rank,
        mlp_out_params=down, embed_params=0, embed_shard=0, embed_unsharded=0, tail_shard=0, tail_unsharded=0,
        head_params=0, head_unsharded=0, norm_params=0, tied_params=0, dense_params=adapters.dense_per_layer,
        dense_shard=dense_rank, dense_unsharded=dense_whole, dense_mlp_out_params=0,
    )  # fmt: skip
    return _largest(out, tensors, dp, padded)


def _frozen(u: Layout, model: str, layers: int, embed: bool, modules: frozenset[str], dp: int, padded: bool) -> Layout:
    inv = resolve(model).inventory
    tied = u.tied
    root = trained_root(inv, embed)
    root_shard = _shard_of(root, dp, padded)
    kinds = inv.layer_kinds  # deepseek_v3: its dense first layers, then its MoE ones
    layer = trained_layer(kinds[-1][2].tensors, modules)
    out = u
    if modules:
        per_rank = _shard_of(layer, dp, padded, u.experts_dim)
        params = sum(t.numel for t in layer)
        down = any("down_proj" in t.name for t in layer)  # the MLP's (experts') output projection trains
        out = replace(
            u, layer_params=params, layer_shard=per_rank, layer_unsharded=dp * per_rank if padded else params,
            mlp_out_params=u.mlp_out_params if down else 0,
        )  # fmt: skip
    if len(kinds) == 2 and not layers:  # deepseek_v3 without a frozen prefix: what trains of its dense layers
        dense = trained_layer(kinds[0][2].tensors, modules)
        dense_rank, params = _shard_of(dense, dp, padded), sum(t.numel for t in dense)
        down = any("down_proj" in t.name for t in dense)
        out = replace(
            out, dense_params=params, dense_shard=dense_rank, dense_unsharded=dp * dense_rank if padded else params,
            dense_mlp_out_params=u.dense_mlp_out_params if down else 0,
            padded_total=root_shard + (u.layers - u.dense_layers) * out.layer_shard + u.dense_layers * dense_rank,
        )  # fmt: skip
    else:
        out = replace(
            out, dense_layers=layers, dense_params=0, dense_shard=0, dense_unsharded=0, dense_mlp_out_params=0,
            padded_total=root_shard + (u.layers - layers) * out.layer_shard,
        )  # fmt: skip
    if embed:
        out = replace(
            out, root_params=sum(t.numel for t in root), root_shard=root_shard,
            root_unsharded=dp * root_shard if padded else sum(t.numel for t in root),
            head_grad_params=u.norm_params if tied else u.head_grad_params, embed_params=0, embed_shard=0,
            embed_unsharded=0, tied_params=0,
        )  # fmt: skip
    trained = root + (layer if layers < u.layers else ())
    return _largest(out, trained, dp, padded)


@lru_cache(maxsize=1024)
def gathered_layout(u: Layout, adapters: Lora | None, dp: int, padded: bool) -> Layout:
    """The units FSDP2 gathers: ``u``, each layer's unit holding its adapters beside its frozen base (PEFT puts them
    inside the modules they wrap), so a layer's shard, its all-gather output and the model's padded total grow by
    the adapters' padded shards."""
    if adapters is None:
        return u
    extra = _shard_of(adapter_tensors(adapters), dp, padded)
    dense = _shard_of(adapter_tensors(adapters, dense=True), dp, padded)
    k = u.dense_layers  # deepseek_v3's dense first layers hold their attention's adapters alone
    return replace(
        u, layer_params=u.layer_params + adapters.per_layer, layer_shard=u.layer_shard + extra,
        layer_unsharded=u.layer_unsharded + (dp * extra if padded else adapters.per_layer),
        padded_total=u.padded_total + (u.layers - k) * extra + k * dense,
        dense_params=u.dense_params + adapters.dense_per_layer, dense_shard=u.dense_shard + dense,
        dense_unsharded=u.dense_unsharded + (dp * dense if padded else adapters.dense_per_layer),
    )  # fmt: skip


@lru_cache(maxsize=1024)
def trained_layout(
    u: Layout, model: str, adapters: Lora | None, frozen_layers: int, freeze_embed: bool, modules: frozenset[str],
    dp: int, padded: bool,
) -> Layout:  # fmt: skip
    """What trains of ``u`` (the model's units at D): ``u`` itself when everything trains; ``modules``: the layers'
    modules frozen by name."""
    if adapters is not None:
        return _lora(u, adapters, dp, padded)
    if frozen_layers or freeze_embed or modules:
        return _frozen(u, model, frozen_layers, freeze_embed, modules, dp, padded)
    return u
