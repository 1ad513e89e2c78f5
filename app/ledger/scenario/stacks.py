"""The training stacks: for each, the choices it decides, the value it gives them and the evidence.

A stack is a named preset. A choice it decides (:data:`STACK_CHOICES`: where the loss runs, the FSDP units,
the precision layout) takes the stack's value when the scenario leaves it absent; typed, it wins, and the page
says which choices came from the stack. Each preset cites the code of the version it follows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import get_args

from app.ledger.bounds import TrainingStack
from app.ledger.models.architecture import ModelConfigError
from app.ledger.models.reference import resolve

STACKS: tuple[str, ...] = get_args(TrainingStack)


@dataclass(frozen=True, slots=True)
class Preset:
    """One choice a stack decides: its value there, and why (the project's code, with its version)."""

    value: str | int
    evidence: str


# The plain loop keeps the lab's seed layout (the article's): BF16 parameters and gradients beside an FP32 master
# copy and FP32 Adam states; the all-gather and reduce-scatter widths then follow the parameter and gradient ones.
_SEED = "the lab's seed layout (BF16 parameters and gradients, an FP32 master copy and FP32 Adam states)"
# Accelerate 1.15.0 with mixed_precision="bf16" under FSDP2.
_UPCAST = ("accelerate 1.15.0 fsdp2_prepare_model upcasts every trainable parameter to FP32 before sharding "
           "(param.data = param.data.to(torch.float32)): the sharded parameters, their gradients and AdamW's states "
           "are FP32, with no separate master copy")  # fmt: skip
_MIXED = ("accelerate 1.15.0 FullyShardedDataParallelPlugin.set_mixed_precision (utils/dataclasses.py): "
          "mixed_precision='bf16' gives MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16)")  # fmt: skip


# torchtitan 0.3.0 (models/llama3, distributed/, trainer.py, config/configs.py), as its llama3_8b registry config
# runs it.
_TT_PRECISION = ("torchtitan 0.3.0: the model is built in training.dtype = float32 (config/configs.py) and "
                 "apply_fsdp_to_decoder shards it (distributed/fsdp.py): FP32 sharded parameters, gradients and "
                 "AdamW states, no master copy")  # fmt: skip
_TT_MIXED = ("torchtitan 0.3.0 config/configs.py: mixed_precision_param = bfloat16, mixed_precision_reduce = "
             "float32 (the only value it allows) → MixedPrecisionPolicy(param_dtype=bf16, "
             "reduce_dtype=fp32)")  # fmt: skip
_NO_BUFFERS = ("the rotary tables are computed in each forward from an inv_freq buffer of head_dim ÷ 2 FP32 "
               "values (transformers' LlamaRotaryEmbedding; the lab's plain decoders alike): a few hundred bytes, "
               "not counted")  # fmt: skip
_UNFUSED = ("transformers 5.23.0 LlamaRMSNorm: hidden_states.to(torch.float32), pow, mean, rsqrt, then the weight "
            "times the normalised input cast back: eager PyTorch ops, no fused kernel")  # fmt: skip

_PRESETS: dict[str, dict[str, Preset]] = {
    "plain-fsdp2": {
        "loss": Preset(
            "outside",
            "a plain FSDP2 loop computes the loss on the logits the root module returns "
            "(loss = cross_entropy(model(tokens), labels)), as torchtitan's train step does",
        ),
        "wrap": Preset(
            "root",
            "FSDP2's documented recipe (torch.distributed.fsdp.fully_shard): fully_shard on each decoder layer, "
            "then on the model, whose root unit keeps the embedding, the final norm and the head",
        ),
        "param_bytes": Preset(2, _SEED),
        "grad_bytes": Preset(2, _SEED),
        "master_bytes": Preset(4, _SEED),
        "opt_bytes": Preset(4, _SEED),
        "act_policy": Preset("none", "a plain loop checkpoints nothing unless it wraps its layers itself"),
        "norms": Preset("unfused", "the lab's plain decoders write RMSNorm as transformers does: " + _UNFUSED),
        "gqa": Preset("native", "the lab's plain decoders call SDPA with is_causal and enable_gqa (no mask)"),
        "optimizer_impl": Preset(
            "for-loop",
            "the lab's seed loop steps AdamW one tensor at a time (torch.optim.AdamW(foreach=False)); torch 2.13's "
            "own default on CUDA is foreach (optimizer.py _default_to_fused_or_foreach, DTensor included): set "
            "optimizer_impl foreach for a loop that leaves it",
        ),
        "buffers": Preset("none", _NO_BUFFERS),
        "save_path": Preset(
            "sharded",
            "FSDP2's documented checkpointing (torch.distributed.checkpoint.save of the sharded state dict, torch "
            "2.13): each rank writes its own shards",
        ),
        "load_path": Preset(
            "partitioned",
            "FSDP2's deferred initialisation, which torchtitan follows: the model built under torch.device('meta') "
            "(torch 2.13 _fsdp_init.py keeps meta tensors on meta for it), fully_shard, then to_empty and each "
            "rank's shards loaded (torch.distributed.checkpoint.load); the lab's default before this input "
            "(zero_init 1)",
        ),
        "grad_sync": Preset(
            "every",
            "a plain loop calls backward per micro batch and never set_requires_gradient_sync(False): FSDP2's "
            "default (torch 2.13 FSDPModule, requires_gradient_sync True) reduce-scatters each micro batch",
        ),
    },
    "hf-fsdp2": {
        "loss": Preset(
            "inside",
            "transformers 5.23.0: the HF Trainer's compute_loss calls model(**inputs) with labels "
            "(trainer.py), and LlamaForCausalLM.forward computes self.loss_function(logits, labels) "
            "(ForCausalLMLoss, loss/loss_utils.py) inside the root FSDP module",
        ),
        "wrap": Preset(
            "embed-tail",
            "accelerate 1.15.0 fsdp2_prepare_model (utils/fsdp_utils.py): the transformer-based wrap on "
            "_no_split_modules, then fully_shard(input_embed) and fully_shard([final_norm, output_embed], "
            "reshard_after_forward=False) (tied: norm, embedding and head in that one unit), the root last",
        ),
        "param_bytes": Preset(4, _UPCAST),
        "grad_bytes": Preset(4, _UPCAST),
        "master_bytes": Preset(0, _UPCAST),
        "opt_bytes": Preset(4, _UPCAST),
        "gather_bytes": Preset(2, _MIXED),
        "reduce_bytes": Preset(2, _MIXED),
        "frozen_bytes": Preset(
            2,
            "accelerate 1.15.0 fsdp2_prepare_model upcasts only the parameters that train (if param.requires_grad "
            "and param.dtype != torch.float32): the frozen ones keep the checkpoint's BF16 (transformers 5.23.0 "
            "loads in it, dtype='auto')",
        ),
        "act_policy": Preset("none", "transformers 5.23.0 TrainingArguments.gradient_checkpointing defaults to False"),
        "norms": Preset("unfused", _UNFUSED),
        "gqa": Preset(
            "native",
            "transformers 5.23.0 integrations/sdpa_attention.py use_gqa_in_sdpa: enable_gqa when no mask is "
            "passed, as for an unpadded causal batch (the mask is skipped); a padded or packed batch expands",
        ),
        "optimizer_impl": Preset(
            "fused",
            "transformers 5.23.0 TrainingArguments.optim defaults to adamw_torch_fused with torch ≥ 2.8 "
            "(training_args.py): torch.optim.AdamW(fused=True)",
        ),
        "buffers": Preset("none", _NO_BUFFERS),
        "save_path": Preset(
            "full-rank0",
            "transformers 5.23.0 TrainingArguments (training_args.py): fsdp_config's state_dict_type defaults to "
            "FULL_STATE_DICT (Accelerate alone defaults to SHARDED_STATE_DICT under FSDP2); accelerate 1.15.0 "
            "save_fsdp_model, then save_fsdp_optimizer, gather full_state_dict with cpu_offload onto rank 0",
        ),
        "load_path": Preset(
            "every-rank",
            "transformers 5.23.0 TrainingArguments: fsdp_config's cpu_ram_efficient_loading defaults to false, so "
            "every rank's from_pretrained loads the whole model into host memory (modeling_utils.py puts it on the "
            "meta device only when cpu_ram_efficient_loading is on and LOCAL_RANK is not 0)",
        ),
        "grad_sync": Preset(
            "last",
            "transformers 5.23.0 Trainer._inner_training_loop runs every micro batch but the last under "
            "accelerator.no_sync (unless Accelerate's sync_each_batch), and accelerate 1.15.0 Accelerator.no_sync "
            "calls model.set_requires_gradient_sync(False) under FSDP2 (a model transformers sharded at load time "
            "alike, _defer_fsdp_gradient_reduction, but under HSDP there only the all-reduce across replicas waits: "
            "set grad_sync every for that run)",
        ),
    },
    "torchtitan": {
        "loss": Preset(
            "chunked",
            "torchtitan 0.3.0 trainer.py forward_backward_step: pred = model(inputs), then loss_fn(pred, labels) "
            "outside the model; its llama3 configs (models/llama3/config_registry.py) set loss = "
            "ChunkedLossWrapper.Config (components/loss.py, num_chunks 8): the head and the cross-entropy per slice "
            "of the sequence, the logits never whole",
        ),
        "wrap": Preset(
            "embed-tail",
            "torchtitan 0.3.0 distributed/fsdp.py apply_fsdp_to_decoder: fully_shard(tok_embeddings), "
            "fully_shard([norm, lm_head], reshard_after_forward=False) (the policy 'default'), each block, then the "
            "root (tied: embedding, norm and head in one unit)",
        ),
        "param_bytes": Preset(4, _TT_PRECISION),
        "grad_bytes": Preset(4, _TT_PRECISION),
        "master_bytes": Preset(0, _TT_PRECISION),
        "opt_bytes": Preset(4, _TT_PRECISION),
        "gather_bytes": Preset(2, _TT_MIXED),
        "reduce_bytes": Preset(4, _TT_MIXED),
        "act_policy": Preset(
            "op",
            "torchtitan 0.3.0 trainer.py: activation_checkpoint defaults to SelectiveAC (per-op; the llama3_8b "
            "config sets it too; 70B and 405B set FullAC): distributed/activation_checkpoint.py saves the outputs "
            "of compute-intensive ops, attention and reduce-scatter, recomputes every second matmul",
        ),
        "norms": Preset(
            "composite",
            "torchtitan 0.3.0 models/common/nn_modules.py: RMSNorm is torch.nn.RMSNorm; on CPU torch 2.13 runs it "
            "as composite ops (traced); a CUDA build may dispatch to a fused kernel that keeps less (norms=fused; "
            "not verified on a GPU here)",
        ),
        "gqa": Preset(
            "native",
            "torchtitan 0.3.0 models/common/attention.py: enable_gqa passed to flex, SDPA and varlen; no repeat_kv",
        ),
        "optimizer_impl": Preset(
            "fused",
            "torchtitan 0.3.0 components/optimizer/optimizer.py: implementation = 'fused' → AdamW(fused=True, "
            "foreach=False)",
        ),
        "buffers": Preset(
            "rope-per-layer",
            "torchtitan 0.3.0 models/common/rope.py: each layer's attention builds its own ComplexRoPE with "
            "register_buffer('cache', …, persistent=False), complex64 (seq_len, head_dim ÷ 2); "
            "Decoder.Config.update_from_config sizes it by training.seq_len",
        ),
        "save_path": Preset(
            "sharded",
            "torchtitan 0.3.0 components/checkpointer/dcp.py: CheckpointManager.dcp_save saves with torch.distributed."
            "checkpoint (dcp.save, or dcp.async_save, of the sharded state dicts)",
        ),
        "load_path": Preset(
            "partitioned",
            "torchtitan 0.3.0 trainer.py builds the model under torch.device('meta'), parallelizes it, then "
            "to_empty(device=init_device) and init_weights; a checkpoint is loaded sharded (dcp.load)",
        ),
        "grad_sync": Preset(
            "every",
            "torchtitan 0.3.0 trainer.py train_step calls forward_backward_step for each of its "
            "gradient_accumulation_steps micro batches with no no_sync: FSDP2 reduce-scatters each",
        ),
    },
}
# The fields whose default is the stack's (the widths last: the all-gather and reduce-scatter widths follow the
# parameter and gradient widths where a stack leaves them).
STACK_CHOICES: tuple[str, ...] = (
    "loss", "wrap", "buffers", "act_policy", "norms", "gqa", "optimizer_impl", "grad_sync", "save_path",
    "load_path", "param_bytes", "grad_bytes", "master_bytes", "opt_bytes", "gather_bytes", "reduce_bytes",
    "frozen_bytes",
)  # fmt: skip


# transformers' attention through a mask: a sliding-window model (Mistral) from a sequence as long as its window.
_WINDOWED = Preset(
    "expand",
    "transformers 5.23.0 masking_utils: a sliding-window model's causal mask is skipped (SDPA's is_causal) only "
    "while the sequence is shorter than sliding_window; from seq_len ≥ sliding_window it is built, and SDPA "
    "given a mask takes repeat_kv (integrations/sdpa_attention.py use_gqa_in_sdpa)",
)


# transformers' OLMo 2 norm: the weight multiplies the normalised input in FP32, before the cast back.
_OLMO2_NORMS = Preset(
    "composite",
    "transformers 5.23.0 Olmo2RMSNorm: hidden_states.to(torch.float32), pow, mean, rsqrt, then "
    "(self.weight * hidden_states).to(input_dtype): the weight's mul keeps the normalised input in FP32",
)
# transformers' Gemma 2 norm: all of it in FP32, the weight too, as (1 + weight), before the cast back.
_GEMMA2_NORMS = Preset(
    "composite",
    "transformers 5.23.0 Gemma2RMSNorm: x.float(), pow, mean, rsqrt, then output * (1.0 + self.weight.float()), "
    "cast back: the mul keeps the normalised input and (1 + weight) in FP32",
)
_MODEL_NORMS = {"olmo2": _OLMO2_NORMS, "gemma2": _GEMMA2_NORMS, "gemma3_text": _GEMMA2_NORMS}  # Gemma3RMSNorm: the same


def preset(stack: str, choice: str, model: str = "", seq_len: int = 0) -> Preset | None:
    """What ``stack`` gives ``choice`` (a name of :data:`STACK_CHOICES`), or None where it leaves it. Two of the
    hf-fsdp2 stack's follow the scenario's ``model`` (and ``seq_len``): ``gqa`` is expand from a sequence as long
    as a grouped-query model's sliding window, ``norms`` composite for OLMo 2's and Gemma 2's RMSNorms."""
    if stack == "hf-fsdp2" and choice in ("gqa", "norms") and model:
        try:
            arch = resolve(model).architecture
        except ModelConfigError:  # refused elsewhere, by the model field
            arch = None
        if arch is not None and choice == "gqa" and 0 < arch.sliding_window <= seq_len and arch.kv_heads < arch.heads:
            return _WINDOWED
        if arch is not None and choice == "norms" and arch.family in _MODEL_NORMS:
            return _MODEL_NORMS[arch.family]
    return _PRESETS[stack].get(choice)


@dataclass(frozen=True, slots=True)
class StackChoice:
    """One choice the scenario's stack decides: the value the run has, the stack's own value and why."""

    name: str
    value: str | int
    stack_value: str | int
    evidence: str

    @property
    def from_stack(self) -> bool:
        """Whether the run takes the stack's value (a canonical scenario omits a value equal to its default, so
        a typed value equal to the stack's is the stack's)."""
        return self.value == self.stack_value

    @property
    def source(self) -> str:
        """``stack`` (the run has the stack's value) or ``set`` (another was set over it)."""
        return "stack" if self.from_stack else "set"


def stack_choices(stack: str, values: dict[str, str | int]) -> tuple[StackChoice, ...]:
    """Each choice ``stack`` decides, in :data:`STACK_CHOICES` order, with the run's value from ``values``."""
    out = []
    for name in STACK_CHOICES:
        given = preset(stack, name, str(values["model"]), int(values["seq_len"]))
        if given is not None:
            out.append(StackChoice(name, values[name], given.value, given.evidence))
    return tuple(out)


# The ZeRO stages a stack can run. Every stack here shards with FSDP2's fully_shard (torch 2.13,
# torch/distributed/fsdp/_fully_shard/_fully_shard.py): stage 3 is its default (reshard_after_forward=True), stage 2
# its reshard_after_forward=False (each unit keeps its gathered parameters from forward to backward). Its
# parameters are sharded between steps whatever it is given, so stages 0 and 1 (parameters replicated: DDP, ZeRO-1)
# are DeepSpeed's, not FSDP2's. The comparison still shows all four; a recommendation is made among these.
STACK_STAGES: dict[str, tuple[int, ...]] = dict.fromkeys(STACKS, (2, 3))


def least_stage(stack: str, fits: Sequence[bool]) -> int | None:
    """The least complex stage ``stack`` can run whose peak fits (``fits`` per stage 0 … 3); None when none does."""
    return next((stage for stage in STACK_STAGES[stack] if fits[stage]), None)
