"""``trainable_params`` and ``frozen_bytes`` against the code users run: transformers' own Llama in BF16 (as
``from_pretrained`` loads a checkpoint, ``dtype="auto"``), PEFT 0.21.0's ``get_peft_model`` with a LoRA config, then
Accelerate 1.15.0's own ``fsdp2_prepare_model`` (``app/trace/accelerate.py``: it upcasts only what trains) on a
fake process group of D ranks (this process is rank 0), one step of ``torch.optim.AdamW``. The bytes this rank then
holds are the persistent ledger's at stage 3: the adapters' FP32 shards, the frozen base's BF16 shards, gradients and
AdamW's two states for the adapters only. Real tensors: the model is small, and PEFT's adapter injection cannot run
on fake ones. Every dimension divides D, so FSDP2's per-tensor padding is zero and ⌈x ÷ D⌉ is exact."""

from __future__ import annotations

from typing import Any

import pytest

from app.ledger.ledger import compute_ledger
from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.trace import torch_installed
from app.trace.setup import trace_setup

pytestmark = [
    pytest.mark.trace,
    pytest.mark.skipif(not torch_installed(), reason="the trace extra is not installed (pip install -e '.[trace]')"),
]

LLAMA = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1024}  # fmt: skip


def _local(t: Any) -> Any:
    return t.to_local() if hasattr(t, "to_local") else t


def _bytes(tensors: Any) -> int:
    return sum(int(_local(t).numel()) * _local(t).element_size() for t in tensors)


def _traced(dp: int, rank: int, targets: list[str] | str) -> dict[str, int]:
    from peft import LoraConfig, get_peft_model

    from app.trace import import_torch, step

    torch = import_torch()
    setup = trace_setup(parse_scenario({"model": compact(LLAMA), "dp": dp, "seq_len": 64, "stack": "hf-fsdp2"}))
    with step.fake_world(dp) as mesh:
        base = step.build(setup, lambda *_: None).to(torch.bfloat16)  # a checkpoint loaded in its own BF16
        model = get_peft_model(base, LoraConfig(r=rank, target_modules=targets))
        every = sum(p.numel() for p in model.parameters())
        trains = sum(p.numel() for p in model.parameters() if p.requires_grad)
        sharded = step.shard(model, setup, mesh, lambda *_: None)
        tokens = torch.randint(0, 1024, (1, 64))
        logits = sharded.model(input_ids=tokens).logits
        torch.nn.functional.cross_entropy(logits.view(-1, 1024).float(), tokens.view(-1)).backward()
        sharded.optimizer.step()
        params = list(sharded.model.parameters())
        states = [v for st in sharded.optimizer.state.values() for v in st.values() if v.dim() > 0]  # not `step`
        return {
            "params": every,
            "trainable": trains,
            "trained_fp32": _bytes(p for p in params if p.requires_grad and p.dtype == torch.float32),
            "frozen_bf16": _bytes(p for p in params if not p.requires_grad and p.dtype == torch.bfloat16),
            "other": _bytes(p for p in params if (p.dtype == torch.float32) != p.requires_grad),
            "gradients": _bytes(p.grad for p in params if p.grad is not None),
            "states": _bytes(states),
        }


# PEFT 0.21.0 reads transformers 5.23.0's deprecated is_gradient_checkpointing alias when it injects adapters
@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")
@pytest.mark.parametrize(("dp", "rank", "targets"), [(2, 8, ["q_proj", "v_proj"]), (4, 16, "all-linear")])
def test_lora_under_accelerate_holds_what_the_persistent_ledger_counts(
    dp: int, rank: int, targets: list[str] | str
) -> None:
    seen = _traced(dp, rank, targets)
    s = parse_scenario({"model": compact(LLAMA), "dp": dp, "seq_len": 64, "stack": "hf-fsdp2",
                        "params": seen["params"], "trainable_params": seen["trainable"]})  # fmt: skip
    assert (s.param_bytes, s.frozen_bytes, s.grad_bytes, s.master_bytes) == (4, 2, 4, 0)  # the stack's
    lines = {line.tensor_class: line for line in compute_ledger(s, schedule=False).stages[3].lines}
    params = lines["parameters"]
    assert seen["other"] == 0  # every trained parameter upcast to FP32, every frozen one left in BF16
    assert seen["trained_fp32"] == params.elements * params.width
    assert seen["frozen_bf16"] == params.frozen_elements * params.frozen_width
    assert seen["trained_fp32"] + seen["frozen_bf16"] == params.bytes
    assert seen["gradients"] == lines["gradients"].bytes == seen["trainable"] // dp * 4
    assert seen["states"] == lines["optimizer_states"].bytes == seen["trainable"] // dp * 2 * 4
    assert lines["master_weights"].bytes == 0
