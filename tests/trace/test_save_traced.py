"""``save_path full-rank0`` against torch's own state-dict functions: FSDP2 on a fake process group (this process is
rank 0), one AdamW step, then ``get_model_state_dict`` and ``get_optimizer_state_dict`` with ``full_state_dict`` and
``cpu_offload``, as Accelerate 1.15.0 saves a FULL_STATE_DICT (the HF Trainer's default). What they hand rank 0 on
the CPU is what the host ledger counts at save: the larger of the two, one after the other."""

from __future__ import annotations

from typing import Any

import pytest

from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.trace import torch_installed
from app.trace.setup import trace_setup

pytestmark = [
    pytest.mark.trace,
    pytest.mark.skipif(not torch_installed(), reason="the trace extra is not installed (pip install -e '.[trace]')"),
]

LLAMA = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 688, "vocab_size": 1024}  # fmt: skip
FSDP2 = {"param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "opt_bytes": 4, "gather_bytes": 2, "act_bytes": 2}


def _cpu_bytes(tensors: Any) -> tuple[int, set[str]]:
    found = [t for t in tensors if hasattr(t, "numel") and t.dim() > 0]  # AdamW's 0-d step counters aside
    return sum(int(t.numel()) * t.element_size() for t in found), {str(t.device) for t in found}


def _full_state_dicts(raw: dict[str, object]) -> tuple[int, int]:
    """(the model's, the optimizer's) full state dict bytes on rank 0's CPU after one step."""
    from app.trace import import_torch

    torch = import_torch()
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    from app.trace import step

    setup = trace_setup(parse_scenario(raw))
    with step.fake_world(setup.dp) as mesh, FakeTensorMode():
        sharded = step.shard(step.build(setup, lambda *_: None), setup, mesh, lambda *_: None)
        tokens = torch.randint(0, 1024, (1, setup.seq_len))
        logits = sharded.model(tokens)
        torch.nn.functional.cross_entropy(logits.view(-1, 1024), tokens.view(-1)).backward()
        sharded.optimizer.step()
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        model, where = _cpu_bytes(get_model_state_dict(sharded.model, options=options).values())
        states: Any = get_optimizer_state_dict(sharded.model, sharded.optimizer, options=options)["state"]
        optimizer, where_too = _cpu_bytes(v for state in states.values() for v in state.values())
    assert where | where_too == {"cpu"}
    return model, optimizer


@pytest.mark.parametrize("dp", [2, 4])
def test_the_full_state_dicts_on_rank_0_are_the_host_ledgers_save_peak(dp: int) -> None:
    from app.ledger.estimate import estimate

    raw = {"model": compact(LLAMA), "dp": dp, "seq_len": 64, "reduce_bytes": 4, **FSDP2}
    model, optimizer = _full_state_dicts(raw)
    s = parse_scenario({**raw, "save_path": "full-rank0"})
    assert (model, optimizer) == (s.params * 4, s.params * 2 * 4)  # FP32 parameters; AdamW's two FP32 states
    host = estimate(s, with_kill_lists=False).ledger.host
    assert {st.save_peak for st in host.stages} == {max(model, optimizer)}
    sharded = estimate(parse_scenario({**raw, "save_path": "sharded"}), with_kill_lists=False).ledger.host
    assert {st.save_peak for st in sharded.stages} == {0}
