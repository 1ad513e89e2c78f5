"""A scenario in the frameworks' own words: a ``ds_config.json`` and an FSDP2 snippet that reproduce it.

Each comes with notes: the inputs the framework cannot express (and what was written instead), and
what comes from the training script or the launcher rather than the config (the model, D, the
sequence length). The DeepSpeed config reads back through :func:`app.interop.deepspeed.reader.import_deepspeed`
to the same scenario for every input it can express (a test holds the round trip).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from app.ledger.scenario import Scenario
from app.ledger.scenario.links import link

__all__ = ["DEEPSPEED_FIELDS", "Snippet", "deepspeed_config", "deepspeed_snippet", "fsdp2_snippet"]

# The scenario inputs a ds_config.json carries; the others come from the script and the launcher.
DEEPSPEED_FIELDS = frozenset(
    {
        "stage",
        "param_bytes",
        "master_bytes",
        "grad_bytes",
        "reduce_bytes",
        "opt_states",
        "opt_bytes",
        "micro_batch",
        "bucket_bytes",
        "prefetch",
        "act_policy",
        "offload_optimizer",
        "offload_param",
        "hpz",  # zero_optimization.zero_hpz_partition_size (stage 3)
        "shard_group",  # zero_optimization.mics_shard_size (stage 3)
    }
)
_OPTIMIZERS = {2: "AdamW", 1: "Adagrad", 0: "SGD"}  # FP32 states per parameter -> a DeepSpeed optimizer.type
_GRAD_TYPES = {4: "fp32", 2: "bf16"}
_TORCH_TYPES = {1: "torch.float8_e4m3fn", 2: "torch.bfloat16", 4: "torch.float32", 8: "torch.float64"}


@dataclass(frozen=True, slots=True)
class Snippet:
    """Text to copy (JSON or Python) and what it could not say."""

    text: str
    notes: tuple[str, ...]


def _buckets(s: Scenario, zero: dict[str, object], notes: list[str]) -> None:
    """bucket_bytes as reduce_bucket_size elements, as the importer reads them back: stages 1–2 in the
    model's type (one flat bucket, two when overlap_comm double-buffers them), stage 3 one in the reduce
    width."""
    g = s.reduce_bytes if s.stage == 3 else (2 if _mixed(s) else 4)
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
        zero["contiguous_gradients"] = False  # no flat bucket at all
        zero["overlap_comm"] = s.stage == 3
        if offloaded and s.stage < 3:
            notes.append(
                "bucket_bytes 0 with offload at stages 1–2: DeepSpeed turns contiguous_gradients on, so it "
                "keeps a bucket the scenario does not count; not expressible"
            )
        else:
            notes.append(
                f"bucket_bytes 0: written as contiguous_gradients false (no flat gradient bucket); "
                f"DeepSpeed's default keeps 500,000,000 elements × {g} B = {500_000_000 * g:,} B: set "
                "bucket_bytes to count it"
            )
        return
    double = s.stage < 3 and s.bucket_bytes % (2 * g) == 0
    elements = s.bucket_bytes // (2 * g if double else g)
    if s.bucket_bytes % g:
        notes.append(
            f"bucket_bytes {s.bucket_bytes:,} B is not a whole number of {g}-byte elements: "
            f"written as {elements:,} elements"
        )
    zero["contiguous_gradients"] = True
    zero["overlap_comm"] = double or s.stage == 3
    zero["reduce_bucket_size"] = elements


def _partitions(s: Scenario, zero: dict[str, object], notes: list[str]) -> None:
    """hpz and shard_group as stage 3's zero_hpz_partition_size and mics_shard_size (DeepSpeed reads them at
    stage 3 only: the importer's ``_partitions`` says where)."""
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
    if s.hpz > 1:
        zero["zero_hpz_partition_size"] = s.hpz
    if s.shard_group < s.dp:
        zero["mics_shard_size"] = s.shard_group
        notes.append(
            "MiCS: build the model under deepspeed.zero.MiCS_Init(config_dict_or_path=ds_config), not "
            "deepspeed.zero.Init (the Trainer's): MiCS_Optimizer asserts its parameters carry MiCS's groups"
        )


def _mixed(s: Scenario) -> bool:
    """Written as bf16 (16-bit parameters with an FP32 master), unless FP32 parameters are their own master."""
    return not (s.param_bytes == 4 and s.master_bytes == 0)


def deepspeed_config(s: Scenario) -> tuple[dict[str, object], tuple[str, ...]]:
    """The config and its notes. Written for the HF Trainer or ``deepspeed.initialize`` alike: every value
    explicit (no "auto"), train_batch_size = micro batch × D with no gradient accumulation (the lab's
    step is one micro batch)."""
    notes: list[str] = []
    config: dict[str, object] = {
        "train_micro_batch_size_per_gpu": s.micro_batch,
        "gradient_accumulation_steps": 1,
        "train_batch_size": s.micro_batch * s.dp,
    }
    mixed = _mixed(s)
    if mixed:
        config["bf16"] = {"enabled": True}
        if (s.param_bytes, s.master_bytes) != (2, 4):
            notes.append(
                f"param_bytes {s.param_bytes} with master_bytes {s.master_bytes}: DeepSpeed keeps 16-bit parameters "
                "with an FP32 master, or FP32 parameters alone; written as bf16 (2 and 4)"
            )
    model_width = 2 if mixed else 4  # DeepSpeed's get_data_types: gradients, and communication, in the model's type
    if s.grad_bytes != model_width:
        config["data_types"] = {"grad_accum_dtype": _GRAD_TYPES[s.grad_bytes]}
    if s.reduce_bytes != model_width:
        config["communication_data_type"] = _GRAD_TYPES[s.reduce_bytes]
    if s.gather_bytes != s.param_bytes:
        notes.append(
            f"gather_bytes {s.gather_bytes}: DeepSpeed all-gathers parameters in their own width "
            f"({s.param_bytes if mixed else 4} B); not written"
        )
    if s.opt_states in _OPTIMIZERS:
        optimizer: dict[str, object] = {"type": _OPTIMIZERS[s.opt_states]}
        if s.opt_states == 0:
            optimizer["params"] = {"momentum": 0}
            if s.stage:
                config["zero_allow_untested_optimizer"] = True  # torch's SGD is not on ZeRO's tested list
        config["optimizer"] = optimizer
        if s.opt_bytes != 4:
            notes.append(f"opt_bytes {s.opt_bytes}: DeepSpeed keeps optimizer state in FP32 (4 B); not written")
    else:
        notes.append(
            f"opt_states {s.opt_states} (opt_bytes {s.opt_bytes}): no DeepSpeed optimizer keeps that many "
            "states; no optimizer section written (the training script's optimizer is used)"
        )
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
        if live > 1_000_000_000:  # DeepSpeed's default would release before the ledger's gather is done
            zero["stage3_max_live_parameters"] = live
        if not s.reshard_after_forward:
            notes.append(
                "reshard_after_forward 0: DeepSpeed's stage 3 has no such switch (it releases each "
                "module's parameters after use); not written"
            )
    elif s.prefetch:
        notes.append(f"prefetch {s.prefetch}: only stage 3 gathers parameters; not written")
    _partitions(s, zero, notes)
    config["zero_optimization"] = zero
    if s.act_policy == "full":
        config["activation_checkpointing"] = {"partition_activations": False, "cpu_checkpointing": False}
        notes.append(
            "full recomputation: the model must checkpoint each layer (deepspeed.checkpointing, or the "
            "Trainer's --gradient_checkpointing); the section configures it"
        )
    elif s.act_policy == "selective":
        notes.append("selective recomputation: not a DeepSpeed setting (the model's own attention checkpointing)")
    if s.tp > 1:
        notes.append(f"tp {s.tp}: tensor parallelism comes from the model code (Megatron-DeepSpeed), not the config")
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
    notes.append(
        f"from the launcher and the script, not the config: the model, D = {s.dp:,} data-parallel ranks, "
        f"the sequence length ({s.seq_len:,})"
    )
    return config, tuple(notes)


def deepspeed_snippet(s: Scenario) -> Snippet:
    config, notes = deepspeed_config(s)
    return Snippet(json.dumps(config, indent=2) + "\n", notes)


def _fsdp2_offload(s: Scenario) -> bool:
    """FSDP2's CPUOffloadPolicy: parameters, gradients and the optimizer step on the CPU, all together."""
    return s.offload_optimizer == "cpu" and s.offload_param == "cpu"


def _fsdp2_mesh(s: Scenario) -> str:
    """The mesh every ``fully_shard`` takes: 1-D over D, or HSDP's 2-D (replicate, shard) for a shard group."""
    if s.shard_group >= s.dp:
        return f'mesh = init_device_mesh("cuda", ({s.dp},))  # D = {s.dp:,} ranks shard the state'
    groups = s.dp // s.shard_group
    return (
        f'mesh = init_device_mesh("cuda", ({groups}, {s.shard_group}), mesh_dim_names=("replicate", "shard"))'
        f"  # HSDP: sharded over {s.shard_group:,} ranks, replicated across {groups:,} groups"
    )


def fsdp2_snippet(s: Scenario) -> Snippet:
    """``fully_shard`` per decoder layer and on the root, on the scenario's mesh (HSDP's 2-D one for a shard
    group), with its MixedPrecisionPolicy, reshard_after_forward, recomputation, prefetch and optimizer (a
    sketch for ``model``, a transformers-style decoder whose layers are ``model.model.layers``)."""
    notes: list[str] = []
    reshard = bool(s.reshard_after_forward)
    if s.stage == 2 and reshard:
        reshard = False
        notes.append(
            "stage 2: the layers keep their gathered parameters from forward to backward "
            "(reshard_after_forward=False), FSDP2's nearest to ZeRO-2"
        )
    elif s.stage < 2:
        closer = "DDP" if s.stage == 0 else "ZeRO-1"
        notes.append(
            f"stage {s.stage}: FSDP2 shards parameters, so it cannot keep them replicated ({closer} is "
            "the closer fit); the snippet shards fully"
        )
    offload = ", offload_policy=CPUOffloadPolicy()" if _fsdp2_offload(s) else ""
    if s.offload_optimizer != "none" or s.offload_param != "none":
        if not _fsdp2_offload(s):
            notes.append(
                f"offload_optimizer {s.offload_optimizer}, offload_param {s.offload_param}: FSDP2's "
                "CPUOffloadPolicy moves parameters, gradients and the optimizer step to the CPU together "
                "(both cpu); not written"
            )
        elif s.stage != 3:
            notes.append("CPUOffloadPolicy offloads the sharded parameters too: the lab's stage 3 rows are FSDP2's")
    lines = [
        f"# zero3-lab scenario: {link(s)}",
        "# FSDP2 for it; run under torchrun. `model` is a transformers-style decoder (model.model.layers).",
        "import torch",
    ]
    if s.act_policy == "full":
        lines.append("from torch.distributed._composable import checkpoint")
    lines += [
        "from torch.distributed.device_mesh import init_device_mesh",
        "from torch.distributed.fsdp import "
        + ("CPUOffloadPolicy, " if _fsdp2_offload(s) else "")
        + "MixedPrecisionPolicy, fully_shard",
        "",
        _fsdp2_mesh(s),
    ]
    if s.param_bytes != 4:
        lines.append(f"model.to({_TORCH_TYPES[s.param_bytes]})  # the sharded parameters' width: {s.param_bytes} B")
    lines += [
        f"mp = MixedPrecisionPolicy(param_dtype={_TORCH_TYPES[s.gather_bytes]}, "
        f"reduce_dtype={_TORCH_TYPES[s.reduce_bytes]})",
        "layers = list(model.model.layers)",
        "for layer in layers:",
    ]
    if s.act_policy == "full":
        lines.append("    checkpoint(layer)  # full recomputation: each layer keeps only its input")
    lines += [
        f"    fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward={reshard}{offload})",
        f"fully_shard(model, mesh=mesh, mp_policy=mp{offload})  # the root: embeddings, final norm and head",
    ]
    if s.prefetch:
        units = f"{s.prefetch} unit{'s' if s.prefetch > 1 else ''}"
        lines += [
            f"for i, layer in enumerate(layers):  # prefetch P = {units} ahead",
            f"    layer.set_modules_to_forward_prefetch(layers[i + 1 : i + 1 + {s.prefetch}])",
            f"    layer.set_modules_to_backward_prefetch(layers[max(0, i - {s.prefetch}) : i][::-1])",
        ]
    if s.opt_states == 2:
        lines.append("optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)  # two states per parameter")
    elif s.opt_states == 1:
        lines.append("optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)  # one state")
    elif s.opt_states == 0:
        lines.append("optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)  # no state")
    else:
        notes.append(f"opt_states {s.opt_states}: no torch.optim optimizer written; use one with that many states")
    if s.opt_states and s.opt_bytes != s.param_bytes:
        notes.append(
            f"opt_bytes {s.opt_bytes}: torch.optim keeps its states in the parameters' width ({s.param_bytes} B)"
        )
    if s.master_bytes:
        notes.append(
            f"master_bytes {s.master_bytes}: FSDP2 keeps no separate master copy (the optimizer steps "
            "the sharded parameters); use FP32 parameters (param_bytes 4) for the same precision"
        )
    if s.act_policy == "selective":
        notes.append("selective recomputation: checkpoint the attention core inside each layer (not written)")
    if s.bucket_bytes:
        notes.append(f"bucket_bytes {s.bucket_bytes:,} B: FSDP2 has no buckets (one collective per unit)")
    if s.tp > 1:
        notes.append(f"tp {s.tp}: a 2-D mesh (dp, tp) with parallelize_module; not written")
    if s.hpz > 1:
        notes.append(
            f"hpz {s.hpz}: ZeRO++'s secondary parameter partition has no FSDP2 equivalent (a shard group, "
            "HSDP, is the nearest); not written"
        )
    if s.pp > 1:
        notes.append(
            f"pp {s.pp}: pipeline parallelism is torch.distributed.pipelining (a PipelineStage per rank and a "
            "schedule such as Schedule1F1B); not written"
        )
    if s.ep > 1:
        notes.append(
            f"ep {s.ep}: expert parallelism is the model's own code (its experts split over {s.ep} ranks); not written"
        )
    return Snippet("\n".join(lines) + "\n", tuple(notes))
