"""A scenario in the HF Trainer's own words: ``TrainingArguments`` with its FSDP2 ``fsdp_config``, with notes.

transformers 5.23.0 (``training_args.py``): ``fsdp=True`` with ``fsdp_config`` keys ``version`` (2: FSDP2),
``reshard_after_forward``, ``activation_checkpointing`` (the FSDP plugin's, preferred over the argument of the
same name under FSDP), ``auto_wrap_policy`` and ``cpu_offload``, handed to Accelerate's
``FullyShardedDataParallelPlugin``; ``bf16=True`` is Accelerate's ``mixed_precision="bf16"``. The notes name what
the Trainer cannot express or decides elsewhere (the sequence length is the data's, D the launcher's).
"""

from __future__ import annotations

from app.interop.snippet import Snippet
from app.ledger.models.trains import ALL_LINEAR, targets_of
from app.ledger.scenario import Scenario

__all__ = ["hf_trainer_snippet"]


def hf_trainer_snippet(s: Scenario) -> Snippet:
    """``TrainingArguments`` for the scenario's batch, precision, checkpointing and FSDP2 units."""
    notes: list[str] = []
    every = s.act_policy == "full" and s.ac_every > 1  # the model's own checkpointing, every N-th layer
    config = {
        "version": 2,
        "reshard_after_forward": bool(s.reshard_after_forward),
        "activation_checkpointing": _checkpointing(s, notes) and not every,
        "auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "cpu_offload": s.offload_optimizer == "cpu" and s.offload_param == "cpu",
        "state_dict_type": "FULL_STATE_DICT" if s.save_path == "full-rank0" else "SHARDED_STATE_DICT",
        "cpu_ram_efficient_loading": s.load_path == "rank0",
    }
    lines = [
        "from transformers import TrainingArguments",
        *_lora_lines(s),
        "",
        "args = TrainingArguments(",
        '    output_dir="out",',
        f"    per_device_train_batch_size={s.micro_batch},",
        f"    gradient_accumulation_steps={s.grad_accum},",
        *(
            ['    accelerator_config={"gradient_accumulation_kwargs": {"sync_each_batch": True}},  # grad_sync every']
            if s.grad_accum > 1 and s.grad_sync == "every"
            else []
        ),
        *(
            [
                "    activation_checkpointing=True,  # the model's own, every N-th decoder layer",
                f'    activation_checkpointing_kwargs={{"every_n_layers": {s.ac_every}}},',
            ]
            if every
            else []
        ),
        *(
            ["    use_liger_kernel=True,  # loss fused: Liger's lce_forward and fused linear cross-entropy"]
            if s.loss == "fused"
            else []
        ),
        f"    bf16={s.gather_bytes == 2},  # Accelerate's mixed_precision: BF16 all-gather and reduce-scatter",
        f'    optim="{"adamw_torch_fused" if s.optimizer_impl == "fused" else "adamw_torch"}",',
        "    fsdp=True,",
        "    fsdp_config={",
        *(f'        "{key}": {_python(value)},' for key, value in config.items()),
        "    },",
        ")",
        f"# launch on D = {s.dp:,} ranks, e.g. accelerate launch --num_processes {s.dp} train.py (or torchrun)",
        f"# sequence length {s.seq_len:,}: the data collator's / tokenizer's max_length, not an argument",
    ]
    if s.frozen_params and not s.lora_rank:
        notes.append(
            f"trainable_params {s.trainable_params:,} of {s.params:,}: what trains is the model's (PEFT's "
            "get_peft_model, or requires_grad_(False) on frozen modules), not a TrainingArguments setting"
            + _frozen_code(s)
        )
    if s.load_path == "partitioned":
        notes.append(
            "load_path partitioned: from_pretrained under FSDP2 loads whole models (every rank, or with "
            "cpu_ram_efficient_loading one per node); only DeepSpeed ZeRO-3's zero.Init loads partitioned"
        )
    _precision(s, notes)
    _choices(s, notes)
    return Snippet("\n".join(lines) + "\n", tuple(notes))


def _lora_lines(s: Scenario) -> list[str]:
    """PEFT's LoraConfig for the scenario's adapters, which the model takes before the Trainer does."""
    if not s.lora_rank:
        return []
    names = targets_of(s.lora_targets)
    targets = "None" if not names else _python(names[0]) if names == (ALL_LINEAR,) else repr(list(names))
    return [
        "from peft import LoraConfig",
        "",
        f"peft_config = LoraConfig(r={s.lora_rank}, target_modules={targets})",
        "# model = get_peft_model(model, peft_config) before the Trainer (or Trainer(..., peft_config=...) with TRL)",
        *_quant_lines(s),
    ]


def _quant_lines(s: Scenario) -> list[str]:
    """QLoRA's 4-bit base as from_pretrained takes it: NF4 stored in BF16 so that FSDP2 shards it."""
    if s.base_quant == "none":
        return []
    return [
        "",
        "import torch",
        "from transformers import BitsAndBytesConfig",
        "",
        'quantization_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", '
        f"bnb_4bit_use_double_quant={s.base_quant == 'nf4-dq'}, bnb_4bit_quant_storage=torch.bfloat16, "
        "bnb_4bit_compute_dtype=torch.bfloat16)",
        "# model = AutoModelForCausalLM.from_pretrained(..., quantization_config=quantization_config)",
    ]


def _python(value: object) -> str:
    """A value as Python source, strings in double quotes (as the rest of the snippet writes them)."""
    return f'"{value}"' if isinstance(value, str) else repr(value)


def _checkpointing(s: Scenario, notes: list[str]) -> bool:
    if s.act_policy in ("selective", "op"):
        notes.append(
            f"act_policy {s.act_policy}: the Trainer checkpoints whole decoder layers only "
            "(activation_checkpointing: True is full recomputation)"
        )
    return s.act_policy == "full"


def _precision(s: Scenario, notes: list[str]) -> None:
    if s.optimizer_impl == "for-loop":
        notes.append("optimizer_impl for-loop: adamw_torch runs torch's default, foreach on CUDA; one tensor at a "
                     'time needs optim_args="foreach=False"')  # fmt: skip
    if (s.param_bytes, s.grad_bytes, s.master_bytes, s.opt_bytes) != (4, 4, 0, 4):
        notes.append(
            "param_bytes, grad_bytes, master_bytes, opt_bytes: Accelerate 1.15.0 upcasts trainable parameters "
            "to FP32 before sharding under FSDP2 (FP32 parameters, gradients and AdamW states, no master copy)"
        )
    if s.gather_bytes == 2 and s.reduce_bytes != 2:
        notes.append(
            f"reduce_bytes {s.reduce_bytes}: bf16=True reduce-scatters in BF16 (set_mixed_precision); an FP32 "
            "reduction needs a MixedPrecisionPolicy in Accelerate's FSDP plugin, not a TrainingArguments key"
        )


def _choices(s: Scenario, notes: list[str]) -> None:
    """The choices the Trainer's and Accelerate's code fix."""
    if s.loss == "fused":
        notes.append("loss fused: use_liger_kernel=True (liger-kernel 0.8.5) also swaps in Liger's RMSNorm (norms "
                     "fused says what it keeps), RoPE and SwiGLU, whose MLP keeps one s·b·i tensor a layer less than "
                     "transformers' (the lab counts transformers' MLP: an over-count); for the fused loss alone, "
                     "apply_liger_kernel_to_<family>(model=model, rope=False, rms_norm=False, "
                     "swiglu=False)")  # fmt: skip
    elif s.loss != "inside":
        notes.append(f"loss {s.loss}: the Trainer calls model(**inputs) with labels (the loss inside the model); "
                     "computing it outside needs a compute_loss override")  # fmt: skip
    if s.wrap != "embed-tail":
        notes.append("wrap root: Accelerate carves the input embedding and [final norm, head] into units of their "
                     "own (embed-tail)")  # fmt: skip
    if s.norms == "fused":
        notes.append("norms fused: transformers' RMSNorm is eager ops (unfused); use_liger_kernel=True swaps in "
                     "Liger's fused kernels")  # fmt: skip
    if s.buffers != "none":
        notes.append("buffers rope-per-layer: transformers computes its rotary tables per forward (no cache)")
    if s.shard_group < s.dp or s.hpz > 1:
        notes.append("shard_group / hpz: HSDP is Accelerate's ParallelismConfig (dp_replicate_size, "
                     "dp_shard_size), not a TrainingArguments key")  # fmt: skip
    if s.tp > 1 or s.pp > 1 or s.ep > 1:
        notes.append("tp, pp, ep: not set by these arguments")
    if s.cp > 1:  # accelerate 1.15.0 parallelism_config.py: cp_size, FSDP over its dp_shard_cp mesh
        notes.append(f"cp {s.cp}: context parallelism is Accelerate's ParallelismConfig(cp_size={s.cp}) (its torch "
                     "backend, cp_comm_strategy allgather by default; FSDP over dp_shard_cp), not a TrainingArguments "
                     "key; not written")  # fmt: skip
    if s.keeps_units_gathered:
        notes.append("reshard_after_backward 0: the Trainer reshards after every backward (no argument keeps the "
                     "units gathered between micro batches)")  # fmt: skip
    if s.stage != 3:
        notes.append(f"stage {s.stage}: FSDP2 shards parameters (stage 3) whatever the scenario's stage")


# where transformers keeps a family's decoder layers (the rest: model.model.layers)
_LAYERS = {"gpt2": "model.transformer.h", "gpt_neox": "model.gpt_neox.layers"}


def _frozen_code(s: Scenario) -> str:
    """What freezes the scenario's modules before the Trainer wraps the model, as code (empty: nothing named)."""
    md = s.model_defaults()
    layers = _LAYERS.get(md.model.architecture.family, "model.model.layers") if md is not None else "model.model.layers"
    said = []
    if s.freeze_embed:
        said.append("model.get_input_embeddings().requires_grad_(False)")
        if md is not None and md.model.architecture.learned_positions:  # GPT-2's wpe belongs with its embedding
            said.append("model.transformer.wpe.requires_grad_(False)")
    if s.frozen_layers:
        said.append(f"for layer in {layers}[:{s.frozen_layers}]: layer.requires_grad_(False)")
    names = targets_of(s.frozen_modules)
    if names:
        listed = ", ".join(repr(name) for name in names)
        said.append(f"for layer in {layers}: [m.requires_grad_(False) for name, m in layer.named_modules() if "
                    f"name.rsplit('.', 1)[-1] in ({listed},)]")  # fmt: skip
    return f"; here: {'; '.join(said)}" if said else ""
