"""Where a mixture of experts' fused 3-D experts are sharded, against FSDP2 itself (torch 2.13, a fake process group).

``fully_shard`` shards every parameter on dim 0, padded to a multiple of the ranks: past D > E each rank holds one
expert, most of them padding. torchtitan 0.3.0's ``apply_fsdp`` (``distributed/fsdp.py``) gives the experts
``Shard(1)`` there instead, through ``shard_placement_fn``. The lab's rule for a tensor's padded shard
(:func:`app.ledger.models.fsdp2.padded_rows_elements` on the dim :func:`~app.ledger.models.fsdp2.experts_dim`
chooses) must equal the all-gather FSDP2 then runs, to the byte, under both placements; and where dim 1 does not
divide, FSDP2 refuses the shard, so the lab refuses such a torchtitan layout naming ``dp``.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.ledger.models.fsdp2 import experts_dim, padded_rows_elements
from app.ledger.models.inventory import Tensor
from app.ledger.models.reference import resolve
from tests.support.hf_trace import MARKS

pytestmark = MARKS

EXPERTS, ROWS, COLS = 8, 24, 12  # 8 experts of [24, 12]: 12 ranks leave dim 0 four short, and dim 1 divides


@pytest.mark.parametrize("dim", [0, 1])
def test_the_experts_padded_shard_is_what_fsdp2_all_gathers(dim: int) -> None:
    import torch
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from app.trace.collectives import CollectiveBytes

    world = 12
    counted = CollectiveBytes()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        mesh = init_device_mesh("cpu", (world,))
        with FakeTensorMode():
            block: Any = torch.nn.Module()
            block.experts = torch.nn.Parameter(torch.empty(EXPERTS, ROWS, COLS))
            placement = (lambda _: Shard(1)) if dim else None
            fully_shard(block, mesh=mesh, shard_placement_fn=placement)
            with counted:
                block.unshard()
    finally:
        dist.destroy_process_group()
    lab = world * padded_rows_elements(Tensor("experts", (EXPERTS, ROWS, COLS), EXPERTS * ROWS * COLS), world, dim)
    assert counted.sums["all_gather"] == lab * 4  # FP32 parameters, gathered as they are
    assert (lab > EXPERTS * ROWS * COLS) is (dim == 0)  # dim 0 pads to 12 experts; dim 1 divides


def test_torchtitan_shards_the_experts_on_dim_1_past_one_expert_per_rank() -> None:
    arch = resolve("qwen3-30b-a3b").architecture  # 128 experts
    assert [experts_dim(arch, "torchtitan", d) for d in (64, 128, 256)] == [0, 0, 1]
    dense = resolve("llama-3.1-8b").architecture
    assert experts_dim(arch, "hf-fsdp2", 256) == experts_dim(dense, "torchtitan", 256) == 0


def test_an_uneven_dim_1_is_refused_by_fsdp2_and_by_the_lab() -> None:
    import torch
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from app.ledger.scenario import ScenarioError, parse_scenario

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=12)
    try:
        mesh = init_device_mesh("cpu", (12,))
        with FakeTensorMode():
            block: Any = torch.nn.Module()
            block.experts = torch.nn.Parameter(torch.empty(EXPERTS, 20, COLS))  # 20 rows over 12 ranks
            with pytest.raises(NotImplementedError, match="uneven sharding on dim 1"):
                fully_shard(block, mesh=mesh, shard_placement_fn=lambda _: Shard(1))
    finally:
        dist.destroy_process_group()
    # Qwen3-30B-A3B's down_proj experts are [128, 2048, 768]: 2,048 rows do not divide over 192 ranks
    with pytest.raises(ScenarioError) as refused:
        parse_scenario({"model": "qwen3-30b-a3b", "stack": "torchtitan", "dp": 192, "act_policy": "full"})
    assert [e.field for e in refused.value.errors] == ["dp"] and "uneven dim-1 shard" in str(refused.value)
    assert parse_scenario({"model": "qwen3-30b-a3b", "stack": "torchtitan", "dp": 256, "act_policy": "full"}).dp == 256
    # torchtitan's own experts keep w1 and w3 apart, [128, 768, 2048] each: 768 rows do not divide over 512 ranks
    with pytest.raises(ScenarioError) as refused:
        parse_scenario({"model": "qwen3-30b-a3b", "stack": "torchtitan", "dp": 512, "act_policy": "full"})
    assert "768 rows over 512 ranks" in str(refused.value)
