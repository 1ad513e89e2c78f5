"""What the tests against transformers' own classes share: their marks (skipped without the trace extra) and the
FSDP2 layout they trace (FP32 sharded parameters, gradients and states; BF16 all-gather and compute)."""

from __future__ import annotations

import pytest

from app.trace import hf_stack_installed, torch_installed

MARKS = [
    pytest.mark.trace,
    pytest.mark.skipif(
        not (torch_installed() and hf_stack_installed()),
        reason="the trace extra (torch, transformers) is not installed (pip install -e '.[trace]')",
    ),
]
FSDP2: dict[str, object] = {
    "param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "opt_bytes": 4, "gather_bytes": 2, "act_bytes": 2,
}  # fmt: skip
