"""Communication per step against the collectives the real code calls: FSDP2 (torch 2.13) on a fake process group
dispatches its all-gathers and reduce-scatters as the c10d operators NCCL would run, and :mod:`app.trace.collectives`
sums each buffer (elements × the dtype's width). The lab's stage-3 terms, before the ring's (G − 1) ÷ G, must equal
those sums to the byte: the widths (the all-gather width, the reduce-scatter width, a frozen base in its own), which
units are all-gathered again in backward (the root recipe's root never; Accelerate's carved tail for the final norm;
the layers a gradient reaches, and the one below them, prefetched), what trains (LoRA's adapters, frozen layers and
embeddings), accumulation with and without sync, units kept gathered after forward or between micro batches (the
carved tail still all-gathered again after its own post-backward; the chunked loss's root callback reshards every
unit), tied embeddings, and torchtitan's own units and chunked loss.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.trace import titan_installed
from app.trace.setup import trace_setup
from tests.support.hf_trace import FSDP2, MARKS

pytestmark = [*MARKS, pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")]

LLAMA = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 688, "vocab_size": 4096}  # fmt: skip
TIED = compact({**LLAMA, "tie_word_embeddings": True})
TITAN = pytest.mark.skipif(not titan_installed(), reason="torchtitan is not installed (scripts/setup installs it)")
CASES: dict[str, Any] = {
    "hf": {},
    "hf-tied": {"model": TIED},
    "plain": {"stack": "plain-fsdp2", **FSDP2},
    "lora": {"lora_rank": 8},
    "lora-tied": {"model": TIED, "lora_rank": 8},
    "frozen-2": {"frozen_layers": 2},
    "frozen-2-embed": {"frozen_layers": 2, "freeze_embed": 1},
    "frozen-1-embed": {"frozen_layers": 1, "freeze_embed": 1},
    "frozen-all-embed": {"frozen_layers": 4, "freeze_embed": 1},
    "tied-frozen-2-embed": {"model": TIED, "frozen_layers": 2, "freeze_embed": 1},
    "tied-embed": {"model": TIED, "freeze_embed": 1},
    "accum-last": {"grad_accum": 2},
    "accum-every": {"grad_accum": 2, "grad_sync": "every"},
    "tied-accum-last": {"model": TIED, "grad_accum": 2},
    "lora-accum-last": {"lora_rank": 8, "grad_accum": 2},
    "kept-after-forward": {"reshard_after_forward": 0},
    "tied-kept-after-forward": {"model": TIED, "reshard_after_forward": 0},
    "frozen-2-embed-kept-after-forward": {"frozen_layers": 2, "freeze_embed": 1, "reshard_after_forward": 0},
    "plain-kept-after-forward": {"stack": "plain-fsdp2", **FSDP2, "reshard_after_forward": 0},
    "kept-between-micro-batches": {"grad_accum": 2, "reshard_after_backward": 0},
    "tied-kept-between-micro-batches": {"model": TIED, "grad_accum": 2, "reshard_after_backward": 0},
    "titan-chunked": pytest.param({"stack": "torchtitan"}, marks=TITAN),
    "titan-chunked-kept-after-forward": pytest.param({"stack": "torchtitan", "reshard_after_forward": 0}, marks=TITAN),
    "titan-outside-accum": pytest.param({"stack": "torchtitan", "loss": "outside", "grad_accum": 2}, marks=TITAN),
    "titan-outside-kept-after-forward": pytest.param(
        {"stack": "torchtitan", "loss": "outside", "reshard_after_forward": 0}, marks=TITAN
    ),
}


def _scenario(case: dict[str, Any]) -> Any:
    return parse_scenario({"model": compact(LLAMA), "stack": "hf-fsdp2", "dp": 4, "seq_len": 512, **case})


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_stage_3_communication_is_what_fsdp2_hands_its_collectives(case: dict[str, Any]) -> None:
    from app.trace.report import communication
    from app.trace.tracer import run_trace

    result = run_trace(trace_setup(_scenario(case)))
    rows = communication(result)
    assert result.collectives["all_gather"] > 0 and result.collectives["reduce_scatter"] > 0
    for kind, row in rows.items():
        assert row["lab"] == row["traced"], (kind, row)
