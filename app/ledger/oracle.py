"""The independent oracle: a second, direct stage table.

Deliberately naive and written separately from the ledger: it imports nothing from the
project, has no ownership table and no helpers, and spells out every cell. Check 1 compares
the ledger against it class by class.
"""

from __future__ import annotations


def stage_table(
    params: int,
    dp: int,
    param_bytes: int,
    grad_bytes: int,
    master_bytes: int,
    opt_states: int,
    opt_bytes: int,
) -> dict[int, dict[str, int]]:
    """Persistent bytes per busiest rank for stages 0–3, by class, straight from the ZeRO paper."""
    shard = (params + dp - 1) // dp  # the busiest rank's share, rounded up
    return {
        0: {
            "parameters": params * param_bytes,
            "gradients": params * grad_bytes,
            "master_weights": params * master_bytes,
            "optimizer_states": params * opt_states * opt_bytes,
        },
        1: {
            "parameters": params * param_bytes,
            "gradients": params * grad_bytes,
            "master_weights": shard * master_bytes,
            "optimizer_states": shard * opt_states * opt_bytes,
        },
        2: {
            "parameters": params * param_bytes,
            "gradients": shard * grad_bytes,
            "master_weights": shard * master_bytes,
            "optimizer_states": shard * opt_states * opt_bytes,
        },
        3: {
            "parameters": shard * param_bytes,
            "gradients": shard * grad_bytes,
            "master_weights": shard * master_bytes,
            "optimizer_states": shard * opt_states * opt_bytes,
        },
    }
