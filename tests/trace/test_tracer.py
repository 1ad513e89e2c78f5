"""``zero3-lab trace``: the plain-torch models equal the lab's inventory, and a traced FSDP2 step's
steady state equals the lab's stage-3 persistent state with FSDP2's dim-0 padding.

The tests that run torch are skipped, with the reason, when the trace extra is not installed
(``pip install -e '.[trace]'``); CI installs it. The rest (the setup's refusals, the CLI without
torch, ``estimate`` never importing torch) run everywhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from app.cli import main
from app.ledger.models.architecture import Architecture
from app.ledger.models.inventory import inventory
from app.ledger.models.readers import architecture_from_config
from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.trace import INSTALL_HINT, torch_installed
from app.trace.setup import TraceSetupError, trace_setup
from tests.support.cli_run import ROOT, run_cli

needs_torch = pytest.mark.skipif(
    not torch_installed(), reason="the trace extra is not installed (pip install -e '.[trace]')"
)

FSDP2 = {"param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "gather_bytes": 2, "act_bytes": 2}
FSDP2_FLAGS = ("--param-bytes", "4", "--master-bytes", "0", "--grad-bytes", "4", "--gather-bytes", "2")
SMALL: dict[str, object] = {  # the brief's small config: hidden 64, 2 layers, vocabulary 128
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "vocab_size": 128,
}
SMALL_REF = compact(SMALL)

# Small configs of each traceable family, with the variants that change the inventory: GQA, biases,
# tied and untied heads, GPT-2's Conv1D and learned positions, GPT-NeoX's sequential residual.
CONFIGS: dict[str, dict[str, object]] = {
    "llama": SMALL,
    "llama-gqa-bias": {**SMALL, "num_key_value_heads": 2, "attention_bias": True, "mlp_bias": True},
    "llama-tied": {**SMALL, "tie_word_embeddings": True, "num_hidden_layers": 3},
    "mistral": {**SMALL, "model_type": "mistral", "num_key_value_heads": 1, "head_dim": 32},
    "qwen2-tied": {**SMALL, "model_type": "qwen2", "num_key_value_heads": 2, "tie_word_embeddings": True},
    "qwen2": {**SMALL, "model_type": "qwen2", "vocab_size": 130},
    "gpt2": {"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 128, "n_positions": 32},
    "gpt2-untied": {"model_type": "gpt2", "n_embd": 64, "n_layer": 1, "n_head": 4, "n_inner": 96,
                    "vocab_size": 130, "n_positions": 32, "tie_word_embeddings": False},
    "gpt_neox": {"model_type": "gpt_neox", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "intermediate_size": 256, "vocab_size": 128},
    "gpt_neox-sequential": {"model_type": "gpt_neox", "hidden_size": 64, "num_hidden_layers": 1,
                            "num_attention_heads": 2, "intermediate_size": 96, "vocab_size": 128,
                            "use_parallel_residual": False, "attention_bias": False},
}  # fmt: skip


def _estimate_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["estimate", "--format", "json", *args]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=300)  # a trace builds and runs a model


# --------------------------------------------------------------------------- no torch needed


def test_estimate_never_imports_torch() -> None:
    code = (
        "import sys\nfrom app.cli import main\n"
        "assert main(['estimate', '--format', 'json']) == 0\n"
        "assert 'torch' not in sys.modules, 'estimate imported torch'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_trace_without_torch_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("app.cli.trace.torch_installed", lambda: False)
    assert main(["trace", "--model", "llama-2-7b"]) == 2
    err = capsys.readouterr().err
    assert INSTALL_HINT in err
    assert "pip install -e '.[trace]'" in err


def test_the_seeds_layout_is_refused_with_the_fsdp2_flags() -> None:
    with pytest.raises(TraceSetupError) as info:
        trace_setup(parse_scenario({"model": "llama-2-7b"}))
    text = str(info.value)
    assert "--master-bytes 4: FSDP2 keeps no separate master copy" in text
    assert "--master-bytes 0 --grad-bytes 4" in text


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ({}, "trace needs a model"),
        ({"model": "llama-2-7b", **FSDP2, "grad_bytes": 2}, "--grad-bytes 2: FSDP2's sharded gradients"),
        ({"model": "llama-2-7b", **FSDP2, "act_bytes": 4}, "--act-bytes 4: the forward computes"),
        (
            {"model": "llama-2-7b", **FSDP2, "act_policy": "selective"},
            "--act-policy selective: not traceable with --stack plain-fsdp2",
        ),
        ({"model": "llama-2-7b", **FSDP2, "opt_states": 3}, "--opt-states 3"),
        ({"model": "llama-2-7b", **FSDP2, "gather_bytes": 1}, "--gather-bytes 1"),
        ({"model": "llama-2-7b", **FSDP2, "tp": 2}, "one data-parallel mesh"),
        ({"model": "llama-2-7b", **FSDP2, "cp": 2}, "ring attention does not run on CPU"),
        ({"model": "llama-2-7b", **FSDP2, "lora_rank": 8}, "LoRA and frozen modules are traced on transformers'"),
        ({"model": "llama-2-7b", **FSDP2, "trainable_params": 1_000}, "--trainable-params typed"),
        (
            {"model": "llama-3.1-8b", **FSDP2, "stack": "hf-fsdp2", "lora_rank": 8, "base_quant": "nf4"},
            "not fake tensors",
        ),
    ],
)
def test_untraceable_scenarios_name_their_reason(raw: dict[str, object], needle: str) -> None:
    with pytest.raises(TraceSetupError, match=needle.replace("(", r"\(")):
        trace_setup(parse_scenario(raw))


def test_the_cli_exits_2_naming_each_problem(capsys: pytest.CaptureFixture[str]) -> None:
    if not torch_installed():
        pytest.skip("without torch the CLI stops at the install hint (tested above)")
    assert main(["trace", "--model", "mixtral-8x7b-v0.1", "--master-bytes", "0", "--act-policy", "selective"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert any("--opt-bytes 4: the optimizer's states take the parameters' dtype" in line for line in err)
    assert any("--act-policy selective" in line for line in err)
    assert all(line.startswith("zero3-lab: error: trace: ") for line in err)


def test_a_bad_flag_is_the_estimate_error(capsys: pytest.CaptureFixture[str]) -> None:
    if not torch_installed():
        pytest.skip("without torch the CLI stops at the install hint")
    assert main(["trace", "--model", "llama-2-7b", "--dp", "0"]) == 2
    assert "--dp: 0 is out of range" in capsys.readouterr().err


# --------------------------------------------------------------------------- the models


def _arch(name: str) -> Architecture:
    return architecture_from_config(CONFIGS[name])


@pytest.mark.trace
@needs_torch
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_model_is_the_inventory(name: str) -> None:
    from app.trace import import_torch

    import_torch()
    from torch._subclasses.fake_tensor import FakeTensorMode

    from app.trace.models import build_model, parameter_inventory

    arch = _arch(name)
    with FakeTensorMode():
        built = parameter_inventory(build_model(arch))
    expected = [(t.name, t.shape) for t in inventory(arch).tensors()]
    if arch.experts:  # the inventory lists all experts' w1, then w2, then w3; the model expert by expert
        built, expected = sorted(built), sorted(expected)
    assert built == expected  # names, shapes and order (FSDP2 shards exactly these tensors on dim 0)
    assert sum(_numel(shape) for _, shape in built) == inventory(arch).params


def _numel(shape: tuple[int, ...]) -> int:
    out = 1
    for dim in shape:
        out *= dim
    return out


# --------------------------------------------------------------------------- traces


@pytest.fixture(scope="module")
def traces() -> dict[tuple[str, ...], Any]:
    """Trace results by (model, extra key=value ...), each traced once per module."""
    return {}


def _trace(cache: dict[tuple[str, ...], Any], model: str, dp: int, **extra: Any) -> Any:
    from app.trace import import_torch

    import_torch()
    from app.trace.tracer import run_trace

    key = (model, str(dp), *(f"{k}={v}" for k, v in sorted(extra.items())))
    if key not in cache:
        s = parse_scenario({"model": model, "dp": dp, "seq_len": 16, "micro_batch": 1, **FSDP2, **extra})
        cache[key] = run_trace(trace_setup(s))
    return cache[key]


def _padded(capsys: pytest.CaptureFixture[str], model: str, dp: int) -> tuple[int, int]:
    """``estimate``'s stage-3 persistent total and its FSDP2-padded figure, from the JSON receipt."""
    data = _estimate_json(capsys, "--model", model, "--dp", str(dp), "--seq-len", "16", *FSDP2_FLAGS)
    return data["stages"][3]["persistent"]["total"], data["fsdp2"]["stage3_padded_bytes"]["total"]


def _at(result: Any, label: str) -> dict[str, int]:
    """The parts resident at the instant ``label`` of a trace."""
    parts: dict[str, int] = next(i.parts for i in result.timeline if i.label == label)
    return parts


def _model_state(result: Any) -> int:
    return int(result.steady["params"] + result.steady["grads"] + result.steady["optimizer_states"]
               - result.step_counter_bytes)  # fmt: skip


@pytest.mark.trace
@needs_torch
@pytest.mark.parametrize(
    ("config", "dp"),
    [("llama", 4), ("qwen2", 3), ("gpt2-untied", 4), ("gpt_neox", 8), ("llama-gqa-bias", 5)],
)
def test_the_steady_state_is_the_padded_stage3_state(
    traces: dict[tuple[str, ...], Any], capsys: pytest.CaptureFixture[str], config: str, dp: int
) -> None:
    model = compact(CONFIGS[config])
    result = _trace(traces, model, dp)
    lower, padded = _padded(capsys, model, dp)
    assert _model_state(result) == padded
    assert padded >= lower
    # AdamW's step counters are one FP32 0-d tensor per parameter tensor; the rest of the steady state is
    # the inputs (two int64 [b, s] tensors) and the rotary tables' buffers
    assert result.step_counter_bytes == 4 * result.tensors
    assert result.steady["inputs"] == 2 * 8 * 16
    rest = result.step_counter_bytes + result.steady["inputs"] + result.steady["buffers"]
    assert result.steady["total"] == _model_state(result) + rest
    for name in ("unsharded_params", "all_gather", "unsharded_grads", "reduce_scatter", "activations", "temps"):
        assert result.steady[name] == 0, name


@pytest.mark.trace
@needs_torch
def test_padding_is_what_makes_the_difference(
    traces: dict[tuple[str, ...], Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """vocabulary 130 over D = 3: dim 0 of the embedding and the head pads, so the trace exceeds ⌈N ÷ D⌉."""
    model = compact(CONFIGS["qwen2"])
    lower, padded = _padded(capsys, model, 3)
    assert padded > lower
    assert _model_state(_trace(traces, model, 3)) == padded


@pytest.mark.trace
@needs_torch
def test_the_small_config_traces_and_peaks_in_backward(traces: dict[tuple[str, ...], Any]) -> None:
    result = _trace(traces, SMALL_REF, 4)
    parts = {k: v for k, v in result.peak.items() if k != "total"}
    assert result.peak["total"] == sum(parts.values())
    assert result.peak_at.phase == "backward"
    assert result.peak["total"] == max(i.peak_since_previous for i in result.timeline)
    assert all(i.total <= result.peak["total"] for i in result.timeline)
    labels = [i.label for i in result.timeline]
    for expected in ("forward root: unsharded", "forward layers.1: done", "end of forward (logits)",
                     "loss computed", "backward layers.0: reduce-scattered", "end of backward",
                     "after the optimizer step (steady state)"):  # fmt: skip
        assert expected in labels
    assert result.timeline[-1].total == result.steady["total"]


@pytest.mark.trace
@needs_torch
def test_recompute_and_resharding_move_the_peak(traces: dict[tuple[str, ...], Any]) -> None:
    base = _trace(traces, SMALL_REF, 4)
    full = _trace(traces, SMALL_REF, 4, act_policy="full")
    kept = _trace(traces, SMALL_REF, 4, reshard_after_forward=0)
    bf16_reduce = _trace(traces, SMALL_REF, 4, reduce_bytes=2)
    assert full.steady == base.steady == kept.steady == bf16_reduce.steady
    # without resharding after forward, every layer's unsharded bf16 parameters stay until its backward
    layer = inventory(architecture_from_config(SMALL)).units[1].params
    assert (
        _at(kept, "end of forward (logits)")["unsharded_params"]
        - _at(base, "end of forward (logits)")["unsharded_params"]
        == 2 * layer * 2
    )
    # ... and backward all-gathers nothing (which can make the peak lower: no all-gather output beside its copy)
    assert all(i.parts["all_gather"] == 0 for i in kept.timeline if i.phase == "backward")
    assert any(i.parts["all_gather"] > 0 for i in base.timeline if i.phase == "backward")
    # the reduce-scatter input is one layer's gradients in the reduce dtype
    assert _at(base, "backward layers.1: reduce-scattered")["reduce_scatter"] == layer * 4
    assert _at(bf16_reduce, "backward layers.1: reduce-scattered")["reduce_scatter"] == layer * 2
    forward_peak = [max(i.peak_since_previous for i in r.timeline if i.phase == "forward") for r in (base, full)]
    assert forward_peak[1] < forward_peak[0]  # full recomputation keeps only each layer's input through the forward


@pytest.mark.trace
@needs_torch
def test_trace_json_from_the_command_line() -> None:
    proc = _run("trace", "--model", SMALL_REF, "--dp", "4", "--seq-len", "16", *FSDP2_FLAGS, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    peak = data["peak"]
    assert peak["total"] == sum(v for k, v in peak.items() if k != "total")
    assert data["comparison"]["steady_model_state_equals_padded"] is True
    assert data["trace"]["world_size"] == 4
    assert data["trace"]["dtypes"] == {"parameters": "float32", "param_dtype": "bfloat16",
                                       "reduce_dtype": "float32", "logits": "float32"}  # fmt: skip
    assert data["peak_at"]["phase"] == "backward"
    assert data["timeline"][-1]["total"] == data["steady_state"]["total"]
    assert "iteration 2/2" in proc.stderr and "building layers 2/2" in proc.stderr
    assert "Warning" not in proc.stderr
    table = _run("trace", "--model", SMALL_REF, "--dp", "4", "--seq-len", "16", *FSDP2_FLAGS)
    assert table.returncode == 0, table.stderr
    assert f"Peak of iteration 2: {peak['total']:,} B" in table.stdout
    assert "(equal)" in table.stdout


# --------------------------------------------------------------------------- the schedule-aware peak against traces


def test_the_trace_reads_the_scenarios_reduce_width_and_resharding() -> None:
    """``--reduce-bytes`` and ``--reshard-after-forward`` are scenario fields; the trace takes them from there."""
    s = parse_scenario({"model": "llama-2-7b", **FSDP2, "reduce_bytes": 2, "reshard_after_forward": 0})
    setup = trace_setup(s)
    assert (setup.reduce_bytes, setup.reshard_after_forward) == (2, False)
    default = trace_setup(parse_scenario({"model": "llama-2-7b", **FSDP2}))
    assert (default.reduce_bytes, default.reshard_after_forward) == (4, True)  # the gradient width; resharded


@pytest.mark.trace
@needs_torch
@pytest.mark.parametrize(
    ("config", "dp", "extra"),
    [
        ("llama", 4, {}),
        ("qwen2-tied", 4, {"micro_batch": 2, "seq_len": 32}),
        ("gpt2", 4, {"micro_batch": 2, "seq_len": 32}),  # eager attention, dropout masks of 1 byte
        ("gpt_neox", 4, {"micro_batch": 2, "seq_len": 32}),  # no dropout, one LayerNorm input per layer
    ],
    ids=["llama", "qwen2-tied-b2", "gpt2-b2", "gpt_neox-b2"],
)
def test_the_schedule_aware_peak_is_within_5_percent_of_the_trace(
    traces: dict[tuple[str, ...], Any], config: str, dp: int, extra: dict[str, Any]
) -> None:
    """The lab's stage-3 peak (RMSNorm unfused, as the trace runs it) against FSDPMemTracker's, and the
    optimizer step's instant (model state, gradients and AdamW's temporaries) just under the trace's."""
    from app.ledger.estimate import estimate
    from app.trace.report import instants

    model = compact(CONFIGS[config])
    result = _trace(traces, model, dp, norms="unfused", **extra)
    peak = estimate(result.setup.scenario).ledger.stages[3].peak
    traced = result.peak["total"]
    assert peak.schedule is not None
    assert abs(peak.total - traced) * 20 <= traced, (peak.total, traced, peak.instant)
    # the optimizer step: every gradient, AdamW's temporaries; the trace adds its inputs, buffers and counters
    step = next(i for i in instants(result) if i["key"] == "optimizer-step")
    assert 0 <= step["traced"] - step["modelled"] <= step["traced"] // 20
