"""A scenario as an FSDP2 snippet (``app.interop.fsdp2``): valid Python on the scenario's mesh, and notes for
what FSDP2 cannot say."""

from __future__ import annotations

from app.interop.fsdp2 import fsdp2_snippet
from app.ledger.scenario import parse_scenario


def test_the_fsdp2_snippet_reads_the_scenario() -> None:
    fsdp2_layout = {"param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "gather_bytes": 2, "reduce_bytes": 4}
    s = parse_scenario({"model": "llama-2-7b", **fsdp2_layout, "act_policy": "full", "prefetch": 2, "dp": 16})
    snippet = fsdp2_snippet(s)
    text = snippet.text
    assert "MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)" in text
    assert 'init_device_mesh("cuda", (16,))' in text
    assert "checkpoint(layer)" in text and "reshard_after_forward=True" in text
    assert "layers[i + 1 : i + 1 + 2]" in text
    assert "model.to(" not in text  # FP32 shards: the model stays in FP32
    compile(text, "fsdp2_snippet.py", "exec")  # valid Python
    assert snippet.notes == ()  # FSDP2's own layout: nothing it cannot say


def test_pipeline_and_expert_parallelism_are_notes() -> None:
    pp = parse_scenario({"model": "llama-2-7b", "pp": 4})
    assert any("torch.distributed.pipelining" in note for note in fsdp2_snippet(pp).notes)
    ep = parse_scenario({"model": "mixtral-8x7b-v0.1", "dp": 8, "ep": 8, "stage": 2})
    assert any(note.startswith("ep 8: ") for note in fsdp2_snippet(ep).notes)


def test_the_fsdp2_snippet_writes_hsdp_as_a_2d_mesh() -> None:
    """A shard group of 8 on D = 32: FSDP2's HSDP, a (replicate, shard) mesh of 32 ÷ 8 = 4 × 8 that every
    fully_shard takes; hpz has no FSDP2 equivalent (a note)."""
    s = parse_scenario({"model": "llama-2-7b", "dp": 32, "shard_group": 8})
    text = fsdp2_snippet(s).text
    assert 'init_device_mesh("cuda", (4, 8), mesh_dim_names=("replicate", "shard"))' in text
    assert text.count("fully_shard(") == text.count("mesh=mesh") == 2  # each layer (in the loop) and the root
    compile(text, "fsdp2_snippet.py", "exec")
    hpz = fsdp2_snippet(parse_scenario({"model": "llama-2-7b", "dp": 32, "hpz": 8}))
    assert 'init_device_mesh("cuda", (32,))' in hpz.text
    assert any(note.startswith("hpz 8: ") and "no FSDP2 equivalent" in note for note in hpz.notes)


def test_the_fsdp2_snippet_names_what_it_cannot_say() -> None:
    s = parse_scenario({"model": "llama-2-7b", "stage": 1})  # BF16 with an FP32 master
    said = " ".join(fsdp2_snippet(s).notes)
    assert "stage 1" in said and "master_bytes 4" in said and "model.to(torch.bfloat16)" in fsdp2_snippet(s).text
