"""A DeepSpeed config read into a scenario (``app.interop.deepspeed.reader``), every key accounted for.

The five configs in ``tests/data/deepspeed/`` are public training recipes, written out by hand from
their sources (``tests/data/deepspeed/README.md``). Each test's docstring computes what the lab
must make of it; the figures in the asserts are those hand computations. hpZ and MiCS are
``test_partitions.py``'s; the way back out, ``test_writer.py``'s.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.interop.deepspeed.reader import import_deepspeed
from app.interop.deepspeed.report import DeepSpeedConfigError
from app.ledger.estimate import estimate
from app.ledger.ledger import compute_ledger
from app.ledger.scenario import ScenarioError
from app.ledger.scenario.links import canonical_query
from tests.interop.deepspeed.configs import assert_every_key_accounted, config, lines_of

# --------------------------------------------------------------------------- five public recipes


def test_llava_zero3_on_vicuna_13b() -> None:
    """LLaVA-v1.5-13B's ``scripts/zero3.json`` (fine-tuning on Vicuna-13B, a Llama-2-13B shape:
    hidden 5,120, 40 layers), on D = 8.

    * stage 3; ``reduce_bucket_size`` "auto" = hidden² = 5,120² = 26,214,400 elements; stage 3
      allocates one flat bucket of the 16-bit gradient type: 26,214,400 × 2 B = 52,428,800 B.
    * ``stage3_prefetch_bucket_size`` "auto" = ⌊0.9 × 26,214,400⌋ = 23,592,960 elements, less than
      one decoder layer (U = 317,204,480 parameters): P = 0 whole units.
    * ``stage3_param_persistence_threshold`` "auto" = 10 × 5,120 = 51,200 elements: the 2 × 40 + 1
      = 81 RMSNorm weights of 5,120 elements (414,720 in all) stay whole; not modelled, stated:
      414,720 × 2 B − ⌈829,440 ÷ 8⌉ = 829,440 − 103,680 = 725,760 B.
    * fp16/bf16, the micro batch and gradient accumulation are "auto" from the Trainer's
      arguments: unresolved, the lab's own inputs used (16-bit widths, micro batch 1).
    * The ledger: stage-3 persistent state ⌈13,015,864,320 ÷ 8⌉ = 1,626,983,040 elements ×
      (2 + 2 + 4 + 2 × 4) B = 26,031,728,640 B; the bucket is resident at every stage's peak, which is
      52,428,800 B above the same scenario without it.
    """
    cfg = config("llava-zero3")
    result = import_deepspeed(cfg, {"model": "llama-2-13b", "dp": 8})
    s = result.scenario
    assert (s.stage, s.bucket_bytes, s.prefetch, s.unit_params) == (3, 52_428_800, 0, 317_204_480)
    assert (s.param_bytes, s.grad_bytes, s.master_bytes, s.micro_batch) == (2, 2, 4, 1)
    persistence = lines_of(result, "zero_optimization.stage3_param_persistence_threshold")
    assert len(persistence) == 1
    assert "81 tensors under 51,200 elements (414,720 elements)" in persistence[0]
    assert "= 725,760 B more" in persistence[0]
    assert [u.split(":")[0] for u in result.unresolved] == [
        "fp16.enabled / bf16.enabled", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    ]  # fmt: skip
    assert_every_key_accounted(cfg, result)
    assert canonical_query(s) == "bucket_bytes=52428800&model=llama-2-13b"
    with_bucket = estimate(s, with_kill_lists=False).ledger.stages
    without = estimate(s.with_(bucket_bytes=0), with_kill_lists=False).ledger.stages
    assert with_bucket[3].persistent == 26_031_728_640
    assert [a.peak.total - b.peak.total for a, b in zip(with_bucket, without, strict=True)] == [52_428_800] * 4


def test_llava_zero2_double_buffers_the_gradient_bucket() -> None:
    """LLaVA-v1.5-13B's ``scripts/zero2.json`` (projector pre-training), on D = 8.

    * stage 2 with ``overlap_comm`` true and ``contiguous_gradients`` true: DeepSpeed allocates two
      flat buckets of ``reduce_bucket_size`` elements ("auto" = 5,120² = 26,214,400) of the 16-bit
      gradient type: 2 × 26,214,400 × 2 B = 104,857,600 B.
    * ``sub_group_size`` is a stage-3 setting: reported as not read.
    """
    cfg = config("llava-zero2")
    result = import_deepspeed(cfg, {"model": "llama-2-13b"})
    assert (result.scenario.stage, result.scenario.bucket_bytes) == (2, 104_857_600)
    assert lines_of(result, "zero_optimization.sub_group_size") == ["ignored: read only at stage 3 (this is stage 2)"]
    assert_every_key_accounted(cfg, result)


def test_axolotl_zero3_cpu_offload_on_mixtral() -> None:
    """axolotl's ``zero3_bf16_cpuoffload_all.json`` (its Mixtral examples), on Mixtral-8x7B (hidden 4,096,
    46,702,792,704 parameters), D = 8.

    * bf16 on at stage 3: 16-bit parameters and gradients (2 B), an FP32 master (4 B).
    * ``reduce_bucket_size`` "auto" = 4,096² = 16,777,216 elements × 2 B = 33,554,432 B.
    * ``max_live_parameters`` (the unprefixed spelling DeepSpeed also takes) = 0: fewer than the
      ledger's (1 + P) × U gathered parameters, so DeepSpeed releases sooner: said, as an over-count.
    * Both offloads to the CPU: nothing of the model state stays on the device at stage 3; the host
      ledger holds, per rank, P = ⌈46,702,792,704 ÷ 8⌉ = 5,837,849,088 elements × (4 master + 8 Adam +
      4 FP32 gradients + 2 pinned gradient partition + 2 parameters) = 116,756,981,760 B, and per node of
      8 ranks 934,055,854,080 B, within the default 2 TB.
    """
    cfg = config("axolotl-zero3-bf16-cpuoffload-all")
    result = import_deepspeed(cfg, {"model": "mixtral-8x7b-v0.1"})
    s = result.scenario
    assert (s.param_bytes, s.grad_bytes, s.master_bytes, s.bucket_bytes, s.stage) == (2, 2, 4, 33_554_432, 3)
    assert (s.offload_optimizer, s.offload_param) == ("cpu", "cpu")
    live = lines_of(result, "zero_optimization.stage3_max_live_parameters")
    assert len(live) == 1
    assert live[0].startswith("checked: 0 elements") and "over-count" in live[0]
    assert lines_of(result, "zero_optimization.offload_param.device")[0].startswith("sets: offload_param = cpu")
    ledger = compute_ledger(s)
    assert ledger.stages[3].persistent == 0
    host = ledger.host.stages[3]
    assert s.params == 46_702_792_704
    assert (host.per_rank, host.per_node, host.fits) == (116_756_981_760, 934_055_854_080, True)
    assert_every_key_accounted(cfg, result)


def test_deepspeed_chat_step1_batch_sizes() -> None:
    """DeepSpeed-Chat's ``get_train_ds_config(offload=False, dtype="fp16", stage=3)`` (step 1, Llama-2-7B).

    * train_batch_size 32 = micro batch 4 × gradient accumulation × D: on D = 8 DeepSpeed resolves
      the accumulation to 32 ÷ 4 ÷ 8 = 1; on D = 4 to 2; on D = 16 to ⌊32 ÷ 4 ÷ 16⌋ = 0, which it
      refuses (32 ≠ 4 × 0 × 16).
    * no ``reduce_bucket_size``: DeepSpeed's default 500,000,000 elements, one flat bucket at stage 3:
      500,000,000 × 2 B = 1,000,000,000 B.
    * ``stage3_prefetch_bucket_size`` 3e7 < U (202,383,360): P = 0. Persistence threshold 1e4: the
      2 × 32 + 1 = 65 RMSNorm weights of 4,096 elements stay whole (266,240 elements).
    * ``stage3_max_live_parameters`` 3e7 < (1 + 0) × 202,383,360: DeepSpeed releases sooner.
    """
    cfg = config("deepspeed-chat-step1-zero3")
    result = import_deepspeed(cfg, {"model": "llama-2-7b", "dp": 8})
    s = result.scenario
    assert (s.micro_batch, s.bucket_bytes, s.prefetch, s.stage) == (4, 1_000_000_000, 0, 3)
    assert lines_of(result, "gradient_accumulation_steps") == ["sets: grad_accum = 1: micro batches per optimizer step"]
    on_4 = import_deepspeed(cfg, {"model": "llama-2-7b", "dp": 4})
    assert (on_4.scenario.grad_accum, on_4.scenario.grad_sync) == (2, "every")  # ZeRO-3 reduces each micro batch
    assert lines_of(on_4, "gradient_accumulation_steps")[1].startswith("sets: grad_sync = every: stages 2–3")
    with pytest.raises(DeepSpeedConfigError) as refused:
        import_deepspeed(cfg, {"model": "llama-2-7b", "dp": 16})
    assert refused.value.key == "train_batch_size"
    assert "4 × 0 × 16 = 0" in refused.value.message
    assert (
        "65 tensors under 10,000 elements (266,240 elements)"
        in lines_of(result, "zero_optimization.stage3_param_persistence_threshold")[0]
    )
    assert "over-count" in lines_of(result, "zero_optimization.stage3_max_live_parameters")[0]
    assert_every_key_accounted(cfg, result)


def test_bloom_176b_bf16_at_stage_0() -> None:
    """BLOOM-176B's ``ds_config`` (tr11-176B-ml: bf16, ZeRO stage 0 under Megatron-DeepSpeed, TP 4 × PP 12
    on 384 GPUs, so D = 384 ÷ 48 = 8), with the micro batch 2 and global batch 2,048 its script writes.

    * bf16 without ZeRO: since DeepSpeed 0.17.6 ``get_data_types`` keeps gradients in the model's type
      when ``grad_accum_dtype`` is unset (the FP32 rule for non-ZeRO bf16 was removed): grad_bytes 2,
      parameters 2 B, an FP32 master 4 B.
    * gradient accumulation = 2,048 ÷ 2 ÷ 8 = 128 (resolved): at stage 0 DeepSpeed all-reduces at the
      accumulation boundary only (grad_sync last), the gradients whole either way.
    * stage 0: no ZeRO buckets.
    """
    cfg = config("bloom-176b-tr11")
    result = import_deepspeed(cfg, {"dp": 8})
    s = result.scenario
    assert (s.stage, s.param_bytes, s.grad_bytes, s.master_bytes, s.micro_batch, s.bucket_bytes) == (
        0, 2, 2, 4, 2, 0,
    )  # fmt: skip
    assert (s.grad_accum, s.grad_sync) == (128, "last")  # stage 0: DeepSpeed all-reduces at the boundary only
    said = lines_of(result, "gradient_accumulation_steps")
    assert said[0] == "sets: grad_accum = 128: micro batches per optimizer step"
    assert result.unresolved == ()
    assert_every_key_accounted(cfg, result)


def test_the_hf_docs_nvme_example_is_refused_as_deepspeed_refuses_it() -> None:
    """The transformers docs' ZeRO-Infinity example nests ``aio`` inside ``zero_optimization``; DeepSpeed's
    ``DeepSpeedZeroConfig`` forbids keys it does not declare, so DeepSpeed itself would refuse it."""
    with pytest.raises(DeepSpeedConfigError) as refused:
        import_deepspeed(config("hf-docs-zero3-nvme"), {"model": "llama-2-7b"})
    assert refused.value.key == "zero_optimization.aio"
    assert "top-level section" in refused.value.message


# --------------------------------------------------------------------------- refusals and rules


@pytest.mark.parametrize(
    ("cfg", "key", "words"),
    [
        ({"fp16": {"enabled": True}, "bf16": {"enabled": True}}, "bf16.enabled", "cannot both"),
        ({"zero_optimization": {"stage": 4}}, "zero_optimization.stage", "0, 1, 2 or 3"),
        ({"zero_optimization": {"stage": True}}, "zero_optimization.stage", "0, 1, 2 or 3"),
        ({"zero_optimization": {"stage": 3, "reduce_bucket_size": 1.5}}, "zero_optimization.reduce_bucket_size",
         "whole number"),
        ({"zero_optimization": {"stage": 3, "reduce_bucket_size": "big"}}, "zero_optimization.reduce_bucket_size",
         "whole number"),
        ({"zero_optimization": {"stage": 2, "overlap_comm": "yes"}}, "zero_optimization.overlap_comm", "true or false"),
        ({"zero_optimization": {"stage3_prefetch_bucket": 1}}, "zero_optimization.stage3_prefetch_bucket",
         "refuses unknown keys"),
        ({"zero_optimization": {"offload_param": {"device": "disk"}}}, "zero_optimization.offload_param.device",
         '"none", "cpu" or "nvme"'),
        ({"optimizer": {"type": "OneBitAdam"}}, "optimizer.type", "removed"),
        ({"optimizer": {"type": "Shampoo"}}, "optimizer.type", "set opt_states by hand"),
        ({"train_micro_batch_size_per_gpu": 5000}, "train_micro_batch_size_per_gpu", "micro_batch = 5000"),
        ({"train_micro_batch_size_per_gpu": 0}, "train_micro_batch_size_per_gpu", "between 1"),
        ({"communication_data_type": "int8"}, "communication_data_type", '"fp32", "fp16" or "bf16"'),
        ({"activation_checkpointing": {"partition": True}}, "activation_checkpointing.partition", "not a key"),
        ({"fp16": []}, "fp16", "must be an object"),
    ],
)  # fmt: skip
def test_a_bad_key_is_refused_by_name(cfg: dict[str, object], key: str, words: str) -> None:
    with pytest.raises(DeepSpeedConfigError) as refused:
        import_deepspeed(cfg, {})
    assert refused.value.key == key
    assert words in refused.value.message


def test_an_unknown_top_level_key_is_reported_not_refused() -> None:
    result = import_deepspeed({"train_micro_batch_size_per_gpu": 2, "zero_optimisation": {"stage": 3}}, {})
    (line,) = (line for line in result.lines if line.key == "zero_optimisation")
    assert line.status == "ignored"
    assert "check its spelling" in line.effect
    assert result.scenario.stage == 0  # DeepSpeed's default: the misspelt section is not read


def test_auto_without_a_model_is_unresolved_and_named() -> None:
    result = import_deepspeed(config("llava-zero3"), {"params": "7B"})
    assert {u.split(":")[0] for u in result.unresolved} >= {
        "zero_optimization.reduce_bucket_size",
        "zero_optimization.stage3_prefetch_bucket_size",
        "zero_optimization.stage3_param_persistence_threshold",
    }
    assert result.scenario.bucket_bytes == 0  # the lab's own input, not a guess


def test_a_typed_field_wins_over_the_config() -> None:
    result = import_deepspeed(config("deepspeed-chat-step1-zero3"), {"model": "llama-2-7b", "micro_batch": 2})
    assert result.scenario.micro_batch == 2
    (line,) = (line for line in result.lines if line.key == "train_micro_batch_size_per_gpu")
    assert line.status == "checked" and "typed value is kept" in line.effect


def test_a_bad_typed_field_is_the_fields_error() -> None:
    with pytest.raises(ScenarioError) as refused:
        import_deepspeed({"zero_optimization": {"stage": 3}}, {"dp": 0})
    assert [e.field for e in refused.value.errors] == ["dp"]


def test_optimizers_and_their_states() -> None:
    states = {
        kind: import_deepspeed({"optimizer": {"type": kind, "params": params}}, {}).scenario.opt_states
        for kind, params in (("AdamW", {}), ("Adam", {}), ("Lamb", {}), ("Adagrad", {}), ("Lion", {}),
                             ("SGD", {"momentum": 0.9}), ("SGD", {}))
    }  # fmt: skip
    assert states == {"AdamW": 2, "Adam": 2, "Lamb": 2, "Adagrad": 1, "Lion": 1, "SGD": 0}
    assert import_deepspeed({"optimizer": {"type": "SGD", "params": {"momentum": 0.9}}}, {}).scenario.opt_states == 1


# --------------------------------------------------------------------------- hostile configs

_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["auto", "cpu", "nvme", "none", "fp32", "bf16", "AdamW", "SGD", ""]), st.text(max_size=8),
)  # fmt: skip
_KEYS = st.sampled_from([
    "stage", "reduce_bucket_size", "stage3_prefetch_bucket_size", "overlap_comm", "contiguous_gradients",
    "offload_optimizer", "offload_param", "device", "enabled", "type", "params", "momentum", "zero_optimization",
    "fp16", "bf16", "optimizer", "train_batch_size", "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps", "activation_checkpointing", "data_types", "grad_accum_dtype",
    "communication_data_type", "max_live_parameters", "stage3_param_persistence_threshold", "mics_shard_size",
]) | st.text(max_size=6)  # fmt: skip
_CONFIGS = st.recursive(_SCALARS, lambda inner: st.dictionaries(_KEYS, inner, max_size=6), max_leaves=30)


@settings(max_examples=400, deadline=None)
@given(cfg=st.dictionaries(_KEYS, _CONFIGS, max_size=8), model=st.sampled_from(["", "llama-2-7b", "gpt2"]))
def test_any_json_object_is_read_or_refused_by_name(cfg: dict[str, object], model: str) -> None:
    """Whatever a config holds, the reader answers a scenario or a refusal naming a key: never another
    exception, and never a field out of its bounds."""
    try:
        result = import_deepspeed(cfg, {"model": model} if model else {})
    except DeepSpeedConfigError as exc:
        assert exc.key and exc.message
        return
    assert all(line.key and line.effect for line in result.lines)
    assert 0 <= result.scenario.stage <= 3


def test_offload_sizes_other_than_deepspeed_s_defaults_are_not_modelled() -> None:
    """The host ledger's swap buffers and CPU-resident parameters take DeepSpeed's defaults: a config that
    sets others says so, key by key; a partial optimizer offload is stage 3's (DeepSpeed refuses it below)."""
    cfg = {
        "bf16": {"enabled": True},
        "zero_optimization": {
            "stage": 3, "sub_group_size": 1e8,
            "offload_optimizer": {"device": "nvme", "buffer_count": 8},
            "offload_param": {"device": "nvme", "buffer_count": 5, "buffer_size": 1e9},
        },
    }  # fmt: skip
    result = import_deepspeed(cfg, {"model": "llama-2-7b"})
    status = {line.key: line.status for line in result.lines}
    assert status["zero_optimization.offload_optimizer.buffer_count"] == "not modelled"
    assert status["zero_optimization.offload_param.buffer_size"] == "not modelled"
    assert status["zero_optimization.offload_param.buffer_count"] == "checked"  # the default
    assert status["zero_optimization.sub_group_size"] == "not modelled"
    partial = {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}}
    with pytest.raises(DeepSpeedConfigError) as refused:
        import_deepspeed(partial, {})
    assert refused.value.key == "zero_optimization.offload_optimizer.ratio"
