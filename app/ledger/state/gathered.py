"""The elements stage 3's collectives move, unit by unit, as FSDP2 lays its buffers out.

FSDP2 shards each parameter on dim 0, padded to a multiple of the shard group's G ranks (torch 2.13
``FSDPParam._init_sharded_param``: ``padded_sharded_param_size``), and its collectives run on whole padded shards:
an all-gather's output is G × Σ ⌈rows ÷ G⌉ × cols over the unit's parameters (``foreach_all_gather``), a
reduce-scatter's input the same over those with a gradient (``foreach_reduce``), and HSDP's all-reduce runs on the
padded shard the reduce-scatter leaves. Where G divides every dim 0 this is the plain count; at G = 1 it is the plain
count everywhere. Held to the buffers FSDP2 hands its collectives (``tests/trace/test_collectives_traced.py``,
D 6 beside D 4).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from app.ledger.models.defaults import ModelDefaults
from app.ledger.models.fsdp2 import experts_dim, padded_rows_elements
from app.ledger.models.inventory import Tensor
from app.ledger.models.reference import resolve
from app.ledger.models.trains import Lora, adapter_tensors, trained_layer, trained_root
from app.ledger.scenario import Scenario


def _gathered(tensors: Iterable[Tensor], group: int, experts: int = 0) -> int:
    """Elements of the buffer a collective over ``group`` ranks moves for these parameters (padded on the dim each is
    sharded on: ``experts``, :func:`~app.ledger.models.fsdp2.experts_dim`, for fused 3-D experts)."""
    return group * sum(padded_rows_elements(t, group, experts) for t in tensors)


@dataclass(frozen=True, slots=True)
class Units:
    """Each unit's elements in stage 3's collectives over G ranks (padded, as FSDP2 lays them out)."""

    embed: int  # the embedding (a tied head is its weight; GPT-2's learned positions with it)
    final: int  # the final norm and an untied head
    final_norm: int  # the final norm alone
    layers: tuple[tuple[int, int, int], ...]  # (first layer, how many, one layer's elements, its adapters included)
    trained: int  # what has a gradient, over every unit: what a step reduce-scatters
    padded: bool  # whether padding adds anything to the plain counts

    @property
    def outside(self) -> int:
        """The embedding, the final norm and the head: the root's units."""
        return self.embed + self.final

    @property
    def stored(self) -> int:
        """Every unit: what one forward all-gathers."""
        return self.outside + sum(count * each for _, count, each in self.layers)


def units(s: Scenario, md: ModelDefaults, group: int) -> Units:
    """The units of ``md`` (tp = pp = 1, one dense part) in the buffers of collectives over ``group`` ranks."""
    experts = experts_dim(md.model.architecture, s.stack, group)
    return _units(s.model, md.lora, s.frozen_layers, bool(s.freeze_embed), md.frozen_modules, group, experts)


# Cached: the layout search asks for the communication of hundreds of layouts of one model, a few groups each.
@lru_cache(maxsize=256)
def _units(model: str, lora: Lora | None, frozen_layers: int, freeze_embed: bool, modules: frozenset[str], group: int,
           experts: int) -> Units:  # fmt: skip
    ref = resolve(model)
    inv = ref.inventory

    def adapters(start: int) -> tuple[Tensor, ...]:  # deepseek_v3's dense first layers: their attention's alone
        return adapter_tensors(lora, dense=start < lora.dense_layers) if lora is not None else ()

    layers = tuple(
        (start, count, _gathered(unit.tensors + adapters(start), group, experts))
        for start, count, unit in inv.layer_kinds
    )
    if lora is not None:  # the adapters alone train, in every layer
        trained = sum(count * _gathered(adapters(start), group) for start, count, _ in inv.layer_kinds)
    else:
        trained = _gathered(trained_root(inv, freeze_embed), group)
        for start, count, unit in inv.layer_kinds:
            kept = count - max(0, min(frozen_layers, start + count) - start)  # the frozen prefix takes no gradient
            trained += kept * _gathered(trained_layer(unit.tensors, modules), group, experts)
    norm = _gathered((t for t in inv.final.tensors if "norm" in t.name), group)
    embed, final = _gathered(inv.embed.tensors, group), _gathered(inv.final.tensors, group)
    if group == 1:
        return Units(embed, final, norm, layers, trained, False)
    plain = _units(model, lora, frozen_layers, freeze_embed, modules, 1, 0)
    padded = (plain.stored, plain.trained) != (embed + final + sum(c * e for _, c, e in layers), trained)
    return Units(embed, final, norm, layers, trained, padded)
