"""The scenario in torchtitan's and the HF Trainer's own words, read back by their own code: torchtitan 0.3.0's
config classes parse the command line's flags with tyro (as its ConfigManager does after loading the registered
config, whose imports need its data-loading dependencies), and transformers 5.23.0's TrainingArguments builds
Accelerate's FSDP plugin arguments from the snippet."""

from __future__ import annotations

import dataclasses
import importlib.util
import shlex
from typing import Any

import pytest

from app.interop.hf_trainer import hf_trainer_snippet
from app.interop.torchtitan import torchtitan_snippet
from app.ledger.scenario import parse_scenario
from app.trace import titan_installed

RUN = {"model": "llama-2-7b", "dp": "16", "shard_group": "8", "micro_batch": "2", "seq_len": "8192"}


def _titan_config(argv: list[str]) -> Any:
    import tyro
    from torchtitan.components.loss import BaseLoss, ChunkedLossWrapper
    from torchtitan.components.optimizer import OptimizersContainer
    from torchtitan.config import ParallelismConfig, TrainingConfig
    from torchtitan.distributed.activation_checkpoint import ActivationCheckpointingConfig, SelectiveAC

    # the sections of torchtitan's Trainer.Config the command sets, with its defaults (made with the classes
    # themselves: tyro reads the annotations, which a class written here would leave as strings)
    job = dataclasses.make_dataclass("Job", [
        ("training", TrainingConfig, dataclasses.field(default_factory=TrainingConfig)),
        ("parallelism", ParallelismConfig, dataclasses.field(default_factory=ParallelismConfig)),
        ("optimizer", OptimizersContainer.Config, dataclasses.field(default_factory=OptimizersContainer.Config)),
        ("activation_checkpoint", ActivationCheckpointingConfig, dataclasses.field(default_factory=SelectiveAC.Config)),
        ("loss", BaseLoss.Config, dataclasses.field(default_factory=ChunkedLossWrapper.Config)),  # llama3's
    ])  # fmt: skip
    return tyro.cli(job, args=argv)


@pytest.mark.skipif(not titan_installed(), reason="torchtitan is not installed (scripts/setup)")
@pytest.mark.parametrize(("policy", "reshard", "ac_class", "rafp"), [
    ("op", "1", "SelectiveAC.Config", "default"),
    ("full", "0", "FullAC.Config", "never"),
])  # fmt: skip
def test_torchtitan_reads_the_command_line_back(policy: str, reshard: str, ac_class: str, rafp: str) -> None:
    s = parse_scenario({**RUN, "stack": "torchtitan", "act_policy": policy, "reshard_after_forward": reshard})
    argv = shlex.split(torchtitan_snippet(s).text.replace("\\\n", " "))
    assert argv[:7] == ["python", "-m", "torchtitan.train", "--module", "llama3", "--config", "llama3_8b"]
    job = _titan_config(argv[7:])
    assert type(job.activation_checkpoint).__qualname__ == ac_class
    assert job.parallelism.fsdp_reshard_after_forward == rafp
    assert (job.parallelism.data_parallel_shard_degree, job.parallelism.data_parallel_replicate_degree) == (8, 2)
    assert (job.training.local_batch_size, job.training.seq_len) == (2, 8192)
    assert job.optimizer.implementation == "fused"  # the stack's
    assert job.loss.num_chunks == 8  # the stack's chunked loss
    assert (job.training.dtype, job.training.mixed_precision_param, job.training.mixed_precision_reduce) == (
        "float32", "bfloat16", "float32")  # fmt: skip


def test_torchtitan_says_what_it_cannot_express() -> None:
    raw = {**RUN, "stack": "hf-fsdp2", "wrap": "root", "act_policy": "selective"}
    notes = torchtitan_snippet(parse_scenario(raw)).notes
    said = " | ".join(notes)
    for words in ("loss inside", "wrap root", "buffers none", "reduce_bytes 2", "act_policy selective"):
        assert words in said, words


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="the trace extra is not installed")
@pytest.mark.parametrize(("policy", "reshard"), [("none", "1"), ("full", "0")])
def test_transformers_builds_accelerates_fsdp2_plugin_from_the_arguments(policy: str, reshard: str) -> None:
    s = parse_scenario({**RUN, "stack": "hf-fsdp2", "act_policy": policy, "reshard_after_forward": reshard})
    text = hf_trainer_snippet(s).text
    namespace: dict[str, Any] = {}
    # use_cpu: this machine has no GPU, and TrainingArguments refuses bf16 without one
    exec(text.replace("TrainingArguments(\n", "TrainingArguments(\n    use_cpu=True,\n"), namespace)  # noqa: S102 (the snippet is our own output, run to check it)
    args = namespace["args"]
    assert (args.per_device_train_batch_size, args.bf16) == (2, True)
    plugin = args.fsdp_plugin_args
    assert plugin["fsdp_version"] == 2 and plugin["auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
    assert plugin["reshard_after_forward"] is (reshard == "1")
    assert plugin["activation_checkpointing"] is (policy == "full")


def test_the_hf_trainer_says_what_it_cannot_express() -> None:
    raw = {**RUN, "act_policy": "op", "reduce_bytes": "4", "gather_bytes": "2"}
    notes = " | ".join(hf_trainer_snippet(parse_scenario(raw)).notes)
    for words in ("loss outside", "wrap root", "act_policy op", "reduce_bytes 4", "shard_group / hpz"):
        assert words in notes, words


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="the trace extra is not installed")
def test_every_nth_layer_is_the_models_own_checkpointing_in_the_arguments() -> None:
    s = parse_scenario({**RUN, "stack": "hf-fsdp2", "act_policy": "full", "ac_every": "4"})
    namespace: dict[str, Any] = {}
    text = hf_trainer_snippet(s).text.replace("TrainingArguments(\n", "TrainingArguments(\n    use_cpu=True,\n")
    exec(text, namespace)  # noqa: S102 (the snippet is our own output, run to check it)
    args = namespace["args"]
    assert args.activation_checkpointing is True
    assert args.activation_checkpointing_kwargs == {"every_n_layers": 4}
    assert args.fsdp_plugin_args["activation_checkpointing"] is False  # the plugin's wraps every layer


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="the trace extra is not installed")
@pytest.mark.parametrize("sync", ["every", "last"])
def test_the_trainer_accumulates_and_syncs_as_the_scenario_says(sync: str) -> None:
    """transformers 5.23.0 reads gradient_accumulation_steps, and Accelerate's sync_each_batch from
    accelerator_config (the Trainer then runs no micro batch under no_sync); without it, the last only syncs."""
    s = parse_scenario({**RUN, "stack": "hf-fsdp2", "grad_accum": "4", "grad_sync": sync})
    namespace: dict[str, Any] = {}
    text = hf_trainer_snippet(s).text.replace("TrainingArguments(\n", "TrainingArguments(\n    use_cpu=True,\n")
    exec(text, namespace)  # noqa: S102 (the snippet is our own output, run to check it)
    args = namespace["args"]
    assert args.gradient_accumulation_steps == 4
    kwargs = args.accelerator_config.gradient_accumulation_kwargs or {}
    assert kwargs.get("sync_each_batch", False) is (sync == "every")


@pytest.mark.skipif(not titan_installed(), reason="torchtitan is not installed (scripts/setup)")
def test_torchtitan_accumulates_by_its_global_batch() -> None:
    s = parse_scenario({**RUN, "stack": "torchtitan", "grad_accum": "4"})
    argv = shlex.split(torchtitan_snippet(s).text.replace("\\\n", " "))
    job = _titan_config(argv[7:])
    # trainer.py: gradient_accumulation_steps = global ÷ (local × the data-parallel degree: 8 × 2 replicas)
    assert job.training.global_batch_size == 2 * 16 * 4
    assert job.training.global_batch_size // (job.training.local_batch_size * 16) == 4
    said = " | ".join(torchtitan_snippet(parse_scenario({**RUN, "stack": "torchtitan", "grad_accum": "4",
                                                         "grad_sync": "last", "loss": "outside"})).notes)  # fmt: skip
    assert "grad_sync last" in said


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="the trace extra is not installed")
@pytest.mark.parametrize(("save", "state_dict_type"), [("full-rank0", "FULL_STATE_DICT"),
                                                        ("sharded", "SHARDED_STATE_DICT")])  # fmt: skip
def test_the_trainer_saves_as_the_scenario_says(save: str, state_dict_type: str) -> None:
    s = parse_scenario({**RUN, "stack": "hf-fsdp2", "save_path": save})
    namespace: dict[str, Any] = {}
    text = hf_trainer_snippet(s).text.replace("TrainingArguments(\n", "TrainingArguments(\n    use_cpu=True,\n")
    exec(text, namespace)  # noqa: S102 (the snippet is our own output, run to check it)
    assert namespace["args"].fsdp_plugin_args["state_dict_type"] == state_dict_type


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="the trace extra is not installed")
@pytest.mark.parametrize(("load", "efficient"), [("rank0", True), ("every-rank", False), ("partitioned", False)])
def test_the_trainer_loads_as_the_scenario_says(load: str, efficient: bool) -> None:
    """transformers 5.23.0 hands fsdp_config's cpu_ram_efficient_loading to Accelerate's plugin (and to its own
    from_pretrained through FSDP_CPU_RAM_EFFICIENT_LOADING); partitioned it cannot express, and says so."""
    s = parse_scenario({**RUN, "stack": "hf-fsdp2", "load_path": load})
    namespace: dict[str, Any] = {}
    snippet = hf_trainer_snippet(s)
    text = snippet.text.replace("TrainingArguments(\n", "TrainingArguments(\n    use_cpu=True,\n")
    exec(text, namespace)  # noqa: S102 (the snippet is our own output, run to check it)
    assert namespace["args"].fsdp_plugin_args["cpu_ram_efficient_loading"] is efficient
    assert any(note.startswith("load_path partitioned") for note in snippet.notes) is (load == "partitioned")


@pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="the trace extra is not installed")
@pytest.mark.parametrize(("targets", "expected"), [("all-linear", "all-linear"), ("", None),
                                                   ("q_proj,o_proj", {"q_proj", "o_proj"})])  # fmt: skip
def test_the_trainer_snippet_carries_peft_s_lora_config(targets: str, expected: object) -> None:
    s = parse_scenario({**RUN, "stack": "hf-fsdp2", "lora_rank": "16", "lora_targets": targets})
    namespace: dict[str, Any] = {}
    text = hf_trainer_snippet(s).text.replace("TrainingArguments(\n", "TrainingArguments(\n    use_cpu=True,\n")
    exec(text, namespace)  # noqa: S102 (the snippet is our own output, run to check it)
    config = namespace["peft_config"]
    assert config.r == 16 and config.target_modules == expected
