"""The reconciliation fed with PyTorch's own accounting: a traced FSDP2 step (``zero3-lab trace``: rank 0
under FSDPMemTracker on fake tensors) written as the probe would have written it, then reconciled.

On fake tensors there is no caching allocator and no CUDA context, so reserved equals allocated and the
start record's used memory equals its reserved: every byte of the difference must land in
"unexplained", and it must be small (the trace counts inputs, buffers and step counters the lab does
not). Skipped, with the reason, when the trace extra (torch) is not installed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.observed.reconcile import ALLOCATOR_RESERVE, CUDA_CONTEXT, UNEXPLAINED, reconcile
from app.observed.records import read_observed
from app.trace import torch_installed
from app.trace.setup import trace_setup

needs_torch = pytest.mark.skipif(
    not torch_installed(), reason="the trace extra is not installed (pip install -e '.[trace]')"
)

SMALL: dict[str, object] = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
                            "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 128}  # fmt: skip
FSDP2 = {"param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "gather_bytes": 2, "act_bytes": 2}
# The trace's timeline labels where a probe in the loop would mark (tracer.py names them).
MARKS = {
    "start": "iteration start (last step's gradients still resident)",
    "end-of-forward": "end of forward (logits)",
    "end-of-backward": "end of backward",
    "after-step": "after the optimizer step (steady state)",
}


def probe_lines(result: Any, ranks: int) -> bytes:
    """The trace's reported iteration as the probe's records, one copy per rank (the fake process group
    makes every rank hold what rank 0 does): allocated at each mark, and the highest total since the
    previous mark, as the probe's reset peak counters give it."""
    labels = [i.label for i in result.timeline]
    out: list[str] = []
    for rank in range(ranks):
        previous = labels.index(MARKS["start"])
        start = result.timeline[previous].total
        out.append(json.dumps({"v": 1, "rank": rank, "world": ranks, "step": 0, "instant": "start",
                               "allocated": start, "max_allocated": start, "reserved": start,
                               "device_total": start, "device_used": start}))  # fmt: skip
        for mark in ("end-of-forward", "end-of-backward", "after-step"):
            at = labels.index(MARKS[mark])
            now = result.timeline[at].total
            peak = max(i.peak_since_previous for i in result.timeline[previous + 1 : at + 1])
            out.append(json.dumps({"v": 1, "rank": rank, "world": ranks, "step": 1, "instant": mark,
                                   "allocated": now, "max_allocated": peak, "reserved": now,
                                   "max_reserved": peak}))  # fmt: skip
            previous = at
    return "\n".join(out).encode()


@pytest.mark.trace
@needs_torch
@pytest.mark.parametrize(("dp", "extra"), [(4, {}), (4, {"micro_batch": 2, "seq_len": 32, "act_policy": "full"})],
                         ids=["llama-d4", "llama-d4-b2-full"])  # fmt: skip
def test_a_traced_step_reconciles_with_little_unexplained(dp: int, extra: dict[str, Any]) -> None:
    from app.trace import import_torch

    import_torch()
    from app.trace.tracer import run_trace

    s = parse_scenario({"model": compact(SMALL), "dp": dp, "seq_len": 16, "micro_batch": 1, **FSDP2,
                        "norms": "unfused", **extra})  # fmt: skip
    result = run_trace(trace_setup(s))
    rec = reconcile(s, read_observed(probe_lines(result, dp)))
    assert rec.step == 1
    assert len(rec.comparisons) == 7
    for c in rec.comparisons:
        assert [r.rank for r in c.rows] == list(range(dp))
        for r in c.rows:
            assert r.entry(ALLOCATOR_RESERVE) == 0  # fake tensors: nothing cached above what is allocated
            assert r.entry(CUDA_CONTEXT) == 0
            assert r.observed == r.allocated
            assert r.estimate + r.entry(UNEXPLAINED) == r.observed
            # within ±5 % of what the tracker counted, as the schedule-aware peak is of the trace's peak
            assert abs(r.entry(UNEXPLAINED)) * 20 <= r.observed, (c.key, r.estimate, r.observed)
    assert rec.step_peak.rows[0].allocated == result.peak["total"]
