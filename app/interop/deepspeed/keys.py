"""The DeepSpeed keys the lab knows: one table that the reader and the writer both use.

Each :class:`Key` is one dotted path of a ``ds_config.json`` with its default as :data:`DEEPSPEED` has
it (``deepspeed/runtime/zero/config.py``, ``runtime/constants.py``, ``runtime/precision_config.py``,
``runtime/zero/offload_config.py``), the scenario fields it sets, the rule that turns its value into
them (DeepSpeed's sizes count elements: the width says which bytes) and, for a key that changes no
field, the line the reader gives it. A key missing from the table is one DeepSpeed 0.19.8 does not
read: inside ``zero_optimization`` and the precision sections DeepSpeed refuses it, and so does the lab.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ACTIVATION",
    "BF16",
    "DEEPSPEED",
    "DEEPSPEED_FIELDS",
    "DTYPE_WIDTHS",
    "DTYPE_WRITTEN",
    "ELEMENTS_MAX",
    "FP16",
    "KEYS",
    "OFFLOAD",
    "OPTIMIZER_STATES",
    "OPTIMIZER_WRITTEN",
    "REMOVED_OPTIMIZERS",
    "TOP",
    "TRANSFORMERS",
    "ZERO",
    "Key",
    "bucket_buffers",
    "bucket_width",
    "default",
    "lookup",
    "model_width",
]

DEEPSPEED = "DeepSpeed 0.19.8"  # whose documented defaults a missing key takes
TRANSFORMERS = "transformers 5.23.0"  # whose Trainer resolves "auto"
ELEMENTS_MAX = 2**63 - 1  # sys.maxsize: DeepSpeed's own largest default (stage3_model_persistence_threshold)

Kind = Literal["read", "no memory effect", "not modelled"]


@dataclass(frozen=True, slots=True)
class Key:
    """One key of a ds_config.json.

    ``kind`` "read": a reader turns it into fields or a line of its own; otherwise ``effect`` is its whole
    line, said with that status. ``on`` is what a flag's ``true`` does that the ledger does not model.
    """

    path: str
    default: object = None  # DeepSpeed's value when the key is absent (None: no default, or a section)
    fields: tuple[str, ...] = ()  # the scenario fields it sets
    width: str = ""  # how its value becomes those fields
    alias: str = ""  # DeepSpeed's other spelling (its pydantic alias)
    kind: Kind = "read"
    effect: str = ""
    on: str = ""


def _quiet(path: str, why: str, alias: str = "") -> Key:
    """A key with no effect on a rank's memory (scheduling, checks, logging, checkpoints)."""
    return Key(path, alias=alias, kind="no memory effect", effect=f"{why}: no memory effect")


def _not_modelled(path: str, effect: str) -> Key:
    return Key(path, kind="not modelled", effect=effect)


_Z = "zero_optimization."
_BUCKET_WIDTH = (
    "elements × the model's type at stages 1–2 (× 2 when overlap_comm double-buffers), × the reduce width at "
    "stage 3 (bucket_width, bucket_buffers)"
)

_QUANTIZED = (
    "quantized communication (ZeRO++): not modelled — the lab counts the all-gather and reduce-scatter in their "
    "full widths"
)
_ZERO_KEYS = (
    Key(_Z[:-1], fields=("stage",), width="false: stage 0, true: stage 1 (DeepSpeed's deprecated form)"),
    Key(_Z + "stage", 0, ("stage",), "0, 1, 2 or 3"),
    Key(_Z + "contiguous_gradients", True, width="false: no flat gradient bucket (read with reduce_bucket_size)"),
    Key(_Z + "overlap_comm", None, width="absent: true at stage 3 only; double-buffers stages 1–2's bucket"),
    Key(_Z + "reduce_bucket_size", 500_000_000, ("bucket_bytes",), _BUCKET_WIDTH),
    Key(_Z + "allgather_bucket_size", 500_000_000, width="elements: after the step, outside the training peak"),
    Key(
        _Z + "stage3_prefetch_bucket_size",
        50_000_000,
        ("prefetch",),
        "⌊elements ÷ U⌋ whole units, at most 8",
        alias="prefetch_bucket_size",
    ),
    Key(
        _Z + "stage3_param_persistence_threshold",
        100_000,
        width="elements × param_bytes stay whole (not modelled)",
        alias="param_persistence_threshold",
    ),
    Key(_Z + "stage3_model_persistence_threshold", ELEMENTS_MAX, alias="model_persistence_threshold"),
    Key(
        _Z + "stage3_max_live_parameters",
        1_000_000_000,
        width="elements, against (1 + P) × U",
        alias="max_live_parameters",
    ),
    Key(_Z + "stage3_max_reuse_distance", 1_000_000_000, alias="max_reuse_distance"),
    Key(_Z + "stage3_gather_16bit_weights_on_model_save", False, alias="gather_16bit_weights_on_model_save"),
    Key(_Z + "stage3_gather_fp16_weights_on_model_save", False),
    Key(_Z + "sub_group_size", 1_000_000_000, width="elements; NVMe swap buffers hold 4 × the largest"),
    Key(_Z + "offload_optimizer"),
    Key(_Z + "offload_param"),
    Key(_Z + "cpu_offload", False, ("offload_optimizer",), "true: offload_optimizer.device cpu"),
    Key(_Z + "cpu_offload_param", False, ("offload_param",), "true: offload_param.device cpu"),
    Key(_Z + "zero_hpz_partition_size", 1, ("hpz",), "ranks, on above 1 (stage 3 only)"),
    Key(_Z + "mics_shard_size", -1, ("shard_group",), "ranks, on above 0; off: D (stage 3 only)"),
    *(
        Key(_Z + name, False, on=_QUANTIZED)
        for name in ("zero_quantized_weights", "zero_quantized_nontrainable_weights", "zero_quantized_gradients")
    ),
    Key(_Z + "zeropp_loco_param", kind="not modelled", effect="LoCo error feedback buffers: not modelled"),
    _quiet(_Z + "reduce_scatter", "reduce-scatter (true) or reduce: the same gradient bytes"),
    _quiet(_Z + "allgather_partitions", "all-gather (true) or broadcasts for the updated parameters: the same bytes"),
    _quiet(_Z + "use_multi_rank_bucket_allreduce", "how buckets are combined across ranks"),
    _quiet(_Z + "load_from_fp32_weights", "what a checkpoint load initialises from"),
    _quiet(_Z + "elastic_checkpoint", "a legacy checkpoint format"),
    _quiet(_Z + "ignore_unused_parameters", "an error check (stage 2)"),
    _quiet(_Z + "legacy_stage1", "the old stage-1 code path"),
    _quiet(_Z + "round_robin_gradients", "how offloaded gradients are copied (stages 1 and 2)"),
    _quiet(_Z + "memory_efficient_linear", "the linear layers' autograd function under stage 3"),
    _quiet(_Z + "override_module_apply", "stage 3's module.apply hook"),
    _quiet(_Z + "log_trace_cache_warnings", "logging"),
    _quiet(_Z + "enable_sanity_checks", "debug checks"),
    _quiet(_Z + "pipeline_loading_checkpoint", "checkpoint loading under pipeline parallelism"),
    _quiet(
        _Z + "stage3_module_granularity_threshold",
        "which small modules are fetched as one",
        alias="module_granularity_threshold",
    ),
    _quiet(
        _Z + "stage3_use_all_reduce_for_fetch_params",
        "the collective that fetches parameters",
        alias="use_all_reduce_for_fetch_params",
    ),
    _quiet(
        _Z + "stage3_allgather_sequential",
        "all-gathers one parameter at a time instead of a flat bucket",
        alias="allgather_sequential",
    ),
    _quiet(
        _Z + "mics_hierarchical_params_gather",
        "MiCS's two-level parameter all-gather (mics.py, "
        "MiCS_Init._hierarchical_all_gather_params): the same bytes gathered",
    ),
    _quiet(_Z + "leaf_module", "modules fetched whole"),
    _quiet(_Z + "zenflow", "ZenFlow's asynchronous update"),
    _quiet(_Z + "save_muon_momentum_buffer_in_memory", "NVMe swapping of Muon's momentum"),
    _quiet(_Z + "cpu_offload_use_pin_memory", "deprecated: pinning of offloaded buffers"),
    _quiet(_Z + "stage3_partition_stream_chunk_size", "zero.Init's streaming partition"),
    _quiet(_Z + "compute_grad_norm", "whether the step computes the gradient norm"),
    _quiet(_Z + "parameter_alignment", "partition alignment"),
)

# The offload sections' sub-keys, each line as the reader gives it. The lab takes the same sub-keys under
# either section (as it always has); the defaults are the ones the host ledger counts with.
_OFFLOAD_SUBKEYS: tuple[tuple[str, str, Kind], ...] = (
    ("device", "none, cpu or nvme: the scenario's offload input", "read"),
    ("pin_memory", "pinned or not, the bytes are the same (pinning copies once, briefly)", "no memory effect"),
    (
        "buffer_count",
        "the swap buffers' count: the host ledger takes DeepSpeed's default (4 optimizer, 5 parameter)",
        "no memory effect",
    ),
    (
        "buffer_size",
        "the parameter swap buffers' elements: the host ledger takes DeepSpeed's default (10⁸)",
        "no memory effect",
    ),
    ("max_in_cpu", "parameters kept in CPU memory under NVMe offload: not modelled", "not modelled"),
    ("nvme_path", "where the NVMe files live: no memory effect", "no memory effect"),
    ("pipeline_read", "overlapped NVMe reads: no memory effect in the lab's model", "no memory effect"),
    ("pipeline_write", "overlapped NVMe writes: no memory effect in the lab's model", "no memory effect"),
    ("fast_init", "NVMe initialisation: no memory effect", "no memory effect"),
    ("ratio", "a partial optimizer offload: not modelled (the lab offloads all of it or none)", "not modelled"),
    ("super_offload", "SuperOffload's scheduling: not modelled", "not modelled"),
    ("cpuadam_cores_perc", "CPU Adam's threads: no memory effect", "no memory effect"),
)
_OFFLOAD_DEFAULTS: dict[str, dict[str, object]] = {
    "offload_optimizer": {"device": "none", "buffer_count": 4},
    "offload_param": {"device": "none", "buffer_count": 5, "buffer_size": 100_000_000, "max_in_cpu": 1_000_000_000},
}
_OFFLOAD_KEYS = tuple(
    Key(
        f"{_Z}{section}.{sub}",
        defaults.get(sub),
        (section,) if sub == "device" else (),
        kind=kind,
        effect="" if sub == "device" else effect,
    )
    for section, defaults in _OFFLOAD_DEFAULTS.items()
    for sub, effect, kind in _OFFLOAD_SUBKEYS
)

_LOW_PRECISION_MASTER = (
    "16-bit master weights or optimizer states: not modelled (the lab's master and optimizer widths are 4, 8 or 0; "
    "set master_bytes and opt_bytes by hand)"
)
_SCALING = "loss scaling, casting and overflow checks"
_PRECISION_FIELDS = ("param_bytes", "master_bytes", "grad_bytes", "reduce_bytes")
_PRECISION_WIDTH = "on: 16-bit parameters (2 B) with an FP32 master (4 B); neither on: FP32 parameters, no master"
_PRECISION_KEYS = (
    Key("fp16"),
    Key("fp16.enabled", False, _PRECISION_FIELDS, _PRECISION_WIDTH),
    *(
        _quiet(f"fp16.{name}", _SCALING)
        for name in (
            "auto_cast",
            "loss_scale",
            "initial_scale_power",
            "loss_scale_window",
            "hysteresis",
            "consecutive_hysteresis",
            "min_loss_scale",
        )
    ),
    Key(
        "fp16.fp16_master_weights_and_grads",
        False,
        kind="no memory effect",
        effect=f"{_SCALING}: no memory effect",
        on=_LOW_PRECISION_MASTER,
    ),
    Key("bf16", alias="bfloat16"),
    Key("bf16.enabled", False, _PRECISION_FIELDS, _PRECISION_WIDTH),
    _quiet("bf16.immediate_grad_update", _SCALING),
    _quiet("bf16.check_grad_overflow", _SCALING),
    *(
        Key(
            f"bf16.{name}",
            False,
            kind="no memory effect",
            effect=f"{_SCALING}: no memory effect",
            on=_LOW_PRECISION_MASTER,
        )
        for name in ("bf16_master_weights_and_grads", "bf16_optimizer_states")
    ),
    Key("data_types"),
    Key("data_types.grad_accum_dtype", None, ("grad_bytes",), "DTYPE_WIDTHS; absent: the model's type"),
    Key("communication_data_type", None, ("reduce_bytes",), "DTYPE_WIDTHS; absent: the model's type"),
    Key("optimizer"),
    Key("optimizer.type", None, ("opt_states", "opt_bytes"), "OPTIMIZER_STATES; SGD 1 with momentum, else 0; 4 B"),
    Key("optimizer.params"),
)

_ACTIVATION_KEYS = (
    Key("activation_checkpointing", None, ("act_policy",), "present: full recomputation"),
    Key(
        "activation_checkpointing.partition_activations",
        False,
        on="splits each checkpointed input across the tensor-parallel ranks: not modelled "
        "(the lab keeps whole inputs; set sequence_parallel for Megatron's split)",
    ),
    Key(
        "activation_checkpointing.cpu_checkpointing",
        False,
        on="moves checkpointed inputs to host memory: not modelled (the lab keeps them on the device)",
    ),
    *(
        Key(f"activation_checkpointing.{name}", False)
        for name in ("contiguous_memory_optimization", "synchronize_checkpoint_boundary", "profile")
    ),
    Key("activation_checkpointing.number_checkpoints"),
)

_BATCH_KEYS = (
    Key("train_batch_size", width="micro batch × gradient accumulation × D (checked)"),
    Key("train_micro_batch_size_per_gpu", None, ("micro_batch",), "sequences per micro batch on one rank"),
    Key("gradient_accumulation_steps", width="no per-rank memory effect; resolved with the other two"),
)

_TOP_QUIET = {
    "gradient_clipping": "clips the gradient norm in place",
    "scheduler": "the learning-rate schedule",
    "steps_per_print": "logging",
    "wall_clock_breakdown": "timing logs",
    "prescale_gradients": "when gradients are divided by D",
    "gradient_predivide_factor": "when gradients are divided by D",
    "zero_allow_untested_optimizer": "allows an optimizer ZeRO has not tested",
    "zero_force_ds_cpu_optimizer": "requires DeepSpeed's CPU optimizer with offload",
    "tensorboard": "logging",
    "wandb": "logging",
    "csv_monitor": "logging",
    "comet": "logging",
    "flops_profiler": "profiling",
    "comms_logger": "logging",
    "dump_state": "logging",
    "memory_breakdown": "logging",
    "elasticity": "elastic batch sizes",
    "autotuning": "the autotuner's search",
    "checkpoint": "checkpoint storage options",
    "hybrid_engine": "DeepSpeed-Chat's generation engine",
    "sparse_gradients": "sparse embedding gradients",
    "gradient_allreduce_op": "sum or mean",
    "managed_gradient_accumulation": "who counts micro-batches",
    "seq_parallel_communication_data_type": "Ulysses sequence-parallel communication",
    "curriculum_learning": "data sampling",
    "data_efficiency": "data sampling",
    "compression_training": "compression schedules",
}
_TOP_NOT_MODELLED = {
    "aio": "NVMe reads and writes for ZeRO-Infinity offload: block sizes and queues, no memory effect modelled",
    "pipeline": "pipeline parallelism (not modelled yet: N is the parameters of the pipeline stage you type)",
    "amp": "NVIDIA Apex AMP (not modelled: set the widths by hand)",
    "torch_autocast": "torch.autocast regions (not modelled: set the widths by hand)",
    "sequence_parallel_size": "Ulysses sequence parallelism (not modelled)",
}

KEYS: Mapping[str, Key] = {
    key.path: key
    for key in (
        *_ZERO_KEYS,
        *_OFFLOAD_KEYS,
        *_PRECISION_KEYS,
        *_ACTIVATION_KEYS,
        *_BATCH_KEYS,
        *(_quiet(path, why) for path, why in _TOP_QUIET.items()),
        *(_not_modelled(path, effect) for path, effect in _TOP_NOT_MODELLED.items()),
    )
}


def _children(section: str) -> Mapping[str, Key]:
    """The keys directly inside ``section`` ("" for the top level), by their own name."""
    prefix = f"{section}." if section else ""
    return {
        path[len(prefix) :]: key
        for path, key in KEYS.items()
        if path.startswith(prefix) and "." not in path[len(prefix) :]
    }


TOP = _children("")
ZERO = _children("zero_optimization")
OFFLOAD = {section: _children(_Z + section) for section in _OFFLOAD_DEFAULTS}
FP16 = _children("fp16")
BF16 = _children("bf16")
ACTIVATION = _children("activation_checkpointing")

# The scenario inputs a ds_config.json carries; the others come from the script and the launcher.
DEEPSPEED_FIELDS = frozenset(name for key in KEYS.values() for name in key.fields)


def lookup(section: Mapping[str, Key], name: str) -> Key | None:
    """A key of ``section`` by its name or DeepSpeed's other spelling."""
    return section.get(name) or next((key for key in section.values() if key.alias and key.alias == name), None)


def default(path: str) -> int:
    """A size's default (a count of elements or ranks)."""
    value = KEYS[path].default
    assert isinstance(value, int) and not isinstance(value, bool), path
    return value


# optimizer.type (DeepSpeed's own names, matched lower-cased) -> FP32 state tensors per parameter.
OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "lamb": 2, "adagrad": 1, "lion": 1}
REMOVED_OPTIMIZERS = ("onebitadam", "zerooneadam", "onebitlamb")
# What the writer names for each count of states (SGD without momentum keeps none).
OPTIMIZER_WRITTEN = {2: "AdamW", 1: "Adagrad", 0: "SGD"}
DTYPE_WIDTHS = {"fp32": 4, "fp16": 2, "bf16": 2}
DTYPE_WRITTEN = {4: "fp32", 2: "bf16"}  # the lab writes bf16 for 2 B (it has no loss scaling to set up)


def model_width(mixed: bool) -> int:
    """The model's type, in which DeepSpeed keeps gradients and communicates (``get_data_types``): 16-bit
    under fp16 or bf16, FP32 otherwise."""
    return 2 if mixed else 4


def bucket_width(stage: int, model_bytes: int, reduce_bytes: int) -> int:
    """The bytes of one element of DeepSpeed's flat gradient bucket: stages 1–2 keep it in the model's type,
    stage 3 in the communication type (the reduce width)."""
    return reduce_bytes if stage == 3 else model_bytes


def bucket_buffers(stage: int, overlap: bool) -> int:
    """Stages 1–2 keep two buckets when overlap_comm double-buffers them; stage 3 always one."""
    return 2 if overlap and stage < 3 else 1
