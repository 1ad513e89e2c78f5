"""Liger Kernel 0.8.5's fused linear cross-entropy in a trace (``loss = fused``; imports torch and liger_kernel).

The model's forward becomes Liger's own ``lce_forward`` of its family (``liger_kernel/transformers/model/<model_type>``,
one of :data:`~app.ledger.bounds.LIGER_FAMILIES`), bound to
the instance as ``apply_liger_kernel_to_<family>(model=…, fused_linear_cross_entropy=True)`` binds it; Liger's other
kernels (RMSNorm, SwiGLU, RoPE) are not applied (the lab's ``norms`` input says what the norms keep). Liger's Python
runs as it is; what cannot run on CPU fake tensors is stood in for, none of it allocating:

- its two Triton kernels (``liger_cross_entropy_kernel``, ``element_mul_kernel``), which write their results in place
  into tensors Liger allocated: a launch that does nothing;
- ``target_mask.sum().item()`` (the count of tokens not ignored: a host sync, which sizes nothing) answers 1;
- ``torch.equal(grad_output, 1.0)`` in its backward answers True (the trace's loss is the mean: its gradient is 1);
- ``_can_use_mm_out`` answers True, as it does on a GPU for BF16 hidden states and head under no grad: the chunk's
  logits go into one reused ``logits_storage``.

One branch stays the CPU's: the head's gradient is accumulated chunk by chunk through ``torch.mm(…).float()``
(Liger's "legacy fallback": a V × h temporary in the head's width and, below FP32, its FP32 copy), where a GPU of
compute capability 8 or more accumulates in place (``addmm(out=grad_weight)``). The lab models the GPU's; the trace's
loss forward holds those temporaries more (:func:`cpu_only_bytes`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import MethodType
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor


def cpu_only_bytes(vocab: int, hidden: int, head_width: int) -> int:
    """What Liger's CPU branch holds more than its GPU branch while it accumulates the head's gradient: the
    chunk's V × h product in the head's width and (below FP32) its FP32 copy."""
    return vocab * hidden * (head_width + (4 if head_width < 4 else 0))


def with_fused_loss(model: Any) -> Any:
    """``model`` whose forward is Liger's ``lce_forward`` of its family."""
    module = importlib.import_module(f"liger_kernel.transformers.model.{model.config.model_type}")
    model.forward = MethodType(module.lce_forward, model)
    return model


class _NoLaunch:
    """A Triton kernel stood in for: ``kernel[grid](…)`` does nothing (the kernel writes in place, allocating
    nothing)."""

    def __getitem__(self, grid: object) -> Any:
        return lambda *args, **kwargs: None


@contextmanager
def stand_ins() -> Iterator[None]:
    """Liger's kernels and host syncs stood in for while the step runs (forward and backward)."""
    ops: Any = importlib.import_module("liger_kernel.ops.fused_linear_cross_entropy")
    saved = {name: getattr(ops, name) for name in ("liger_cross_entropy_kernel", "element_mul_kernel",
                                                   "_can_use_mm_out")}  # fmt: skip
    item, equal = FakeTensor.item, torch.equal
    ops.liger_cross_entropy_kernel = ops.element_mul_kernel = _NoLaunch()
    ops._can_use_mm_out = lambda _input, weight: True
    FakeTensor.item = lambda self: 1  # type: ignore[method-assign]
    torch.equal = lambda a, b: True  # type: ignore[assignment]
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(ops, name, value)
        FakeTensor.item = item  # type: ignore[method-assign]
        torch.equal = equal
