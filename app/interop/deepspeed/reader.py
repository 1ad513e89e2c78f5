"""A DeepSpeed config (``ds_config.json``) read into a scenario, every key accounted for.

:func:`import_deepspeed` reads a config beside the other scenario inputs (a model, typed fields) and
gives the scenario it describes plus one :class:`Line` per key: what the config says, what it
resolves to and what the lab does with it. A typed field always wins over the config.

* **Elements, not bytes.** DeepSpeed's sizes (``reduce_bucket_size``, ``stage3_prefetch_bucket_size``
  …) count elements; each becomes bytes with the width it applies to, and the line shows the product.
* **Defaults.** A missing key takes DeepSpeed's documented default (:data:`DEEPSPEED`:
  ``deepspeed/runtime/zero/config.py``, ``runtime/constants.py``, ``runtime/precision_config.py``).
* **"auto".** The value the Hugging Face Trainer writes before DeepSpeed reads the file
  (:data:`TRANSFORMERS`, ``HfTrainerDeepSpeedConfig``): ``reduce_bucket_size`` = hidden²,
  ``stage3_prefetch_bucket_size`` = ⌊0.9 · hidden²⌋ and ``stage3_param_persistence_threshold`` =
  10 · hidden at stage 3, which need a model; the batch sizes and the precision come from the
  Trainer's own arguments, which the lab does not have: those stay *unresolved* and the lab's own
  input is used, said so in :attr:`DeepSpeedImport.unresolved`.
* **Refused.** What DeepSpeed itself refuses (an unknown key inside ``zero_optimization``, fp16 and
  bf16 both on, batch sizes that do not multiply out) raises :class:`DeepSpeedConfigError` naming
  the key. An unknown top-level key is only reported: DeepSpeed does not read it either.

* **Hierarchical partitioning.** ``zero_hpz_partition_size`` (ZeRO++ hpZ) is the scenario's ``hpz`` and
  ``mics_shard_size`` (MiCS) its ``shard_group``, both read at stage 3 only, as DeepSpeed reads them
  (:func:`_partitions` cites where).

Some keys change memory in ways the ledger does not model yet (quantized communication, a partial
offload ratio): their lines say ``not modelled`` and what the ledger counts instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from app.ledger.arithmetic import n
from app.ledger.scenario import Scenario, ScenarioError, parse_scenario

__all__ = [
    "DEEPSPEED",
    "TRANSFORMERS",
    "DeepSpeedConfigError",
    "DeepSpeedImport",
    "Line",
    "import_deepspeed",
]

DEEPSPEED = "DeepSpeed 0.19.8"  # whose documented defaults a missing key takes
TRANSFORMERS = "transformers 5.23.0"  # whose Trainer resolves "auto"
ELEMENTS_MAX = 2**63 - 1  # sys.maxsize: DeepSpeed's own largest default (stage3_model_persistence_threshold)

Status = Literal["sets", "checked", "no memory effect", "not modelled", "ignored", "unresolved"]


class DeepSpeedConfigError(ValueError):
    """A key DeepSpeed would refuse, or a value the lab cannot read: ``key`` is its dotted path."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}")


@dataclass(frozen=True, slots=True)
class Line:
    """One key of the config: its dotted path, what the file says (``absent`` when DeepSpeed's default
    applies), what the lab does with it, and how (``status``)."""

    key: str
    written: str
    effect: str
    status: Status


@dataclass(frozen=True, slots=True)
class DeepSpeedImport:
    scenario: Scenario
    lines: tuple[Line, ...]
    unresolved: tuple[str, ...]  # the keys whose "auto" the lab could not resolve, each with what it used
    origin: Mapping[str, str]  # scenario field -> the config key that set it (for messages about the field)


# --------------------------------------------------------------------------- reading values


def _shown(value: object) -> str:
    if value is None:
        return "absent"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return n(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return f'"{value[:40]}"'
    return "{…}" if isinstance(value, Mapping) else "[…]"


def _bool(key: str, value: object, default: bool) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise DeepSpeedConfigError(key, f"must be true or false, not {_shown(value)}")
    return value


def _elements(key: str, value: object, default: int | None = None, *, low: int = 0) -> int | None:
    """A count of elements: an integer, or a float with no fraction (JSON's 5e8); None when absent
    (or "auto", which the caller resolves)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DeepSpeedConfigError(key, f'must be a whole number of elements or "auto", not {_shown(value)}')
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise DeepSpeedConfigError(key, f"must be a whole number, not {_shown(value)}")
    number = int(value)
    if not low <= number <= ELEMENTS_MAX:
        raise DeepSpeedConfigError(key, f"must be between {n(low)} and {n(ELEMENTS_MAX)}, not {_shown(value)}")
    return number


def _section(config: Mapping[str, object], key: str, path: str) -> Mapping[str, object]:
    value = config.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DeepSpeedConfigError(path, f"must be an object, not {_shown(value)}")
    return value


# --------------------------------------------------------------------------- the keys


# zero_optimization's keys and the other spelling DeepSpeed accepts for each (its pydantic aliases).
_ZERO_ALIASES = {
    "stage3_prefetch_bucket_size": "prefetch_bucket_size",
    "stage3_param_persistence_threshold": "param_persistence_threshold",
    "stage3_model_persistence_threshold": "model_persistence_threshold",
    "stage3_max_live_parameters": "max_live_parameters",
    "stage3_max_reuse_distance": "max_reuse_distance",
    "stage3_gather_16bit_weights_on_model_save": "gather_16bit_weights_on_model_save",
    "stage3_module_granularity_threshold": "module_granularity_threshold",
    "stage3_use_all_reduce_for_fetch_params": "use_all_reduce_for_fetch_params",
    "stage3_allgather_sequential": "allgather_sequential",
}
# zero_optimization keys with no effect on a rank's memory (scheduling, checks, logging, checkpoints).
_ZERO_NO_MEMORY_EFFECT = {
    "reduce_scatter": "reduce-scatter (true) or reduce: the same gradient bytes",
    "allgather_partitions": "all-gather (true) or broadcasts for the updated parameters: the same bytes",
    "use_multi_rank_bucket_allreduce": "how buckets are combined across ranks",
    "load_from_fp32_weights": "what a checkpoint load initialises from",
    "elastic_checkpoint": "a legacy checkpoint format",
    "ignore_unused_parameters": "an error check (stage 2)",
    "legacy_stage1": "the old stage-1 code path",
    "round_robin_gradients": "how offloaded gradients are copied (stages 1 and 2)",
    "memory_efficient_linear": "the linear layers' autograd function under stage 3",
    "override_module_apply": "stage 3's module.apply hook",
    "log_trace_cache_warnings": "logging",
    "enable_sanity_checks": "debug checks",
    "pipeline_loading_checkpoint": "checkpoint loading under pipeline parallelism",
    "stage3_module_granularity_threshold": "which small modules are fetched as one",
    "stage3_use_all_reduce_for_fetch_params": "the collective that fetches parameters",
    "stage3_allgather_sequential": "all-gathers one parameter at a time instead of a flat bucket",
    "mics_hierarchical_params_gather": "MiCS's two-level parameter all-gather (mics.py, "
    "MiCS_Init._hierarchical_all_gather_params): the same bytes gathered",
    "leaf_module": "modules fetched whole",
    "zenflow": "ZenFlow's asynchronous update",
    "save_muon_momentum_buffer_in_memory": "NVMe swapping of Muon's momentum",
    "cpu_offload_use_pin_memory": "deprecated: pinning of offloaded buffers",
    "stage3_partition_stream_chunk_size": "zero.Init's streaming partition",
    "compute_grad_norm": "whether the step computes the gradient norm",
    "parameter_alignment": "partition alignment",
}
_ZERO_HANDLED = frozenset(
    {
        "stage",
        "contiguous_gradients",
        "overlap_comm",
        "reduce_bucket_size",
        "allgather_bucket_size",
        "stage3_prefetch_bucket_size",
        "stage3_param_persistence_threshold",
        "stage3_model_persistence_threshold",
        "stage3_max_live_parameters",
        "stage3_max_reuse_distance",
        "stage3_gather_16bit_weights_on_model_save",
        "stage3_gather_fp16_weights_on_model_save",
        "sub_group_size",
        "offload_optimizer",
        "offload_param",
        "cpu_offload",
        "cpu_offload_param",
        "zero_hpz_partition_size",
        "mics_shard_size",
        "zero_quantized_weights",
        "zero_quantized_nontrainable_weights",
        "zero_quantized_gradients",
        "zeropp_loco_param",
    }
)
# Top-level keys with no effect on a rank's memory.
_TOP_NO_MEMORY_EFFECT = {
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
_TOP_HANDLED = frozenset(
    {
        "zero_optimization",
        "fp16",
        "bf16",
        "bfloat16",
        "optimizer",
        "train_batch_size",
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "activation_checkpointing",
        "communication_data_type",
        "data_types",
    }
)

# optimizer.type (DeepSpeed's own names, matched lower-cased) -> FP32 state tensors per parameter.
_OPTIMIZER_STATES = {"adam": 2, "adamw": 2, "lamb": 2, "adagrad": 1, "lion": 1}
_REMOVED_OPTIMIZERS = ("onebitadam", "zerooneadam", "onebitlamb")
_WIDTHS = {"fp32": 4, "fp16": 2, "bf16": 2}
# DeepSpeed 0.19.8's precision_config.py: the keys each section declares (it forbids any other).
_FP16_KEYS = frozenset(
    {
        "auto_cast",
        "loss_scale",
        "initial_scale_power",
        "loss_scale_window",
        "hysteresis",
        "consecutive_hysteresis",
        "min_loss_scale",
        "fp16_master_weights_and_grads",
    }
)
_BF16_KEYS = frozenset(
    {"immediate_grad_update", "check_grad_overflow", "bf16_master_weights_and_grads", "bf16_optimizer_states"}
)
_LOW_PRECISION_MASTER = frozenset(
    {"fp16_master_weights_and_grads", "bf16_master_weights_and_grads", "bf16_optimizer_states"}
)


@dataclass
class _Reader:
    """The state of one import: the fields the config sets, its lines, and what stayed unresolved."""

    typed: frozenset[str]
    fields: dict[str, int | str] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    lines: list[Line] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)

    def line(self, key: str, written: object, effect: str, status: Status) -> None:
        self.lines.append(Line(key, _shown(written), effect, status))

    def set(self, key: str, written: object, name: str, value: int | str, why: str) -> None:
        """The config sets scenario field ``name`` (unless the user typed it)."""
        if name in self.typed:
            self.line(key, written, f"{why}; {name} was typed, and the typed value is kept", "checked")
            return
        self.fields[name] = value
        self.origin[name] = key
        self.line(key, written, f"{name} = {value if isinstance(value, str) else n(value)}: {why}", "sets")

    def unresolved_auto(self, key: str, needs: str) -> None:
        self.unresolved.append(f"{key}: {needs}")
        self.line(key, "auto", needs, "unresolved")


def _precision(r: _Reader, config: Mapping[str, object], stage: int) -> tuple[bool | None, str]:
    """fp16 / bf16: the widths of parameters, gradients and the master copy. Returns (mixed, name):
    mixed is None when both are "auto" (the Trainer's --fp16 / --bf16 decide)."""
    fp16 = _section(config, "fp16", "fp16")
    bf16_key = "bf16" if "bf16" in config or "bfloat16" not in config else "bfloat16"
    bf16 = _section(config, bf16_key, bf16_key)
    enabled: dict[str, bool | None] = {}
    for name, section in (("fp16", fp16), (bf16_key, bf16)):
        raw = section.get("enabled")
        enabled[name] = None if raw == "auto" else _bool(f"{name}.enabled", raw, False)
        for key in section:
            if key == "enabled":
                continue
            path = f"{name}.{key}"
            if key not in (_FP16_KEYS if name == "fp16" else _BF16_KEYS):
                raise DeepSpeedConfigError(path, f"not a key of {name} in {DEEPSPEED} (DeepSpeed refuses unknown keys)")
            if key in _LOW_PRECISION_MASTER and section[key] is True:
                r.line(
                    path,
                    True,
                    "16-bit master weights or optimizer states: not modelled (the lab's master and "
                    "optimizer widths are 4, 8 or 0; set master_bytes and opt_bytes by hand)",
                    "not modelled",
                )
            else:
                r.line(
                    path,
                    section[key],
                    "loss scaling, casting and overflow checks: no memory effect",
                    "no memory effect",
                )
    on = [name for name, value in enabled.items() if value]
    if len(on) == 2:
        raise DeepSpeedConfigError("bf16.enabled", "fp16 and bf16 cannot both be enabled (DeepSpeed refuses it)")
    if on:
        mixed, name = True, on[0]
    elif None in enabled.values():
        mixed, name = None, "fp16 or bf16"
    else:
        mixed, name = False, "fp32"
    grad_accum = _section(config, "data_types", "data_types").get("grad_accum_dtype")
    if grad_accum is not None and (not isinstance(grad_accum, str) or grad_accum not in _WIDTHS):
        raise DeepSpeedConfigError(
            "data_types.grad_accum_dtype", f'must be "fp32", "fp16" or "bf16", not {_shown(grad_accum)}'
        )
    if mixed is None:
        r.unresolved_auto(
            "fp16.enabled / bf16.enabled",
            "the Trainer's --fp16 or --bf16 decides (neither: FP32); the lab keeps its widths (16-bit parameters "
            "and gradients, an FP32 master: what either flag gives)",
        )
        return None, name
    width = 2 if mixed else 4
    key = f"{name}.enabled" if mixed else "fp16.enabled, bf16.enabled"
    r.set(key, mixed, "param_bytes", width, f"{'16-bit' if mixed else 'FP32'} model parameters ({width} B)")
    r.set(
        key,
        mixed,
        "master_bytes",
        4 if mixed else 0,
        "an FP32 master copy beside the 16-bit parameters" if mixed else "FP32 parameters are their own master",
    )
    if grad_accum is not None:
        r.set(
            "data_types.grad_accum_dtype",
            grad_accum,
            "grad_bytes",
            _WIDTHS[str(grad_accum)],
            "gradients accumulate in this type",
        )
    else:
        r.set(key, mixed, "grad_bytes", width, "gradients in the model's type (data_types.grad_accum_dtype absent)")
    if config.get("communication_data_type") is None and grad_accum is not None and _WIDTHS[str(grad_accum)] != width:
        r.set(
            key,
            mixed,
            "reduce_bytes",
            width,
            "DeepSpeed reduces in the model's type unless "
            "communication_data_type says otherwise (not in the accumulation type)",
        )
    return mixed, name


def _optimizer(r: _Reader, config: Mapping[str, object]) -> None:
    section = _section(config, "optimizer", "optimizer")
    if not section:
        r.line(
            "optimizer",
            None,
            "the training script's optimizer (the Hugging Face Trainer's AdamW by "
            "default); the lab keeps opt_states and opt_bytes as they are",
            "checked",
        )
        return
    kind = section.get("type")
    if not isinstance(kind, str) or not kind:
        raise DeepSpeedConfigError("optimizer.type", f"must name the optimizer, not {_shown(kind)}")
    lowered = kind.lower()
    params = section.get("params", {})
    if not isinstance(params, Mapping):
        raise DeepSpeedConfigError("optimizer.params", f"must be an object, not {_shown(params)}")
    if lowered in _REMOVED_OPTIMIZERS:
        raise DeepSpeedConfigError("optimizer.type", f"{kind} was removed in {DEEPSPEED} (and ZeRO never allowed it)")
    if lowered in _OPTIMIZER_STATES:
        states = _OPTIMIZER_STATES[lowered]
        why = {2: "first and second moments", 1: "one moment"}[states]
    elif kind == "SGD":  # any other name is torch.optim's, case and all
        momentum = params.get("momentum", 0)
        if isinstance(momentum, bool) or not isinstance(momentum, int | float):
            raise DeepSpeedConfigError("optimizer.params.momentum", f"must be a number, not {_shown(momentum)}")
        states = 1 if momentum else 0
        why = "a momentum buffer" if momentum else "no state without momentum"
    else:
        raise DeepSpeedConfigError(
            "optimizer.type",
            f"{kind!r} is not an optimizer the lab knows the state of (Adam, AdamW, Lamb, Adagrad, Lion, SGD; "
            "Muon keeps 1 state for its matrices and Adam's 2 for the rest); set opt_states by hand and leave the "
            "optimizer section out",
        )
    r.set("optimizer.type", kind, "opt_states", states, f"{kind} keeps {why} per parameter")
    r.set("optimizer.type", kind, "opt_bytes", 4, "DeepSpeed keeps optimizer state in FP32")
    for key in params:
        r.line(f"optimizer.params.{key}", params[key], "a hyperparameter: no memory effect", "no memory effect")


def _batch(r: _Reader, config: Mapping[str, object], dp: int) -> None:
    """train_batch_size = micro batch × gradient accumulation × D, resolved as DeepSpeed resolves them
    (``DeepSpeedConfig._set_batch_related_parameters``: the missing one from the other two; D is the
    data-parallel world size, the scenario's dp)."""
    keys = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
    raw = {key: config.get(key) for key in keys}
    auto = {key for key, value in raw.items() if value == "auto"}
    train, micro, accum = (None if key in auto else _elements(key, raw[key], low=1) for key in keys)
    if train is not None and micro is None and "train_micro_batch_size_per_gpu" not in auto:
        micro = train // dp // (accum or 1)
        r.line(
            "train_batch_size",
            train,
            f"micro batch = ⌊{n(train)} ÷ D {n(dp)} ÷ {n(accum or 1)}⌋ = {n(micro)} (DeepSpeed's own resolution)",
            "checked",
        )
    elif train is not None and accum is None and micro is not None and "gradient_accumulation_steps" not in auto:
        accum = train // micro // dp
    if train is not None and micro is not None and accum is None and "gradient_accumulation_steps" not in auto:
        accum = 1  # DeepSpeed's resolution from train_batch_size alone
    if train is not None and micro is not None and accum is not None and (micro < 1 or train != micro * accum * dp):
        raise DeepSpeedConfigError(
            "train_batch_size",
            f"{n(train)} is not micro batch × gradient accumulation × D = {n(micro)} × {n(accum)} × {n(dp)} "
            f"= {n(micro * accum * dp)} (DeepSpeed refuses it; D is the scenario's dp)",
        )
    if train is not None or "train_batch_size" in auto:
        r.line(
            "train_batch_size",
            raw["train_batch_size"],
            "micro batch × gradient accumulation × D: checked, no memory effect of its own",
            "checked",
        )
    if "train_micro_batch_size_per_gpu" in auto:
        r.unresolved_auto(
            "train_micro_batch_size_per_gpu",
            "the Trainer's --per_device_train_batch_size; the lab uses its micro_batch input",
        )
    elif micro is not None:
        r.set(
            "train_micro_batch_size_per_gpu",
            raw["train_micro_batch_size_per_gpu"],
            "micro_batch",
            micro,
            "sequences per micro batch on one rank",
        )
    elif train is None and "train_batch_size" not in auto:
        r.line(
            "train_micro_batch_size_per_gpu",
            None,
            "DeepSpeed needs it or train_batch_size; the lab uses its micro_batch input",
            "checked",
        )
    if "gradient_accumulation_steps" in auto:
        r.unresolved_auto(
            "gradient_accumulation_steps", "the Trainer's --gradient_accumulation_steps; no effect on the per-rank peak"
        )
    elif accum is not None:
        r.line(
            "gradient_accumulation_steps",
            raw["gradient_accumulation_steps"],
            f"{n(accum)}: no effect on the "
            "per-rank peak (gradients are held between micro batches at every stage); the communication table is "
            f"one micro batch's, and ZeRO-2 and 3 reduce-scatter every micro batch: × {n(accum)} per optimizer "
            "step",
            "checked",
        )


def _activation_checkpointing(r: _Reader, config: Mapping[str, object]) -> None:
    section = _section(config, "activation_checkpointing", "activation_checkpointing")
    if "activation_checkpointing" not in config:
        return
    r.set(
        "activation_checkpointing",
        section,
        "act_policy",
        "full",
        "the section configures deepspeed.checkpointing, which models use to checkpoint each layer; "
        "the lab takes it as full recomputation",
    )
    for key, value in section.items():
        path = f"activation_checkpointing.{key}"
        if key in (
            "partition_activations",
            "cpu_checkpointing",
            "contiguous_memory_optimization",
            "synchronize_checkpoint_boundary",
            "profile",
        ):
            on = _bool(path, value, False)
            if on and key == "partition_activations":
                r.line(
                    path,
                    value,
                    "splits each checkpointed input across the tensor-parallel ranks: not modelled "
                    "(the lab keeps whole inputs; set sequence_parallel for Megatron's split)",
                    "not modelled",
                )
            elif on and key == "cpu_checkpointing":
                r.line(
                    path,
                    value,
                    "moves checkpointed inputs to host memory: not modelled (the lab keeps them on the device)",
                    "not modelled",
                )
            else:
                r.line(path, value, "no memory effect in the lab's model", "no memory effect")
        elif key == "number_checkpoints":
            _elements(path, value, low=0)
            r.line(path, value, "used only with contiguous_memory_optimization: no memory effect", "no memory effect")
        else:
            raise DeepSpeedConfigError(path, f"not a key of activation_checkpointing in {DEEPSPEED}")


# Offload sub-keys: what the host ledger takes from DeepSpeed's defaults instead (the lab has no input for them).
# The sizes the host ledger takes from DeepSpeed's defaults (offload_config.py).
_OFFLOAD_DEFAULTS: dict[str, dict[str, int]] = {
    "offload_optimizer": {"buffer_count": 4},
    "offload_param": {"buffer_count": 5, "buffer_size": 100_000_000, "max_in_cpu": 1_000_000_000},
}
_OFFLOAD_DETAIL = {
    "pin_memory": "pinned or not, the bytes are the same (pinning copies once, briefly)",
    "buffer_count": "the swap buffers' count: the host ledger takes DeepSpeed's default (4 optimizer, 5 parameter)",
    "buffer_size": "the parameter swap buffers' elements: the host ledger takes DeepSpeed's default (10⁸)",
    "max_in_cpu": "parameters kept in CPU memory under NVMe offload: not modelled",
    "nvme_path": "where the NVMe files live: no memory effect",
    "pipeline_read": "overlapped NVMe reads: no memory effect in the lab's model",
    "pipeline_write": "overlapped NVMe writes: no memory effect in the lab's model",
    "fast_init": "NVMe initialisation: no memory effect",
    "ratio": "a partial optimizer offload: not modelled (the lab offloads all of it or none)",
    "super_offload": "SuperOffload's scheduling: not modelled",
    "cpuadam_cores_perc": "CPU Adam's threads: no memory effect",
}


def _offload(r: _Reader, zero: Mapping[str, object], stage: int) -> None:
    """offload_optimizer and offload_param: the scenario's offload inputs (the host ledger counts them)."""
    for key, what in (
        ("offload_optimizer", "the FP32 master, the optimizer states and the FP32 gradient partition"),
        ("offload_param", "stage 3's parameter partitions"),
    ):
        section = zero.get(key)
        path = f"zero_optimization.{key}"
        if section is None:
            continue
        if not isinstance(section, Mapping):
            raise DeepSpeedConfigError(path, f"must be an object, not {_shown(section)}")
        device = section.get("device", "none")
        if device not in ("none", "cpu", "nvme"):
            raise DeepSpeedConfigError(f"{path}.device", f'must be "none", "cpu" or "nvme", not {_shown(device)}')
        where = "stays on the device" if device == "none" else f"moves {what} to {device} (the host ledger)"
        if key == "offload_param" and stage != 3 and device != "none":
            where = f"read only at stage 3 (this is stage {stage}); kept for the comparison's stage 3"
        r.set(f"{path}.device", device, key, str(device), where)
        for sub in section:
            if sub == "device":
                continue
            note = _OFFLOAD_DETAIL.get(sub)
            if note is None:
                raise DeepSpeedConfigError(f"{path}.{sub}", f"not a key of {key} in {DEEPSPEED}")
            status: Status = "not modelled" if "not modelled" in note else "no memory effect"
            value = section[sub]
            if sub == "ratio":
                ratio = value if isinstance(value, int | float) and not isinstance(value, bool) else None
                if ratio is None or not 0 <= ratio <= 1:
                    raise DeepSpeedConfigError(f"{path}.ratio", f"must be a number from 0 to 1, not {_shown(value)}")
                if ratio < 1 and stage != 3:
                    raise DeepSpeedConfigError(f"{path}.ratio", "a partial offload is stage 3's (DeepSpeed refuses it)")
                if ratio == 1:  # the whole optimizer: what the host ledger counts
                    note, status = "the whole optimizer is offloaded, as the host ledger counts it", "checked"
            elif sub in _OFFLOAD_DEFAULTS[key]:
                default = _OFFLOAD_DEFAULTS[key][sub]
                given = _elements(f"{path}.{sub}", value, default)
                if given == default:
                    note, status = f"DeepSpeed's default ({default:,}), as the host ledger counts it", "checked"
                else:
                    note = (
                        f"{given:,}, not DeepSpeed's default {default:,}: not modelled (the host ledger's swap "
                        "buffers take the default)"
                    )
                    status = "not modelled"
            r.line(f"{path}.{sub}", value, note, status)
    for key, new in (("cpu_offload", "offload_optimizer"), ("cpu_offload_param", "offload_param")):
        if _bool(f"zero_optimization.{key}", zero.get(key), False):
            r.set(f"zero_optimization.{key}", True, new, "cpu", f"deprecated spelling of {new}.device = cpu")


def _zero(r: _Reader, config: Mapping[str, object]) -> int:
    """zero_optimization's keys that need no model or width; returns the stage."""
    raw = config.get("zero_optimization")
    if isinstance(raw, bool):  # DeepSpeed's deprecated form: true is stage 1
        zero: Mapping[str, object] = {"stage": 1 if raw else 0}
    else:
        zero = _section(config, "zero_optimization", "zero_optimization")
    for key in zero:
        canonical = next((long for long, short in _ZERO_ALIASES.items() if key == short), key)
        if canonical not in _ZERO_HANDLED and canonical not in _ZERO_NO_MEMORY_EFFECT:
            where = " (it is a top-level section)" if key == "aio" else ""
            raise DeepSpeedConfigError(
                f"zero_optimization.{key}",
                f"not a key of zero_optimization in {DEEPSPEED}{where}; DeepSpeed refuses unknown keys there",
            )
        if canonical in _ZERO_NO_MEMORY_EFFECT:
            r.line(
                f"zero_optimization.{key}",
                zero[key],
                _ZERO_NO_MEMORY_EFFECT[canonical] + ": no memory effect",
                "no memory effect",
            )
    stage_raw = zero.get("stage", 0)
    stages = (0, 1, 2, 3)
    if isinstance(stage_raw, bool) or stage_raw not in stages:
        raise DeepSpeedConfigError("zero_optimization.stage", f"must be 0, 1, 2 or 3, not {_shown(stage_raw)}")
    stage = stages.index(stage_raw)
    r.set(
        "zero_optimization.stage",
        zero.get("stage"),
        "stage",
        stage,
        "the stage the run uses (the comparison shows all four)",
    )
    _offload(r, zero, stage)
    for key in ("zero_quantized_weights", "zero_quantized_nontrainable_weights", "zero_quantized_gradients"):
        if _bool(f"zero_optimization.{key}", zero.get(key), False):
            r.line(
                f"zero_optimization.{key}",
                True,
                "quantized communication (ZeRO++): not modelled — the lab "
                "counts the all-gather and reduce-scatter in their full widths",
                "not modelled",
            )
    if zero.get("zeropp_loco_param") is not None:
        r.line(
            "zero_optimization.zeropp_loco_param",
            zero["zeropp_loco_param"],
            "LoCo error feedback buffers: not modelled",
            "not modelled",
        )
    return stage


_HPZ = "zero_optimization.zero_hpz_partition_size"
_MICS = "zero_optimization.mics_shard_size"


def _ranks(key: str, value: object, default: int, low: int) -> int:
    """A count of ranks (DeepSpeed's pydantic int: a JSON 8.0 reads as 8; no "auto" for these keys)."""
    if isinstance(value, str):
        raise DeepSpeedConfigError(key, f"must be a whole number of ranks, not {_shown(value)}")
    got = _elements(key, value, default, low=low)
    assert got is not None
    return got


def _partitions(r: _Reader, config: Mapping[str, object], stage: int, s: Scenario, at: int) -> None:
    """``zero_hpz_partition_size`` → ``hpz`` and ``mics_shard_size`` → ``shard_group``, as DeepSpeed reads them.

    Both are stage 3's: ``engine.py``'s ``DeepSpeedEngine._configure_zero_optimizer`` hands
    ``zero_hpz_partition_size`` to ``DeepSpeedZeroOptimizer_Stage3`` alone and builds ``MiCS_Optimizer``
    (``_return_mics_optimizer``) when ``mics_shard_size`` > 0 at stage 3 only; stages 1–2's
    ``DeepSpeedZeroOptimizer`` takes neither, so there DeepSpeed shards over all D (the lines say
    ``ignored`` and the scenario takes hpz 1, shard_group D). hpZ is on above 1 (``zero/config.py``:
    ``Field(1, ge=0)``; ``partition_parameters.py``, ``Init.__init__``: ``zero_hpz_partition_size > 1``),
    MiCS above 0 (``Field(-1)``, no bound; ``engine.py``: ``mics_shard_size > 0``). A size must divide D,
    as the lab's own hpz and shard_group inputs must (DeepSpeed asserts it divides the world size:
    ``utils/groups.py``, ``_create_zero_param_parallel_group``; ``zero/mics_utils.py``,
    ``_generate_mics_config``). DeepSpeed does not refuse the two together, but mixes them:
    ``_return_mics_optimizer`` does not pass ``zero_hpz_partition_size`` (the optimizer's default 1) while
    ``MiCS_Init``, a ``zero.Init``, still builds hpZ's group from the config; the lab refuses the pair, as
    it does not model them together. ``_validate_zero3_moe_compatibility`` refuses both with ZeRO-3's MoE (AutoEP),
    so with ep > 1 the lab refuses them too. The lines go at ``at``, beside the other zero_optimization keys.
    """
    raw = config.get("zero_optimization")
    zero: Mapping[str, object] = raw if isinstance(raw, Mapping) else {}
    hpz_raw, mics_raw = zero.get("zero_hpz_partition_size"), zero.get("mics_shard_size")
    hpz = _ranks(_HPZ, hpz_raw, 1, 0)
    mics = _ranks(_MICS, mics_raw, -1, -ELEMENTS_MAX - 1)
    dp = s.dp
    sub = _Reader(r.typed, r.fields, r.origin)  # shares the fields; its lines are spliced in at `at`
    if stage != 3:
        for key, written, name, default in ((_HPZ, hpz_raw, "hpz", 1), (_MICS, mics_raw, "shard_group", dp)):
            if written is not None:
                kept = f"; {name} was typed, and the typed value is kept" if name in r.typed else ""
                sub.line(
                    key,
                    written,
                    f"read only at stage 3 (this is stage {stage}: DeepSpeedZeroOptimizer takes no such partition, "
                    f"engine.py _configure_zero_optimizer), so DeepSpeed shards over all D{kept}",
                    "ignored",
                )
                if name not in r.typed and getattr(s, name) != default:
                    sub.fields[name] = default  # DeepSpeed's layout below stage 3: one partition over D
                    sub.origin[name] = key
            elif name not in r.typed and getattr(s, name) != default:
                sub.set(key, None, name, default, "below stage 3 DeepSpeed has no such partition: one over all D")
        r.lines[at:at] = sub.lines
        return
    hpz_on, mics_on = hpz > 1, mics > 0
    if hpz_on and mics_on and not {"hpz", "shard_group"} & r.typed:  # a typed one: the lab's own rule
        raise DeepSpeedConfigError(
            _HPZ,
            f"{n(hpz)} with mics_shard_size {n(mics)}: ZeRO++'s secondary partition and MiCS together are not "
            "modelled (the lab does not take hpz with a shard group); DeepSpeed mixes them: "
            "_return_mics_optimizer drops zero_hpz_partition_size while MiCS_Init still builds hpZ's group",
        )
    for key, on, size, name in ((_HPZ, hpz_on, hpz, "hpz"), (_MICS, mics_on, mics, "shard_group")):
        if on and name not in r.typed:
            if dp % size:
                where = (
                    "groups._create_zero_param_parallel_group" if name == "hpz" else "mics_utils._generate_mics_config"
                )
                raise DeepSpeedConfigError(
                    key,
                    f"{n(size)} does not divide D = {n(dp)} (as the lab's {name} must; DeepSpeed asserts it divides "
                    f"the world size: {where})",
                )
            if s.ep > 1:
                raise DeepSpeedConfigError(
                    key,
                    f"{n(size)} with ep {n(s.ep)}: DeepSpeed refuses hpZ and MiCS with ZeRO-3's expert parallelism "
                    "(engine.py, _validate_zero3_moe_compatibility), and the lab does not model them together",
                )
    if hpz_raw is not None or ("hpz" not in r.typed and s.hpz != 1):
        why = (
            f"ZeRO++ hpZ: beside its ⌈N ÷ D {n(dp)}⌉ primary shard each rank keeps a secondary ⌈N ÷ {n(hpz)}⌉ of "
            f"the parameters (partition_parameters.py, Init._partition_param_sec), so backward all-gathers within "
            f"{n(hpz)} ranks ({n(dp // hpz)} group{'s' if dp // hpz > 1 else ''})"
            if hpz_on
            else "no secondary partition (DeepSpeed's default 1; hpZ is on above 1)"
        )
        sub.set(_HPZ, hpz_raw, "hpz", hpz if hpz_on else 1, why)
    if mics_raw is not None or ("shard_group" not in r.typed and s.shard_group != dp):
        groups = dp // mics if mics_on else 1
        if mics_on and mics < dp:
            why = (
                f"MiCS: state sharded over {n(mics)} ranks, replicated across {n(groups)} "
                f"group{'s' if groups > 1 else ''} (mics_utils.create_mics_comm_groups); gradients are "
                "reduce-scattered within the group, then all-reduced across groups (MiCS_Optimizer)"
            )
        elif mics_on:
            why = f"MiCS over one group of all D = {n(dp)} ranks: plain ZeRO-3's layout"
        else:
            why = "MiCS off (DeepSpeed's default -1; on above 0): state sharded over all D ranks"
        sub.set(_MICS, mics_raw, "shard_group", mics if mics_on else dp, why)
    r.lines[at:at] = sub.lines


def _get(zero: Mapping[str, object], key: str) -> object:
    """A zero_optimization key by its stage3_ name or DeepSpeed's other spelling."""
    return zero.get(key, zero.get(_ZERO_ALIASES.get(key, key)))


def _sized(r: _Reader, config: Mapping[str, object], s: Scenario, stage: int) -> None:
    """The keys that need widths, U or the model's hidden size: the buckets, prefetch and persistence."""
    raw = config.get("zero_optimization")
    zero: Mapping[str, object] = raw if isinstance(raw, Mapping) else {}
    md = s.model_defaults()
    hidden = md.model.architecture.hidden if md is not None else None

    def resolved(key: str, formula: Callable[[int], int], text: str, default: int) -> tuple[int | None, str]:
        """The key's elements and where they came from: the file, DeepSpeed's default when absent, or the
        Trainer's formula for "auto" (None: "auto" without a model, reported as unresolved)."""
        value = _get(zero, key)
        path = f"zero_optimization.{key}"
        if value != "auto":
            got = _elements(path, value, default)
            return got, "" if value is not None else f"{DEEPSPEED}'s default, {got:,} elements; "
        if hidden is None:
            r.unresolved_auto(path, f"the Trainer writes {text}, which needs a model (--model or --model-config)")
            return None, ""
        got = formula(hidden)
        return got, f"{TRANSFORMERS}'s Trainer writes {text} = {got:,} elements (hidden = {hidden:,}); "

    contiguous = _bool("zero_optimization.contiguous_gradients", zero.get("contiguous_gradients"), True)
    overlap = _bool("zero_optimization.overlap_comm", zero.get("overlap_comm"), stage == 3)
    offloaded = s.offload_optimizer != "none"
    reduce_bucket, source = resolved("reduce_bucket_size", lambda h: h * h, "hidden²", 500_000_000)
    key, written = "zero_optimization.reduce_bucket_size", _get(zero, "reduce_bucket_size")
    # BF16_Optimizer: bf16 with FP32 accumulation at stage 1, no offload (DeepSpeed's _do_optimizer_sanity_check)
    bf16_optimizer = stage == 1 and s.param_bytes == 2 and s.grad_bytes == 4 and not offloaded
    if stage == 0 or bf16_optimizer:
        if written is not None:
            why = "stage 0 all-reduces" if stage == 0 else "bf16 with FP32 accumulation runs DeepSpeed's BF16_Optimizer"
            r.line(key, written, f"{why} without ZeRO's gradient buckets: not read", "ignored")
    elif reduce_bucket is not None and not (contiguous or (offloaded and stage < 3)):
        r.line(key, written, "contiguous_gradients is false: no flat gradient bucket is allocated", "checked")
    elif reduce_bucket is not None:
        # DeepSpeed's flat buckets: stages 1–2 in the gradient-reduction type (the model's), two when
        # overlap_comm double-buffers (offload forces contiguous_gradients on); stage 3 one, in the
        # communication type (the reduce width).
        buffers = 2 if overlap and stage < 3 else 1
        width, which = (s.reduce_bytes, "reduce width") if stage == 3 else (s.param_bytes, "the model's type")
        total = buffers * reduce_bucket * width
        what = "two flat gradient buckets (overlap_comm double-buffers them)" if buffers == 2 else "one flat bucket"
        forced = "; offload turns contiguous_gradients on" if offloaded and stage < 3 and not contiguous else ""
        r.set(
            key,
            written,
            "bucket_bytes",
            total,
            f"{source}{buffers} × {reduce_bucket:,} elements × {width} B ({which}) = {total:,} B: {what}{forced}",
        )
    for flag, value in (("contiguous_gradients", contiguous), ("overlap_comm", overlap)):
        state = "true" if value else "false"
        text = state + ("" if zero.get(flag) is not None else f" ({DEEPSPEED}'s default at stage {stage})")
        r.line(f"zero_optimization.{flag}", zero.get(flag), f"{text}: read with reduce_bucket_size", "checked")
    allgather = _elements("zero_optimization.allgather_bucket_size", zero.get("allgather_bucket_size"), 500_000_000)
    if stage in (1, 2):
        r.line(
            "zero_optimization.allgather_bucket_size",
            zero.get("allgather_bucket_size"),
            f"the updated 16-bit partitions are all-gathered {allgather:,} elements at a time into the parameters "
            "after the step, outside the training peak: no separate bucket",
            "checked",
        )
    stage3_keys = (
        "stage3_prefetch_bucket_size",
        "stage3_param_persistence_threshold",
        "stage3_max_live_parameters",
        "stage3_max_reuse_distance",
        "stage3_model_persistence_threshold",
        "sub_group_size",
    )
    if stage != 3:
        for name in stage3_keys:
            if _get(zero, name) is not None:
                r.line(
                    f"zero_optimization.{name}",
                    _get(zero, name),
                    f"read only at stage 3 (this is stage {stage})",
                    "ignored",
                )
        _save_flag(r, zero)
        return
    prefetch, source = resolved("stage3_prefetch_bucket_size", lambda h: 9 * h * h // 10, "⌊0.9 · hidden²⌋", 50_000_000)
    if prefetch is not None:
        units = min(8, prefetch // s.unit_params) if s.unit_params else 0
        early = (prefetch - units * s.unit_params) * s.gather_bytes if units < 8 else 0
        r.set(
            "zero_optimization.stage3_prefetch_bucket_size",
            _get(zero, "stage3_prefetch_bucket_size"),
            "prefetch",
            units,
            f"{source}⌊{prefetch:,} elements ÷ U {s.unit_params:,}⌋ = {units} whole units ahead (the lab's "
            f"cap is 8); DeepSpeed prefetches parameter by parameter, so up to {early:,} B more of the next unit "
            "may be gathered early (not counted)",
        )
    threshold, source = resolved("stage3_param_persistence_threshold", lambda h: 10 * h, "10 · hidden", 100_000)
    if threshold is not None:
        _persistence(r, zero, s, threshold, source)
    live = _elements(
        "zero_optimization.stage3_max_live_parameters", _get(zero, "stage3_max_live_parameters"), 1_000_000_000
    )
    gathered = (1 + int(r.fields.get("prefetch", s.prefetch))) * s.unit_params
    over = (
        ""
        if live is None or gathered <= live
        else (": more than DeepSpeed keeps live, so DeepSpeed releases sooner than the ledger assumes (an over-count)")
    )
    r.line(
        "zero_optimization.stage3_max_live_parameters",
        _get(zero, "stage3_max_live_parameters"),
        f"{live or 0:,} elements; the ledger's gather holds (1 + P) × U = {gathered:,}{over}",
        "checked",
    )
    rows: tuple[tuple[str, str, Status], ...] = (
        (
            "stage3_max_reuse_distance",
            "keeps a parameter gathered if it is reused within this many elements: not "
            "modelled (the lab releases each unit after use)",
            "not modelled",
        ),
        (
            "stage3_model_persistence_threshold",
            "caps the unpartitioned parameters: read with the persistence threshold",
            "checked",
        ),
        (
            "sub_group_size",
            "the optimizer steps this many elements at a time; with NVMe offload its swap buffers hold 4 × "
            "the largest sub-group (the host ledger takes DeepSpeed's default, 10⁹ elements)",
            "checked",
        ),
    )
    for name, text, status in rows:
        setting = _get(zero, name)
        given = _elements(f"zero_optimization.{name}", setting)
        if name == "sub_group_size" and given not in (None, 1_000_000_000) and s.offload_optimizer == "nvme":
            text, status = (
                f"{given:,}, not DeepSpeed's default 10⁹: not modelled (the host ledger's optimizer swap "
                "buffers take the default)",
                "not modelled",
            )
        r.line(f"zero_optimization.{name}", setting, text, status)
    _save_flag(r, zero)


def _persistence(r: _Reader, zero: Mapping[str, object], s: Scenario, threshold: int, source: str) -> None:
    key = "zero_optimization.stage3_param_persistence_threshold"
    md = s.model_defaults()
    written = _get(zero, "stage3_param_persistence_threshold")
    if md is None:
        r.line(
            key,
            written,
            f"parameters under {threshold:,} elements stay whole on every rank: not modelled "
            "(the model's tensors are not known without a model)",
            "not modelled",
        )
        return
    cap = _elements(
        "zero_optimization.stage3_model_persistence_threshold",
        _get(zero, "stage3_model_persistence_threshold"),
        ELEMENTS_MAX,
    )
    assert cap is not None
    # Per unit, its grouped tensors (an expert kind is one entry with a count): bounded by the units, never the
    # millions of tensors of a large MoE one by one.
    small = [t for unit in md.model.inventory.units for t in unit.tensors if t.numel < threshold]
    elements = min(cap, sum(t.total for t in small))
    count = sum(t.count for t in small)
    extra = elements * s.param_bytes - -(-elements * s.param_bytes // s.dp)
    r.line(
        key,
        written,
        f"{source}{count:,} tensors under {threshold:,} elements ({elements:,} elements) stay whole on every rank: "
        f"not modelled — {elements:,} × {s.param_bytes} B − ⌈{elements:,} × {s.param_bytes} B ÷ D {s.dp:,}⌉ = "
        f"{extra:,} B more than the ledger's sharded parameters",
        "not modelled",
    )


def _save_flag(r: _Reader, zero: Mapping[str, object]) -> None:
    for key in ("stage3_gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save"):
        value = _get(zero, key)
        if value is not None:
            on = _bool(f"zero_optimization.{key}", value, False)
            r.line(
                f"zero_optimization.{key}",
                value,
                "consolidated 16-bit weights on save: the checkpoint section's full_params row"
                if on
                else "a sharded save: the checkpoint section's sharded row",
                "checked",
            )


def _top_level(r: _Reader, config: Mapping[str, object]) -> None:
    for key, value in config.items():
        if key in _TOP_HANDLED:
            continue
        if key in _TOP_NO_MEMORY_EFFECT:
            r.line(key, value, _TOP_NO_MEMORY_EFFECT[key] + ": no memory effect", "no memory effect")
        elif key in _TOP_NOT_MODELLED:
            r.line(key, value, _TOP_NOT_MODELLED[key], "not modelled")
        else:
            r.line(
                key or '""',  # an empty key, shown as one
                value,
                f"not a key {DEEPSPEED} reads (DeepSpeed ignores unknown top-level keys, and so does "
                "the lab): check its spelling",
                "ignored",
            )
    kind = config.get("communication_data_type")
    if kind is not None:
        if not isinstance(kind, str) or kind.lower() not in _WIDTHS:
            raise DeepSpeedConfigError(
                "communication_data_type", f'must be "fp32", "fp16" or "bf16", not {_shown(kind)}'
            )
        r.set(
            "communication_data_type", kind, "reduce_bytes", _WIDTHS[kind.lower()], "gradients are reduced in this type"
        )


# --------------------------------------------------------------------------- the import


def _parse(r: _Reader, inputs: Mapping[str, object]) -> Scenario:
    """The scenario so far; a field the config put out of its bounds is an error on the config's key."""
    try:
        return parse_scenario({**inputs, **r.fields})
    except ScenarioError as exc:
        for e in exc.errors:
            if e.field in r.origin:
                raise DeepSpeedConfigError(
                    r.origin[e.field], f"gives {e.field} = {r.fields[e.field]}: {e.message} (allowed: {e.allowed})"
                ) from exc
        raise


def import_deepspeed(
    config: Mapping[str, object], inputs: Mapping[str, object], typed: frozenset[str] | None = None
) -> DeepSpeedImport:
    """The scenario ``config`` describes, on top of ``inputs`` (raw scenario fields: a model, D …).

    ``typed`` names the fields the user typed, which the config never overrides (default: every
    field of ``inputs``). Raises :class:`DeepSpeedConfigError` for a key DeepSpeed would refuse or
    the lab cannot read (a field the config puts out of its bounds included), and ``ScenarioError``
    for a bad field among ``inputs``.
    """
    r = _Reader(frozenset(inputs) if typed is None else typed)
    stage = _zero(r, config)
    zero_end = len(r.lines)  # the partitioning lines go here, beside the other zero_optimization keys
    _precision(r, config, stage)
    _optimizer(r, config)
    _activation_checkpointing(r, config)
    _top_level(r, config)
    _partitions(r, config, stage, _parse(r, inputs), zero_end)
    _batch(r, config, _parse(r, inputs).dp)
    _sized(r, config, _parse(r, inputs), stage)
    final = _parse(r, inputs)
    return DeepSpeedImport(final, tuple(r.lines), tuple(r.unresolved), dict(r.origin))
