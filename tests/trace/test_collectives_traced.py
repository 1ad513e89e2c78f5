"""Communication per step against the collectives the real code calls: FSDP2 (torch 2.13) on a fake process group
dispatches its all-gathers and reduce-scatters as the c10d operators NCCL would run, and :mod:`app.trace.collectives`
sums each buffer (elements × the dtype's width). The lab's stage-3 terms, before the ring's (G − 1) ÷ G, must equal
those sums to the byte: the widths (the all-gather width, the reduce-scatter width, a frozen base in its own), which
units are all-gathered again in backward (the root recipe's root never; Accelerate's carved tail for the final norm;
the layers a gradient reaches, and the one below them, prefetched), what trains (LoRA's adapters, frozen layers and
embeddings), accumulation with and without sync, units kept gathered after forward or between micro batches (the
carved tail still all-gathered again after its own post-backward; the chunked loss's root callback reshards every
unit), tied embeddings, torchtitan's own units and chunked loss, and at D 6 (and HSDP's shard group of 3) every
parameter padded on dim 0 to a multiple of the group, as FSDP2 shards it.
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

VOCAB = 4096
LLAMA = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 688, "vocab_size": VOCAB}  # fmt: skip
TIED = compact({**LLAMA, "tie_word_embeddings": True})
QWEN3_MOE = compact({**LLAMA, "model_type": "qwen3_moe", "head_dim": 64, "moe_intermediate_size": 128,
                     "num_experts": 8, "num_experts_per_tok": 2})  # fmt: skip
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
    "modules-self-attn": {"frozen_modules": "self_attn"},
    "modules-mlp-norm-embed-frozen-1": {"frozen_modules": "mlp,input_layernorm", "freeze_embed": 1, "frozen_layers": 1},
    "moe-modules-experts": {"model": QWEN3_MOE, "frozen_modules": "experts"},
    "moe-lora-q-v": {"model": QWEN3_MOE, "lora_rank": 8, "lora_targets": "q_proj,v_proj"},
    "moe-lora-all-linear": {"model": QWEN3_MOE, "lora_rank": 8, "lora_targets": "all-linear"},
    # D 6 divides no dim 0 of these models: every parameter padded to a multiple of 6, as FSDP2 shards it
    "d6": {"dp": 6},
    "d6-plain": {"stack": "plain-fsdp2", **FSDP2, "dp": 6},
    "d6-tied-accum-last": {"model": TIED, "dp": 6, "grad_accum": 2},
    "d6-lora": {"dp": 6, "lora_rank": 8},
    "d6-frozen-1-embed-modules": {"dp": 6, "frozen_layers": 1, "freeze_embed": 1, "frozen_modules": "mlp"},
    "d6-moe": {"model": QWEN3_MOE, "dp": 6},
    "d6-moe-lora-router-experts": {"model": QWEN3_MOE, "dp": 6, "lora_rank": 4, "lora_targets": "gate,down_proj"},
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


@pytest.mark.parametrize(("reduce_bytes", "shard"), [(2, 2), (4, 2), (4, 3)])
def test_hsdp_reduce_scatters_within_its_group_and_all_reduces_the_shard_across_replicas(
    reduce_bytes: int, shard: int
) -> None:
    """The plain decoder sharded over a 2 × S mesh (two replicas of a shard group of S, FSDP2's HSDP): the
    all-gathers and the reduce-scatter within the group, the gradient shard all-reduced across the replicas in the
    reduce dtype — the lab's terms for ``shard_group`` S, to the byte (the lab's all-reduce term counts the ring's two
    passes over its one buffer); at S = 3 every parameter padded on dim 0, and the all-reduce on the padded shard."""
    from contextlib import nullcontext

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from app.ledger.state.communication import communication
    from app.trace import step
    from app.trace.collectives import CollectiveBytes

    raw = {"model": compact(LLAMA), "stack": "plain-fsdp2", "dp": 2 * shard, "seq_len": 512, **FSDP2,
           "reduce_bytes": reduce_bytes}  # fmt: skip
    setup = trace_setup(parse_scenario(raw))  # the model and its units as the flat trace builds them
    counted = CollectiveBytes()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2 * shard)
    try:
        mesh = init_device_mesh("cpu", (2, shard), mesh_dim_names=("replicate", "shard"))
        with FakeTensorMode():
            sharded = step.shard(step.build(setup, lambda *_: None), setup, mesh, lambda *_: None)
            tokens = torch.randint(0, VOCAB, (1, 512))
            for iteration in range(2):  # the second, with the optimizer's states made, is counted
                with counted if iteration else nullcontext():
                    sharded.optimizer.zero_grad(set_to_none=True)
                    logits = sharded.model(tokens)
                    loss: Any = F.cross_entropy(logits.float().view(-1, VOCAB), tokens.view(-1))
                    loss.backward()
                    sharded.optimizer.step()
    finally:
        dist.destroy_process_group()
    terms = communication(parse_scenario({**raw, "shard_group": shard}), 3).terms
    lab = {kind: sum(t.buffer for t in terms if t.what.startswith(kind.replace("_", "-"))) for kind in counted.sums}
    assert {**lab, "all_reduce": lab["all_reduce"] // 2} == counted.sums
    assert {t.group for t in terms} == {shard, 2}  # the group, and across the two replicas
