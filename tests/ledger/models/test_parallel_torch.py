"""The tensor-parallel rule against PyTorch itself: a tiny Llama-shaped model parallelized with
``torch.distributed.tensor.parallel`` (torchtitan's plan: embedding RowwiseParallel, attention and MLP
input projections ColwiseParallel, output projections RowwiseParallel, the LM head ColwiseParallel) on a
fake process group holds, on rank 0, exactly ``rank_share(arch, tp).dense`` elements."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytestmark = pytest.mark.trace
torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402

from app.ledger.models.architecture import Architecture  # noqa: E402
from app.ledger.models.parallel import rank_share  # noqa: E402

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB, LAYERS = 48, 8, 4, 6, 40, 64, 2


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)
        self.gate_proj = nn.Linear(HIDDEN, INTER, bias=False)
        self.up_proj = nn.Linear(HIDDEN, INTER, bias=False)
        self.down_proj = nn.Linear(INTER, HIDDEN, bias=False)
        self.input_layernorm = nn.RMSNorm(HIDDEN)
        self.post_attention_layernorm = nn.RMSNorm(HIDDEN)


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.RMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)


ARCH = Architecture(
    family="llama", hidden=HIDDEN, layers=LAYERS, heads=HEADS, kv_heads=KV_HEADS, head_dim=HEAD_DIM,
    intermediate=INTER, vocab=VOCAB, tied_embeddings=False, max_positions=128,
)  # fmt: skip


@pytest.fixture
def fake_world(request: pytest.FixtureRequest) -> Iterator[int]:
    from torch.testing._internal.distributed.fake_pg import FakeStore

    tp: int = request.param
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=tp)
    try:
        yield tp
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("fake_world", [1, 2, 4], indirect=True)
def test_local_shards_equal_rank_share(fake_world: int) -> None:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    tp = fake_world
    mesh = init_device_mesh("cpu", (tp,))
    model = Tiny()
    whole = sum(p.numel() for p in model.parameters())
    plan: dict[str, ColwiseParallel | RowwiseParallel] = {
        "embed_tokens": RowwiseParallel(),
        "lm_head": ColwiseParallel(),
    }
    for k in range(LAYERS):
        for name in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"):
            plan[f"layers.{k}.{name}"] = ColwiseParallel()
        for name in ("o_proj", "down_proj"):
            plan[f"layers.{k}.{name}"] = RowwiseParallel()
    parallelize_module(model, mesh, plan)  # type: ignore[arg-type]
    local = sum((p.to_local() if isinstance(p, DTensor) else p).numel() for p in model.parameters())
    share = rank_share(ARCH, tp)
    assert whole == share.whole_model
    assert local == share.dense
    assert share.experts == 0
