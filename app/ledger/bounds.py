"""The bounds both the scenario's inputs and the model layer enforce: one leaf that imports nothing.

``app.ledger.scenario.declared`` declares the scenario's fields with these numbers and choices; the
model readers (``app.ledger.models``) check their own arguments against the same ones, so a model
accepts exactly what a scenario can hold, without the model layer importing the scenario (which imports the models).
"""

from __future__ import annotations

from typing import Literal, get_args

TEN_13 = 10**13
# PEFT LoraConfig r: 0 is off; at most the widest modelled layer's (Llama 3.1 405B's hidden size), each target's
# narrowest width bounding it too
LORA_RANK = (0, 16_384)
LORA_TARGETS_MAX_CHARS = 200
FROZEN_LAYERS = (0, 1_024)  # the first N decoder layers frozen (the model's layers bound it too)
LORA_TARGETS_PATTERN = r"^[A-Za-z0-9_, -]*$"  # module names, commas and spaces
TWO_40 = 2**40
TWO_46 = 2**46
TWO_50 = 2**50  # host memory: a node of a petabyte is far beyond any real one
NAME_MAX_CHARS = 80
MODEL_MAX_CHARS = 600
DEFAULT_UNIT_PARAMS_CAP = 400_000_000

# (minimum, maximum) of the integer inputs the model layer reads too
DP = (1, 131_072)
SEQ_LEN = (1, 1_048_576)
MICRO_BATCH = (1, 4_096)
TP = (1, 1_024)
CP = (1, 1_024)  # context-parallel ranks (the layout search tries the divisors of the GPUs within it)
AC_EVERY = (1, 1_024)  # checkpoint every N-th decoder layer
LOSS_CHUNKS = (1, 1_024)  # loss = chunked: the sequence split into N chunks for the head and the loss
GRAD_ACCUM = (1, 1_024)  # micro batches per optimizer step (gradient accumulation)
ROUTING_IMBALANCE = (100, 1_000)  # %: the busiest expert-parallel rank's routed token slots over the balanced share

# The training stacks a scenario names (its presets: app/ledger/scenario/stacks.py) and where its loss runs.
TrainingStack = Literal["plain-fsdp2", "hf-fsdp2", "torchtitan"]
LossPlace = Literal["outside", "inside", "chunked", "fused"]
# loss = fused: the families whose transformers class Liger Kernel 0.8.5 gives its lce_forward
# (liger_kernel/transformers/model/<family>.py), untied ones walked on Accelerate's units
LIGER_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral", "phi3", "olmo2", "gemma2")
Wrapping = Literal["root", "embed-tail"]
ActPolicy = Literal["none", "selective", "op", "full"]
NormsImpl = Literal["fused", "unfused", "composite"]
# How attention reads grouped K/V heads: natively (SDPA enable_gqa, flash kernels) or expanded (repeat_kv).
GqaKind = Literal["native", "expand"]
# How AdamW steps (torch.optim.AdamW's implementations): one tensor at a time, multi-tensor, or one fused kernel.
OptimizerImpl = Literal["for-loop", "foreach", "fused"]
# Where the allocator reserve beyond the allocated peak comes from: a reconciled run, or a declared figure.
ReserveSource = Literal["declared", "measured"]
# When gradients are reduce-scattered under accumulation: after every micro batch, or after the last only (no_sync).
GradSync = Literal["every", "last"]
# How a checkpoint is saved: each rank its shards (torch.distributed.checkpoint), or full state dicts on rank 0.
SavePath = Literal["sharded", "full-rank0"]
# How the model reaches the ranks at load: built partitioned (meta device, zero.Init), one copy per node, one per rank.
LoadPath = Literal["partitioned", "rank0", "every-rank"]
# Registered buffers every rank holds whole (FSDP2 shards parameters, not buffers).
BuffersKind = Literal["none", "rope-per-layer"]
BaseQuantKind = Literal["none", "nf4", "nf4-dq"]  # QLoRA's 4-bit base (bitsandbytes NF4, double quantisation)
ActWidth = Literal[1, 2, 4]
LogitsWidth = Literal[2, 4]
ACT_POLICIES: tuple[str, ...] = get_args(ActPolicy)
NORMS: tuple[str, ...] = get_args(NormsImpl)
ACT_WIDTHS: tuple[int, ...] = get_args(ActWidth)
LOGITS_WIDTHS: tuple[int, ...] = get_args(LogitsWidth)
