"""The stacks battery of docs/fidelity.md ("The stacks"): each row traced and estimated, printed as the table.

    .venv/bin/python -m tests.bench.stacks          # about five minutes on this 2-core machine

Each row is one ``zero3-lab trace`` and one ``zero3-lab estimate`` with the FSDP2 layout, ``--model-config`` the
row's config and the row's flags; the table is the printed lines. Needs the trace extra (torch, transformers,
accelerate) and torchtitan (scripts/setup). A script, not a test: it prints figures (tests/trace/test_stacks_traced.py
and tests/trace/test_titan_traced.py hold the rows CI runs).
"""

from __future__ import annotations

import sys
from typing import Any

from app.ledger.scenario import Scenario

FSDP2 = {"param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "opt_bytes": 4, "gather_bytes": 2, "act_bytes": 2}
TINY = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 688, "vocab_size": 16384}  # fmt: skip
LLAMA = {"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
         "num_key_value_heads": 2, "intermediate_size": 1408, "vocab_size": 32000}  # fmt: skip
QWEN05 = {"model_type": "qwen2", "hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
          "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936,
          "tie_word_embeddings": True}  # fmt: skip
L3 = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
      "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256}  # fmt: skip
TINY_MHA = {**TINY, "num_key_value_heads": 4}
HF = {"stack": "hf-fsdp2"}
TT = {"stack": "torchtitan", "loss": "outside"}  # its own layout (FP32 state, BF16 all-gather, FP32 reduce-scatter)
TTC = {"stack": "torchtitan"}  # and its own loss: ChunkedLossWrapper, 8 slices
ROWS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("tiny Llama", TINY, {"dp": 4, "seq_len": 256, "reduce_bytes": 4, **HF, "wrap": "root", "loss": "inside"}),
    ("tiny Llama", TINY, {"dp": 4, "seq_len": 256, "reduce_bytes": 4, **HF, "wrap": "root", "loss": "outside"}),
    ("tiny Llama", TINY, {"dp": 4, "seq_len": 256, "reduce_bytes": 4}),
    ("Llama h 512", LLAMA, {"dp": 8, "seq_len": 512, "reduce_bytes": 4, **HF, "wrap": "root"}),
    ("Llama h 512", LLAMA, {"dp": 8, "seq_len": 512, "reduce_bytes": 2, **HF}),
    ("Llama h 512", LLAMA, {"dp": 8, "seq_len": 128, "reduce_bytes": 2, **HF}),
    ("Llama h 512", LLAMA, {"dp": 8, "seq_len": 512, "reduce_bytes": 2, **HF, "act_policy": "full"}),
    ("Llama h 512", LLAMA, {"dp": 8, "seq_len": 512, "reduce_bytes": 2, **HF, "reshard_after_forward": 0}),
    ("Llama h 512", LLAMA, {"dp": 8, "seq_len": 512, "reduce_bytes": 2, **HF, "prefetch": 2}),
    ("Qwen2.5-0.5B's shapes", QWEN05, {"dp": 8, "seq_len": 1024, "reduce_bytes": 2, **HF}),
    ("Llama 3 8B's shapes", L3, {"dp": 8, "seq_len": 4096, "reduce_bytes": 2, **HF}),
    ("Llama 3 8B's shapes", L3, {"dp": 8, "seq_len": 8192, "reduce_bytes": 2, **HF, "act_policy": "full"}),
    ("Llama 3 8B's shapes", L3, {"dp": 64, "seq_len": 4096, "reduce_bytes": 2, **HF}),
    ("Llama h 512", LLAMA, {"dp": 8, "seq_len": 512, "reduce_bytes": 2, **HF, "act_policy": "full", "ac_every": 2}),
    (
        "Llama 3 8B's shapes",
        L3,
        {"dp": 8, "seq_len": 8192, "reduce_bytes": 2, **HF, "act_policy": "full", "ac_every": 4},
    ),
    ("tiny Llama", TINY, {"dp": 4, "seq_len": 256, **TT, "act_policy": "none"}),
    ("tiny Llama", TINY, {"dp": 4, "seq_len": 256, **TT}),
    ("tiny Llama", TINY, {"dp": 4, "seq_len": 256, **TT, "act_policy": "full"}),
    ("tiny Llama, MHA", TINY_MHA, {"dp": 2, "seq_len": 1024, "micro_batch": 4, **TT}),
    ("Llama h 512", LLAMA, {"dp": 8, "seq_len": 512, **TT}),
    ("Llama h 512", LLAMA, {"dp": 256, "seq_len": 512, **TT, "micro_batch": 2}),
    ("Llama h 512", LLAMA, {"dp": 8, "seq_len": 2048, **TT, "act_policy": "full", "reshard_after_forward": 0}),
    ("tiny Llama", TINY, {"dp": 2, "seq_len": 32768, **TT}),
    ("tiny Llama", TINY, {"dp": 2, "seq_len": 16384, "micro_batch": 4, **HF, "act_policy": "full"}),
    ("tiny Llama, MHA", TINY_MHA, {"dp": 16, "seq_len": 4096, "micro_batch": 2, **HF}),
    ("Llama h 512", LLAMA, {"dp": 32, "seq_len": 8192, "micro_batch": 4, **TT}),
    ("Llama 3 8B's shapes", L3, {"dp": 8, "seq_len": 8192, **TT}),
    ("Llama 3 8B's shapes", L3, {"dp": 8, "seq_len": 8192, **TT, "act_policy": "full"}),
    ("tiny Llama", TINY, {"dp": 4, "seq_len": 256, **TTC, "act_policy": "none"}),
    ("tiny Llama", TINY, {"dp": 4, "seq_len": 256, **TTC}),
    ("tiny Llama", TINY, {"dp": 4, "seq_len": 256, **TTC, "act_policy": "full"}),
    ("tiny Llama, MHA", TINY_MHA, {"dp": 2, "seq_len": 1024, "micro_batch": 4, **TTC}),
    ("Llama h 512", LLAMA, {"dp": 8, "seq_len": 512, **TTC}),
    ("Llama h 512", LLAMA, {"dp": 32, "seq_len": 8192, "micro_batch": 4, **TTC}),
    ("Llama 3 8B's shapes", L3, {"dp": 8, "seq_len": 8192, **TTC}),
    ("Llama 3 8B's shapes", L3, {"dp": 8, "seq_len": 8192, **TTC, "act_policy": "full"}),
]


def tracker_leak(s: Scenario, phase: str) -> int:
    """The tracker's own leak with the chunked loss (app/ledger/peak/schedule/chunked.py): each traced step's
    slices, s·b·h in the activation width; the previous step's through the slices, this step's too after them."""
    if s.loss != "chunked":
        return 0
    md = s.model_defaults()
    assert md is not None
    step = s.seq_len * s.micro_batch * md.model.architecture.hidden * s.act_bytes
    return step * (1 if phase in ("forward", "loss") else 2)


def main() -> int:
    from app.trace import import_torch

    import_torch()
    from app.ledger.estimate import estimate
    from app.ledger.models.reference import compact
    from app.ledger.scenario import parse_scenario
    from app.trace.setup import trace_setup
    from app.trace.tracer import run_trace

    only = sys.argv[1:]  # words the row's "stack, wrap, loss, AC" must hold (e.g. chunked), else every row
    print("| config, run | stack, wrap, loss, AC | lab | trace | Δ | Δ less the tracker's leak | lab's worst instant |")
    for name, config, flags in ROWS:
        s = parse_scenario({"model": compact(config), **FSDP2, "micro_batch": 1, **flags})
        run = f"{s.stack}, {s.wrap}, {s.loss}, {s.act_policy}"
        if not all(word in run for word in only):
            continue
        traced = run_trace(trace_setup(s)).peak["total"]
        peak = estimate(s).ledger.stages[3].peak
        where = peak.instant.key if peak.instant else peak.kind
        leak = tracker_leak(s, peak.instant.phase if peak.instant else "")
        shown = ", ".join(f"{k} {v}" for k, v in flags.items() if k not in HF and k not in TT and k not in TTC)
        delta, less = (peak.total - traced) * 100 / traced, (peak.total + leak - traced) * 100 / traced
        print(f"| {name}, {shown} | {run} | {peak.total:,} | {traced:,} | {delta:+.2f} % | {less:+.2f} % | {where} |",
              flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
