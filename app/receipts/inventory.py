"""A model's inventory as JSON: one decoder layer's tensors, with how many layers there are.

The response follows the model's *shape*, not its size: the identical decoder layers are one
unit entry with ``count`` = L, and a MoE layer's experts are two fused tensors (as transformers holds
them), so 1,024 layers of 1,024 experts answer in as few bytes as one layer of eight.
Names keep transformers' spelling with ``{k}`` for the layer index.
:class:`InventoryOut` describes it (``POST /api/model-inventory``); :class:`KnownModelOut` is one
built-in model as ``GET /api/models`` lists it.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from app.ledger.models.inventory import Inventory, Unit
from app.ledger.models.reference import ModelRef
from app.receipts.sections.model import UnitSize
from app.receipts.strict import Count, Strict


class TensorGroup(Strict):
    name: str = Field(description="transformers' parameter name; {k} is the layer index")
    shape: list[Count]


class UnitGroup(Strict):
    name: str
    count: Count = Field(description="identical units (the decoder layers)")
    params: Count = Field(description="parameters in one of these units")
    tensors: list[TensorGroup]


class InventoryOut(Strict):
    """A config's exact inventory: one entry per kind of unit and tensor, with counts."""

    model: str = Field(description="the scenario's model input for this config (cfg:…)")
    title: str
    family: str
    params: Count
    layers: Count
    tensor_count: Count = Field(description="tensors in the checkpoint")
    largest_unit: UnitSize
    units: list[UnitGroup] = Field(description="the embedding unit, all decoder layers as one entry, the final unit")
    ignored_keys: list[str] = Field(description="config keys this family does not read (the first 20)")
    ignored_key_count: Count


class KnownModelOut(Strict):
    id: str
    title: str
    source: str
    params: Count


def _unit(unit: Unit, name: str, prefix: str, count: int) -> dict[str, Any]:
    return {
        "name": name,
        "count": count,
        "params": unit.params,
        "tensors": [{"name": prefix + t.name, "shape": list(t.shape)} for t in unit.tensors],
    }


def unit_groups(inv: Inventory, layer_prefix: str) -> list[dict[str, Any]]:
    """The embedding unit, one entry for the decoder layers of each kind (deepseek_v3: its dense first layers, then
    its MoE ones), and the final unit."""
    kinds = inv.layer_kinds
    layers = [
        _unit(unit, "layers.{k}" if len(kinds) == 1 else f"layers.{{k}}, k = {first} … {first + count - 1}",
              layer_prefix, count)
        for first, count, unit in kinds
    ]  # fmt: skip
    return [
        _unit(inv.embed, inv.embed.name, inv.embed.prefix, 1),
        *layers,
        _unit(inv.final, inv.final.name, inv.final.prefix, 1),
    ]


def inventory_json(ref: ModelRef, ignored: list[str], ignored_count: int) -> dict[str, Any]:
    """The inventory of ``ref``: exact totals, the largest unit, and the units with their tensors.

    ``params`` = Σ units' ``params × count``; each unit's ``params`` = Σ its tensors' elements ×
    ``count``; ``tensor_count`` is the number of tensors in the checkpoint. ``ignored_keys`` are
    the config's keys that its family does not read (the first few; ``ignored_key_count`` says how
    many in all).
    """
    inv = ref.inventory
    # The layer prefix with the index as a placeholder: "model.layers.0." → "model.layers.{k}."
    first = inv.units[1].prefix
    layer_prefix = first[: -len("0.")] + "{k}."
    return {
        "model": ref.reference,
        "title": ref.title,
        "family": ref.architecture.family,
        "params": inv.params,
        "layers": ref.architecture.layers,
        "tensor_count": inv.tensor_count,
        "largest_unit": {"name": inv.largest_unit.name, "params": inv.largest_unit.params},
        "units": unit_groups(inv, layer_prefix),
        "ignored_keys": ignored,
        "ignored_key_count": ignored_count,
    }
