"""A scenario in DeepSpeed's own words: a ``ds_config.json`` that reproduces it, with notes.

The notes name the inputs DeepSpeed cannot express (and what was written instead), and what comes from
the training script or the launcher rather than the config (the model, D, the sequence length). The
keys, their defaults and their width rules are :mod:`~app.interop.deepspeed.keys`' table, the one the
reader uses, so the config reads back through :func:`app.interop.deepspeed.reader.import_deepspeed` to
the same scenario for every input it can express (a test holds the round trip).
"""

from __future__ import annotations

import json

from app.interop.deepspeed.keys import (
    DTYPE_WRITTEN,
    OPTIMIZER_WRITTEN,
    bucket_buffers,
    bucket_width,
    default,
    model_width,
)
from app.interop.snippet import Snippet
from app.ledger.scenario import Scenario

__all__ = ["deepspeed_config", "deepspeed_snippet"]

_Z = "zero_optimization."


def deepspeed_config(s: Scenario) -> tuple[dict[str, object], tuple[str, ...]]:
    """The config and its notes. Written for the HF Trainer or ``deepspeed.initialize`` alike: every value
    explicit (no "auto"), train_batch_size = micro batch × gradient accumulation × D."""
    notes: list[str] = []
    config: dict[str, object] = {
        "train_micro_batch_size_per_gpu": s.micro_batch,
        "gradient_accumulation_steps": s.grad_accum,
        "train_batch_size": s.micro_batch * s.grad_accum * s.dp,
    }
    if s.grad_accum > 1 and s.grad_sync == "every" and s.stage < 2:
        notes.append("grad_sync every: DeepSpeed reduces the gradients at the accumulation boundary only at stages "
                     "0–1 (its own, last): the same memory, one reduction a step")  # fmt: skip
    if s.accumulates_unsharded(s.stage):
        notes.append("grad_sync last: DeepSpeed's ZeRO-2 and 3 reduce every micro batch into their partitioned "
                     "gradients (no no_sync): its own, holding gradient shards, not unsharded ones")  # fmt: skip
    _precision(s, config, notes)
    _optimizer(s, config, notes)
    config["zero_optimization"] = _zero(s, notes)
    if s.act_policy == "full":
        config["activation_checkpointing"] = {"partition_activations": False, "cpu_checkpointing": False}
        notes.append(
            "full recomputation: the model must checkpoint each layer (deepspeed.checkpointing, or the "
            "Trainer's --gradient_checkpointing); the section configures it"
        )
    elif s.act_policy == "selective":
        notes.append("selective recomputation: not a DeepSpeed setting (the model's own attention checkpointing)")
    _parallelism(s, notes)
    notes.append(
        f"from the launcher and the script, not the config: the model, D = {s.dp:,} data-parallel ranks, "
        f"the sequence length ({s.seq_len:,})"
    )
    return config, tuple(notes)


def deepspeed_snippet(s: Scenario) -> Snippet:
    config, notes = deepspeed_config(s)
    return Snippet(json.dumps(config, indent=2) + "\n", notes)


def _mixed(s: Scenario) -> bool:
    """Written as bf16 (16-bit parameters with an FP32 master), unless FP32 parameters are their own master."""
    return not (s.param_bytes == 4 and s.master_bytes == 0)


def _precision(s: Scenario, config: dict[str, object], notes: list[str]) -> None:
    """bf16 (or FP32), and the gradient and communication types where they differ from the model's."""
    mixed = _mixed(s)
    if mixed:
        config["bf16"] = {"enabled": True}
        if (s.param_bytes, s.master_bytes) != (2, 4):
            notes.append(
                f"param_bytes {s.param_bytes} with master_bytes {s.master_bytes}: DeepSpeed keeps 16-bit parameters "
                "with an FP32 master, or FP32 parameters alone; written as bf16 (2 and 4)"
            )
    width = model_width(mixed)  # DeepSpeed's get_data_types: gradients, and communication, in the model's type
    if s.grad_bytes != width:
        config["data_types"] = {"grad_accum_dtype": DTYPE_WRITTEN[s.grad_bytes]}
    if s.reduce_bytes != width:
        config["communication_data_type"] = DTYPE_WRITTEN[s.reduce_bytes]
    if s.gather_bytes != s.param_bytes:
        notes.append(
            f"gather_bytes {s.gather_bytes}: DeepSpeed all-gathers parameters in their own width "
            f"({s.param_bytes if mixed else 4} B); not written"
        )


def _optimizer(s: Scenario, config: dict[str, object], notes: list[str]) -> None:
    """The optimizer DeepSpeed names for the scenario's count of states (none for a count it has no name for)."""
    if s.opt_states not in OPTIMIZER_WRITTEN:
        notes.append(
            f"opt_states {s.opt_states} (opt_bytes {s.opt_bytes}): no DeepSpeed optimizer keeps that many "
            "states; no optimizer section written (the training script's optimizer is used)"
        )
        return
    optimizer: dict[str, object] = {"type": OPTIMIZER_WRITTEN[s.opt_states]}
    if s.opt_states == 0:
        optimizer["params"] = {"momentum": 0}
        if s.stage:
            config["zero_allow_untested_optimizer"] = True  # torch's SGD is not on ZeRO's tested list
    config["optimizer"] = optimizer
    if s.opt_bytes != 4:
        notes.append(f"opt_bytes {s.opt_bytes}: DeepSpeed keeps optimizer state in FP32 (4 B); not written")


def _zero(s: Scenario, notes: list[str]) -> dict[str, object]:
    """zero_optimization: the stage, its buckets, offload, stage 3's gather and the partitions."""
    zero: dict[str, object] = {"stage": s.stage}
    _buckets(s, zero, notes)
    if s.offload_optimizer != "none":
        zero["offload_optimizer"] = {"device": s.offload_optimizer, "pin_memory": True}
    if s.offload_param != "none":
        zero["offload_param"] = {"device": s.offload_param, "pin_memory": True}
        if s.stage != 3:
            notes.append(f"offload_param {s.offload_param}: DeepSpeed reads it at stage 3 only")
    if s.stage == 3:
        zero["stage3_prefetch_bucket_size"] = s.prefetch * s.unit_params
        # 0: every parameter sharded, as the ledger counts them (DeepSpeed's default keeps small ones whole)
        zero["stage3_param_persistence_threshold"] = 0
        live = (1 + s.prefetch) * s.unit_params
        if live > default(_Z + "stage3_max_live_parameters"):  # the default would release before the gather is done
            zero["stage3_max_live_parameters"] = live
        if not s.reshard_after_forward:
            notes.append(
                "reshard_after_forward 0: DeepSpeed's stage 3 has no such switch (it releases each "
                "module's parameters after use); not written"
            )
    elif s.prefetch:
        notes.append(f"prefetch {s.prefetch}: only stage 3 gathers parameters; not written")
    _partitions(s, zero, notes)
    return zero


def _buckets(s: Scenario, zero: dict[str, object], notes: list[str]) -> None:
    """bucket_bytes as reduce_bucket_size elements, as the reader reads them back: stages 1–2 in the
    model's type (one flat bucket, two when overlap_comm double-buffers them), stage 3 one in the reduce
    width."""
    g = bucket_width(s.stage, model_width(_mixed(s)), s.reduce_bytes)
    offloaded = s.offload_optimizer != "none"
    if s.stage == 0:
        if s.bucket_bytes:
            notes.append(f"bucket_bytes {s.bucket_bytes:,} B: stage 0 has no ZeRO gradient buckets; not written")
        return
    if s.stage == 1 and _mixed(s) and s.grad_bytes == 4 and not offloaded:
        if s.bucket_bytes:
            notes.append(
                f"bucket_bytes {s.bucket_bytes:,} B: bf16 with FP32 accumulation at stage 1 runs DeepSpeed's "
                "BF16_Optimizer, which has no ZeRO buckets; not written"
            )
        return
    if s.bucket_bytes == 0:
        _no_bucket(s, zero, notes, g)
        return
    buffers = bucket_buffers(s.stage, overlap=s.bucket_bytes % (2 * g) == 0)
    elements = s.bucket_bytes // (buffers * g)
    if s.bucket_bytes % g:
        notes.append(
            f"bucket_bytes {s.bucket_bytes:,} B is not a whole number of {g}-byte elements: "
            f"written as {elements:,} elements"
        )
    zero["contiguous_gradients"] = True
    zero["overlap_comm"] = buffers == 2 or s.stage == 3
    zero["reduce_bucket_size"] = elements


def _no_bucket(s: Scenario, zero: dict[str, object], notes: list[str], g: int) -> None:
    """bucket_bytes 0: contiguous_gradients false, which offload at stages 1–2 turns back on."""
    zero["contiguous_gradients"] = False  # no flat bucket at all
    zero["overlap_comm"] = s.stage == 3
    if s.offload_optimizer != "none" and s.stage < 3:
        notes.append(
            "bucket_bytes 0 with offload at stages 1–2: DeepSpeed turns contiguous_gradients on, so it "
            "keeps a bucket the scenario does not count; not expressible"
        )
    else:
        elements = default(_Z + "reduce_bucket_size")
        notes.append(
            f"bucket_bytes 0: written as contiguous_gradients false (no flat gradient bucket); "
            f"DeepSpeed's default keeps {elements:,} elements × {g} B = {elements * g:,} B: set "
            "bucket_bytes to count it"
        )


def _partitions(s: Scenario, zero: dict[str, object], notes: list[str]) -> None:
    """hpz and shard_group as stage 3's zero_hpz_partition_size and mics_shard_size (DeepSpeed reads them at
    stage 3 only: :mod:`app.interop.deepspeed.partitions` says where)."""
    if s.stage != 3:
        if s.hpz > 1:
            notes.append(
                f"hpz {s.hpz}: ZeRO++'s secondary partition is stage 3's (DeepSpeed reads "
                "zero_hpz_partition_size at stage 3 only); not written"
            )
        if s.shard_group < s.dp:
            notes.append(
                f"shard_group {s.shard_group}: DeepSpeed has no such layout below stage 3 (MiCS, "
                "mics_shard_size, is stage 3's); not written"
            )
        return
    if s.hpz > default(_Z + "zero_hpz_partition_size"):
        zero["zero_hpz_partition_size"] = s.hpz
    if s.shard_group < s.dp:
        zero["mics_shard_size"] = s.shard_group
        notes.append(
            "MiCS: build the model under deepspeed.zero.MiCS_Init(config_dict_or_path=ds_config), not "
            "deepspeed.zero.Init (the Trainer's): MiCS_Optimizer asserts its parameters carry MiCS's groups"
        )


def _parallelism(s: Scenario, notes: list[str]) -> None:
    """Tensor, pipeline and expert parallelism: the model code's and the script's, never the config's."""
    if s.tp > 1:
        notes.append(f"tp {s.tp}: tensor parallelism comes from the model code (Megatron-DeepSpeed), not the config")
    if s.cp > 1:
        notes.append(f"cp {s.cp}: DeepSpeed has no ring context parallelism (its Ulysses sequence parallelism is "
                     "another scheme, all-to-all of heads); not written")  # fmt: skip
    if s.pp > 1:
        notes.append(
            f"pp {s.pp}: pipeline parallelism is DeepSpeed's PipelineModule(num_stages={s.pp}) in the training "
            "script, not the config"
        )
    if s.ep > 1:
        moe = (
            "; at stage 3 DeepSpeed refuses its native MoE layer (engine.py, _validate_zero3_moe_compatibility: "
            "AutoEP instead)"
            if s.stage == 3
            else ""
        )
        notes.append(
            f"ep {s.ep}: expert parallelism is `deepspeed.moe.layer.MoE(ep_size={s.ep})` in the model code, "
            f"not the config{moe}"
        )
