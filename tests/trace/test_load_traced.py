"""``load_path every-rank`` against the code users run: transformers 5.23.0's ``from_pretrained`` of a BF16
checkpoint, then Accelerate 1.15.0's ``fsdp2_prepare_model`` with mixed precision (its FP32 upcast), traced with
torch's profiler (``tests/trace/load_probe.py``, in a process of its own: it opens a process group). One rank's host
bytes at their highest before FSDP2 shards are the host ledger's per-rank load: the checkpoint file as read beside
the FP32 upcast, N × (2 + 4) B, plus what the lab does not count (the file's header, the rotary inv_freq buffers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.ledger.state.host import host_ledger
from app.trace import torch_installed

pytestmark = [
    pytest.mark.trace,
    pytest.mark.skipif(not torch_installed(), reason="the trace extra is not installed (pip install -e '.[trace]')"),
]

LLAMA = {"hidden_size": 256, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
         "intermediate_size": 688, "vocab_size": 1024}  # fmt: skip
PROBE = Path(__file__).with_name("load_probe.py")


def _probe(shard_size: str, tied: bool) -> dict[str, int | str | list[int]]:
    config = {**LLAMA, "tie_word_embeddings": tied}
    done = subprocess.run([sys.executable, str(PROBE), json.dumps(config), shard_size], capture_output=True,
                          text=True, timeout=300, check=True)  # fmt: skip
    result: dict[str, int | str | list[int]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _lab_per_rank(tied: bool) -> tuple[int, int]:
    """(N, the host ledger's load per rank) for the same model under the hf-fsdp2 stack, one rank on its node."""
    s = parse_scenario({"model": compact({"model_type": "llama", **LLAMA, "tie_word_embeddings": tied}),
                        "stack": "hf-fsdp2", "dp": 1, "seq_len": 64})  # fmt: skip
    assert s.load_path == "every-rank" and s.param_bytes == 4  # the stack's: Accelerate's default and its upcast
    return s.params, host_ledger(s).stages[3].load_peak


@pytest.mark.parametrize("tied", [False, True])
def test_one_checkpoint_file_and_its_upcast_are_the_host_ledgers_load(tied: bool) -> None:
    seen = _probe("50GB", tied)  # transformers 5.23.0's default max_shard_size: one file
    params, lab = _lab_per_rank(tied)
    files = seen["files"]
    assert seen["params"] == params and seen["loaded_dtype"] == "torch.bfloat16" and isinstance(files, list)
    assert len(files) == 1
    header = files[0] - 2 * params  # the safetensors header, which the lab does not count
    assert lab == params * (2 + 4)
    assert seen["peak"] == lab + header + int(seen["buffers"])  # type: ignore[arg-type]


def test_a_checkpoint_in_several_files_stays_under_the_host_ledgers_load() -> None:
    """Each file's buffer is freed once its last tensor is upcast: the peak is lower, and the lab's a bound."""
    seen = _probe("1MB", False)
    params, lab = _lab_per_rank(False)
    files = seen["files"]
    assert isinstance(files, list) and len(files) > 2
    assert 4 * params < int(seen["peak"]) < lab  # type: ignore[arg-type]
