"""A deliberately naive model of the training peak, written for the tests only.

It shares no code with ``app/``: it takes the scenario as a plain mapping, spells out which
classes each ZeRO stage shards as literal sets, and rounds up with ``fractions.Fraction`` and
``math.ceil`` rather than the floor-division trick the package uses. The property tests
compare it with the production ledger on generated scenarios (bidict-style model testing).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

# Which tensor classes each stage shards across D ranks (ZeRO P_os, P_os+g, P_os+g+p).
SHARDED_AT: dict[int, frozenset[str]] = {
    0: frozenset(),
    1: frozenset({"master", "optimizer"}),
    2: frozenset({"master", "optimizer", "gradients"}),
    3: frozenset({"master", "optimizer", "gradients", "parameters"}),
}


def _up(numerator: int, denominator: int) -> int:
    return math.ceil(Fraction(numerator, denominator))


def persistent(s: Mapping[str, int | str], stage: int) -> int:
    """Bytes of model state on the busiest rank at ``stage``."""
    n, d = int(s["params"]), int(s["dp"])
    bytes_per_element = {
        "parameters": int(s["param_bytes"]),
        "gradients": int(s["grad_bytes"]),
        "master": int(s["master_bytes"]),
        "optimizer": int(s["opt_states"]) * int(s["opt_bytes"]),
    }
    total = 0
    for tensor_class, width in bytes_per_element.items():
        if tensor_class in OFF_DEVICE(s, stage):
            continue
        elements = _up(n, d) if tensor_class in SHARDED_AT[stage] else n
        total += elements * width
    return total


def OFF_DEVICE(s: Mapping[str, int | str], stage: int) -> set[str]:
    """The classes offload moves off the device: ZeRO-Offload's optimizer side from stage 1 (its
    gradients from stage 2, where they are partitioned), ZeRO-Infinity's parameters at stage 3."""
    gone: set[str] = set()
    if s.get("offload_optimizer", "none") != "none" and stage >= 1:
        gone |= {"master", "optimizer"} | ({"gradients"} if stage >= 2 else set())
    if s.get("offload_param", "none") != "none" and stage == 3:
        gone.add("parameters")
    return gone


def gather(s: Mapping[str, int | str], stage: int) -> int:
    """The all-gather transient: the unit's remote shards, once per resident unit, stage 3 only."""
    if stage != 3:
        return 0
    u, d = int(s["unit_params"]), int(s["dp"])
    own = _up(u, d)
    return (1 + int(s["prefetch"])) * (u - own) * int(s["gather_bytes"])


def peak(s: Mapping[str, int | str], stage: int) -> int:
    """persistent + gather + buckets + activations + overhead, then the contingency rounded up."""
    subtotal = (
        persistent(s, stage)
        + gather(s, stage)
        + int(s["bucket_bytes"])
        + int(s["activation_bytes"])
        + int(s["overhead_bytes"])
    )
    return subtotal + _up(subtotal * int(s["contingency_pct"]), 100)


def communication(s: Mapping[str, int | str], stage: int) -> int:
    """Ring volume per rank: the stage's buffers times (D - 1) / D, rounded up. Each collective in its own width:
    stage 3 all-gathers in the all-gather width, stages 1-3 reduce-scatter in the reduce-scatter width; stage 0's
    all-reduce and stages 1-2's all-gather of the updated copy in the gradient and parameter widths."""
    n, d = int(s["params"]), int(s["dp"])
    psi_p, psi_g = n * int(s["param_bytes"]), n * int(s["grad_bytes"])
    gathered, reduced = n * int(s["gather_bytes"]), n * int(s["reduce_bytes"])
    volume = {0: psi_g + psi_g, 1: reduced + psi_p, 2: reduced + psi_p, 3: gathered + gathered + reduced}[stage]
    return _up(volume * (d - 1), d)
