"""The bytes FSDP2 hands its collectives in one traced step (imports torch; :mod:`app.trace.tracer` enters it).

On the fake process group FSDP2's all-gathers and reduce-scatters still dispatch as the c10d operators a real
backend runs (``c10d._allgather_base_`` with the whole output, ``c10d._reduce_scatter_base_`` with the whole input,
``c10d.allreduce_``), so a dispatch mode sees each buffer as NCCL would: its elements times its dtype's width. The
sums are what the lab's communication terms count before the ring's (G − 1) ÷ G
(:mod:`app.ledger.state.communication`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# the operator's overload name → (what the report calls it, which argument holds the whole buffer)
_BUFFERS: dict[str, tuple[str, int]] = {
    "c10d._allgather_base_.default": ("all_gather", 0),  # (output, input, …): the gathered output
    "c10d._reduce_scatter_base_.default": ("reduce_scatter", 1),  # (output, input, …): the whole input
    "c10d.allreduce_.default": ("all_reduce", 0),  # ([tensors], …)
}
KINDS: tuple[str, ...] = ("all_gather", "reduce_scatter", "all_reduce")


def _bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return int(value.numel()) * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_bytes(v) for v in value)
    return 0


class CollectiveBytes(TorchDispatchMode):
    """Sums each collective's buffer bytes while active; ``sums`` by :data:`KINDS`."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.sums: dict[str, int] = dict.fromkeys(KINDS, 0)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        seen = _BUFFERS.get(str(func))
        if seen is not None:
            kind, at = seen
            self.sums[kind] += _bytes(args[at])
        return func(*args, **(kwargs or {}))
