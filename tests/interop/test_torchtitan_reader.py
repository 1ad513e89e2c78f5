"""A torchtitan 0.3.0 command line read into a scenario: what it sets, what it names back as ignored, what it
refuses as torchtitan would (its parser takes no parent flag after the subcommand; its reductions are float32)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.interop.torchtitan import torchtitan_snippet
from app.interop.torchtitan_reader import MAX_COMMAND_CHARS, TorchtitanCommandError, read_torchtitan_command
from app.ledger.scenario import parse_scenario
from app.web.app import create_app

READ = ("stack", "dp", "shard_group", "micro_batch", "seq_len", "act_policy", "reshard_after_forward", "param_bytes",
        "grad_bytes", "opt_bytes", "master_bytes", "gather_bytes", "reduce_bytes", "tp", "loss",
        "loss_chunks", "grad_accum", "cp")  # fmt: skip


@pytest.mark.parametrize("raw", [
    {"dp": "16", "shard_group": "8", "act_policy": "full", "micro_batch": "2", "reshard_after_forward": "0"},
    {"dp": "64", "seq_len": "8192", "act_policy": "none", "tp": "2"},
    {"dp": "8"},
    {"dp": "8", "seq_len": "2048", "loss_chunks": "16"},
    {"dp": "16", "shard_group": "8", "micro_batch": "2", "grad_accum": "4"},  # global batch 2 × 16 × 4
    {"dp": "8", "seq_len": "8192", "cp": "4", "grad_accum": "2"},  # cp shares its data-parallel rank's batch
])  # fmt: skip
def test_what_the_writer_writes_the_reader_reads_back(raw: dict[str, str]) -> None:
    s = parse_scenario({"model": "llama-2-7b", "stack": "torchtitan", **raw})
    fields, _ = read_torchtitan_command(torchtitan_snippet(s).text)
    back = parse_scenario({"model": "llama-2-7b", **fields})
    assert {k: getattr(back, k) for k in READ} == {k: getattr(s, k) for k in READ}


def test_every_flag_is_named_back() -> None:
    command = ("torchrun --nproc-per-node 8 -m torchtitan.train --module llama3 --config llama3_8b "
               "--optimizer.param-groups.0.optimizer-kwargs.lr=3e-4 --training.seq_len 2048 --compile.enable "
               "activation_checkpoint:none")  # fmt: skip
    fields, lines = read_torchtitan_command(command)
    assert [(x.flag, x.written, x.status) for x in lines] == [
        ("--module", "llama3", "sets"),
        ("--config", "llama3_8b", "ignored"),
        ("--optimizer.param-groups.0.optimizer-kwargs.lr", "3e-4", "ignored"),
        ("--training.seq-len", "2048", "sets"),
        ("--compile.enable", "true", "ignored"),
        ("activation-checkpoint", "none", "sets"),
    ]
    assert fields == {"stack": "torchtitan", "seq_len": 2048, "act_policy": "none"}


@pytest.mark.parametrize(("command", "flag", "says"), [
    ("--training.mixed-precision-reduce bfloat16", "--training.mixed-precision-reduce", "only float32"),
    ("activation-checkpoint:full --training.seq-len 8", "--training.seq-len", "after the subcommand"),
    ("--training.local-batch-size two", "--training.local-batch-size", "not a positive integer"),
    ("activation-checkpoint:memory-budget", "activation-checkpoint:memory-budget", "not modelled"),
    ("--parallelism.data-parallel-replicate-degree 2", "--parallelism.data-parallel-replicate-degree", "needs"),
    ("--module deepseek_v3", "--module", "llama3 only"),
    ("--training.global-batch-size 64", "--training.global-batch-size", "needs --training.local-batch-size"),
    ("--training.global-batch-size 60 --training.local-batch-size 2 --parallelism.data-parallel-shard-degree 8",
     "--training.global-batch-size", "not a multiple of local batch 2 × data-parallel degree 8"),
    ("--training.seq-len '8192", "command", "not a shell command line"),
    ("x" * (MAX_COMMAND_CHARS + 1), "command", "at most"),
])  # fmt: skip
def test_what_torchtitan_would_refuse_is_refused_naming_the_flag(command: str, flag: str, says: str) -> None:
    with pytest.raises(TorchtitanCommandError) as caught:
        read_torchtitan_command(command)
    assert caught.value.flag == flag and says in caught.value.message


def test_the_api_answers_the_scenario_and_names_a_refused_flag_in_its_loc() -> None:
    with TestClient(create_app(), raise_server_exceptions=False) as client:
        ok = client.post("/api/torchtitan", json={"command": "--training.local-batch-size 2 activation-checkpoint:"
                                                  "full", "scenario": {"model": "llama-2-7b"}})  # fmt: skip
        assert ok.status_code == 200
        assert ok.json()["scenario"]["act_policy"] == "full" and ok.json()["scenario"]["micro_batch"] == 2
        bad = client.post("/api/torchtitan", json={"command": "--training.mixed-precision-reduce bfloat16"})
        assert bad.status_code == 422
        assert bad.json()["detail"][0]["loc"] == ["body", "command", "--training.mixed-precision-reduce"]


def test_the_cli_reads_a_command_file_and_exits_2_on_a_refused_flag(tmp_path: Path) -> None:
    good, bad = tmp_path / "run.sh", tmp_path / "bad.sh"
    good.write_text("python -m torchtitan.train --module llama3 --config llama3_8b --training.local-batch-size 4\n")
    bad.write_text("python -m torchtitan.train --training.dtype float16\n")
    cli = [sys.executable, "-m", "app.cli", "estimate", "--model", "llama-2-7b", "--link", "--torchtitan-command"]
    run = subprocess.run([*cli, str(good)], capture_output=True, text=True, check=False)
    assert run.returncode == 0 and "micro_batch=4" in run.stdout and "stack=torchtitan" in run.stdout
    assert "--config llama3_8b: ignored" in run.stderr
    refused = subprocess.run([*cli, str(bad)], capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and "--training.dtype: 'float16'" in refused.stderr


def test_torchtitans_default_global_batch_is_one_micro_batch() -> None:
    """trainer.py: a global batch below 0 (its default, -1) is the local batch × the data-parallel degree."""
    fields, lines = read_torchtitan_command("--training.global-batch-size -1 --training.local-batch-size 2")
    assert fields["grad_accum"] == 1 and lines[0].status == "sets"


def test_context_parallelism_is_written_as_torchtitans_flag() -> None:
    """torchtitan 0.3.0 config/configs.py: Parallelism.context_parallel_degree; the shard degree stays D (torchtitan
    folds cp into FSDP's mesh itself: dp_shard × cp)."""
    s = parse_scenario({"model": "llama-2-7b", "stack": "torchtitan", "dp": "8", "seq_len": "8192", "cp": "4"})
    text = torchtitan_snippet(s).text
    assert "--parallelism.context-parallel-degree 4" in text
    assert "--parallelism.data-parallel-shard-degree 8" in text
