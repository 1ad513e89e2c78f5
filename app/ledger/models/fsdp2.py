"""FSDP2's exact per-rank parameter shard, beside the ⌈N ÷ D⌉ lower bound of the ledger.

FSDP2 (``torch.distributed.fsdp.fully_shard``) shards every parameter on dim 0 as a DTensor
``Shard(0)``: dim 0 is padded up to a multiple of ``dp`` and each rank holds ⌈dim0 ÷ dp⌉ rows of
numel ÷ dim0 elements, the last ranks' rows partly padding. Summed over tensors this is at least
⌈N ÷ dp⌉ (each tensor's share is at least numel ÷ dp, and the sum is an integer), and the gap is
the *named* difference a reconciliation against a measured run shows: "dim-0 padding".

The all-gather of a unit materialises dp × (its padded shard) elements, so the largest gather
is reported too: it may be a different unit from the largest by parameter count.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ledger.arithmetic import ceil_div, n
from app.ledger.bounds import DP
from app.ledger.models.architecture import Architecture
from app.ledger.models.inventory import Inventory, Tensor

DP_BOUNDS = DP  # the scenario's dp bounds
WIDTHS = (1, 2, 4, 8)


class ShardInputError(ValueError):
    """A dp or element width outside its bounds."""


@dataclass(frozen=True, slots=True)
class Fsdp2Shard:
    """Per-rank parameter elements and bytes under FSDP2's dim-0 sharding, for one width.

    ``padded_*`` is what each rank allocates (Σ ⌈dim0 ÷ dp⌉ × numel ÷ dim0); ``lower_bound_*`` is
    ⌈N ÷ dp⌉; ``padding_bytes`` their difference (≥ 0, and 0 at dp = 1).
    """

    dp: int
    width: int
    padded_elements: int
    lower_bound_elements: int
    padded_bytes: int
    lower_bound_bytes: int
    padding_bytes: int
    largest_gather_unit: str
    largest_gather_elements: int
    note: str


def padded_rows_elements(t: Tensor, dp: int, experts_dim: int = 0) -> int:
    """One rank's elements of one tensor of ``t``: ⌈size ÷ dp⌉ × (numel ÷ size) along the dim FSDP2 shards it on
    (``size`` that dim's): dim 0 (``fully_shard``'s default), or for a mixture of experts' fused 3-D experts
    ``experts_dim`` (:func:`experts_dim`). A 0-d tensor is one row."""
    dim = experts_dim if len(t.shape) == 3 else 0
    size = t.shape[dim] if t.shape else 1
    if size == 0:
        return 0
    return ceil_div(size, dp) * (t.numel // size)


def experts_dim(arch: Architecture, stack: str, degree: int) -> int:
    """The dim FSDP2 shards a mixture of experts' fused 3-D experts on over ``degree`` ranks: torchtitan 0.3.0's
    ``apply_fsdp`` (``distributed/fsdp.py``) gives them ``Shard(1)`` where its FSDP degree exceeds the experts, which
    would otherwise leave ranks a padding expert each; everything else shards dim 0 (``fully_shard``'s default)."""
    return 1 if stack == "torchtitan" and arch.fused_experts and degree > arch.experts else 0


def uneven_experts(inv: Inventory, stack: str, degree: int) -> tuple[int, ...]:
    """The experts' dim-1 sizes that ``degree`` ranks do not divide where the stack shards them on dim 1
    (:func:`experts_dim`): FSDP2 (torch 2.13 ``FSDPParam``) refuses an uneven shard on a dim other than 0, so a run
    with any stops at ``fully_shard``. Empty: none, or the experts are sharded on dim 0."""
    if not experts_dim(inv.architecture, stack, degree):
        return ()
    # torchtitan's own MoE keeps w1 and w3 apart (``models/common/moe.py`` GroupedExperts): transformers' gate_up_proj
    # of 2·i rows is two tensors of i rows there
    sizes = {t.shape[1] // (2 if "gate_up" in t.name else 1)
             for _, _, unit in inv.layer_kinds for t in unit.tensors if len(t.shape) == 3}  # fmt: skip
    return tuple(sorted(size for size in sizes if size % degree))


def _padded(tensors: tuple[Tensor, ...], dp: int, experts: int = 0) -> int:
    return sum(padded_rows_elements(t, dp, experts) for t in tensors)


def fsdp2_shard(inv: Inventory, dp: int, width: int, experts: int = 0) -> Fsdp2Shard:
    """The FSDP2 per-rank shard of ``inv`` over ``dp`` ranks at ``width`` bytes per element.

    Example (hand-worked in the tests): one [5, 3] tensor at dp = 4 holds ⌈5 ÷ 4⌉ = 2 rows × 3
    = 6 elements per rank, against ⌈15 ÷ 4⌉ = 4: dim-0 padding of 2 elements.
    """
    if type(dp) is not int or not DP_BOUNDS[0] <= dp <= DP_BOUNDS[1]:
        raise ShardInputError(f"dp must be an integer {DP_BOUNDS[0]} … {DP_BOUNDS[1]:,}")
    if type(width) is not int or width not in WIDTHS:
        raise ShardInputError(f"width must be one of {', '.join(map(str, WIDTHS))} bytes per element")
    embed, final = inv.embed, inv.final
    kinds = inv.layer_kinds  # (first, count, unit) per run of alike layers
    per_layer = [_padded(unit.tensors, dp, experts) for _, _, unit in kinds]  # experts: :func:`experts_dim`
    ends = {"embed": _padded(embed.tensors, dp), "final": _padded(final.tensors, dp)}
    padded = ends["embed"] + sum(count * p for (_, count, _), p in zip(kinds, per_layer, strict=True)) + ends["final"]
    lower = ceil_div(inv.params, dp)
    # Largest all-gather: dp × a unit's padded shard; first of equals in execution order.
    gathers = (
        (embed.name, ends["embed"]),
        *((unit.name, p) for (_, _, unit), p in zip(kinds, per_layer, strict=True)),
        (final.name, ends["final"]),
    )
    gather_name, gather_shard = max(gathers, key=lambda g: g[1])
    padding = (padded - lower) * width
    if padding == 0:
        note = f"dim-0 padding: +0 bytes (the padded shard equals ⌈{n(inv.params)} ÷ {n(dp)}⌉)"
    else:
        note = (
            f"dim-0 padding: +{n(padding)} bytes ({n(padded)} − ⌈{n(inv.params)} ÷ {n(dp)}⌉ = "
            f"{n(padded - lower)} elements × {width} B)"
        )
    return Fsdp2Shard(
        dp=dp,
        width=width,
        padded_elements=padded,
        lower_bound_elements=lower,
        padded_bytes=padded * width,
        lower_bound_bytes=lower * width,
        padding_bytes=padding,
        largest_gather_unit=gather_name,
        largest_gather_elements=dp * gather_shard,
        note=note,
    )
