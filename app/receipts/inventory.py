"""A model's inventory as JSON: every kind of tensor once, with how many there are.

The response follows the model's *shape*, not its size: the identical decoder layers are one
unit entry with ``count`` = L, and a MoE layer's identical experts are one tensor entry per kind
with ``count`` = E, so 1,024 layers of 1,024 experts answer in as few bytes as one layer of eight.
Names keep the checkpoint's spelling with ``{k}`` for the layer index and ``{e}`` for the expert.
"""

from __future__ import annotations

from typing import Any

from app.ledger.models.inventory import Inventory, Unit
from app.ledger.models.reference import ModelRef


def _unit(unit: Unit, name: str, prefix: str, count: int) -> dict[str, Any]:
    return {
        "name": name,
        "count": count,
        "params": unit.params,
        "tensors": [{"name": prefix + t.name, "shape": list(t.shape), "count": t.count} for t in unit.tensors],
    }


def unit_groups(inv: Inventory, layer_prefix: str) -> list[dict[str, Any]]:
    """The embedding unit, one entry for all decoder layers, and the final unit."""
    return [
        _unit(inv.embed, inv.embed.name, inv.embed.prefix, 1),
        _unit(inv.units[1], "layers.{k}", layer_prefix, inv.architecture.layers),
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
