"""Run in a process of its own by test_load_traced.py: save a small Llama checkpoint in BF16, load it with
transformers' own ``from_pretrained`` and hand it to Accelerate's own ``fsdp2_prepare_model`` (mixed precision
BF16, cpu_ram_efficient_loading off: every rank loads), under torch's profiler with ``profile_memory``. Prints, as
JSON, the CPU bytes live at their highest before the first ``fully_shard`` (here the CPU is also the device, so the
shards FSDP2 then makes would be the GPU's), the parameter count and the checkpoint files' sizes.

What stands in: a single-process gloo group, and an object carrying the four attributes of an ``Accelerator`` that
``fsdp2_prepare_model`` reads (Accelerate's FSDP plugin needs a GPU distributed type to be set by ``Accelerator``).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import types
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.fsdp as fsdp
from accelerate import PartialState
from accelerate.utils import FullyShardedDataParallelPlugin
from accelerate.utils.fsdp_utils import fsdp2_prepare_model
from torch.profiler import ProfilerActivity, profile, record_function
from transformers import AutoModelForCausalLM, LlamaConfig

MARK = "lab::fully_shard"


def main(config: dict[str, Any], shard_size: str) -> dict[str, object]:
    folder = tempfile.mkdtemp()
    dist.init_process_group("gloo", init_method=f"file://{folder}/rendezvous", rank=0, world_size=1)
    os.environ.setdefault("LOCAL_RANK", "0")
    PartialState(cpu=True)  # Accelerate's logging needs a state
    checkpoint = os.path.join(folder, "checkpoint")
    built: Any = AutoModelForCausalLM.from_config(LlamaConfig(**config))  # type: ignore[no-untyped-call]
    built.to(torch.bfloat16).save_pretrained(checkpoint, max_shard_size=shard_size)
    files = sorted(f for f in os.listdir(checkpoint) if f.endswith(".safetensors"))
    plugin = FullyShardedDataParallelPlugin(fsdp_version=2, cpu_ram_efficient_loading=False)
    plugin.set_mixed_precision("bf16")
    accelerator = types.SimpleNamespace(
        state=types.SimpleNamespace(fsdp_plugin=plugin), mixed_precision="bf16", is_main_process=True,
        torch_device_mesh=None, parallelism_config=None,
    )  # fmt: skip
    original = fsdp.fully_shard

    def marked(*args: Any, **kwargs: Any) -> Any:
        with record_function(MARK):
            return original(*args, **kwargs)

    fsdp.fully_shard = marked  # fsdp2_prepare_model imports it from torch.distributed.fsdp when called
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model = AutoModelForCausalLM.from_pretrained(checkpoint)
        params = sum(p.numel() for p in model.parameters())
        dtype = str(next(model.parameters()).dtype)
        buffers = sum(b.numel() * b.element_size() for b in model.buffers())
        fsdp2_prepare_model(accelerator, model)
    events = prof.profiler.kineto_results.events()
    first = min(e.start_ns() for e in events if e.name() == MARK)
    memory = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    live = peak = 0
    for at, change in memory:
        live += change
        if at < first:
            peak = max(peak, live)
    dist.destroy_process_group()
    return {
        "peak": peak,
        "params": params,
        "loaded_dtype": dtype,
        "buffers": buffers,
        "files": [os.path.getsize(os.path.join(checkpoint, f)) for f in files],
    }


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]), sys.argv[2])))
