"""The declarations of the choices a training stack decides (and the allocator reserve, the checkpointing every
N-th layer beside them): their bounds, defaults and help texts, which cite the projects' code. :class:`ScenarioFields`
(:mod:`app.ledger.scenario.declared`) declares each field with one of these, in its own order."""

from __future__ import annotations

from typing import Any

from app.ledger.bounds import AC_EVERY, GRAD_ACCUM, LOSS_CHUNKS, TWO_46
from app.ledger.scenario.form import form, optional

STACK_FIELD: Any = optional(
    title="Training stack",
    description="The stack the run trains with; it presets the choices below that it decides (each can "
    "still be set on its own): plain-fsdp2 (a plain training loop around FSDP2's fully_shard, the loss "
    "computed outside the model), hf-fsdp2 (transformers' model classes under the HF Trainer or "
    "Accelerate with FSDP2: the loss computed inside the model from labels=) or torchtitan (torchtitan "
    "0.3.0's Llama 3 model, its per-op selective checkpointing and its FSDP2 wrapping).",
    examples=["hf-fsdp2"],
    json_schema_extra=form("run", "stack", "plain-fsdp2"),
)
LOSS_FIELD: Any = optional(
    title="Where the loss runs",
    description="outside the model (a training loop calls the loss on the whole logits: plain loops), inside "
    "(the model computes it from labels=, as transformers' ForCausalLM does: the loss then runs inside the root "
    "FSDP unit, whose pre-backward prefetches the last layer(s) before the loss's backward) or chunked "
    "(torchtitan 0.3.0's ChunkedLossWrapper, outside the model: the head and the loss run on loss_chunks slices "
    "of the sequence, each slice's backward at once, so the logits are never whole; the head's gradient "
    "accumulates across the slices in the reduce width; walked on torchtitan's units, wrap embed-tail, of a model "
    "without tied embeddings, and not with grad_sync last over several micro batches) or fused (Liger Kernel "
    "0.8.5's fused linear cross-entropy, the HF Trainer's use_liger_kernel=True: the head's and the hidden state's "
    "gradients computed in forward and kept, the logits never whole; walked on Accelerate's units of an untied model "
    "of Liger's families, on one mesh). Default: the stack's.",
    examples=["inside"],
    json_schema_extra=form("stack", "place", None),
)
WRAP_FIELD: Any = optional(
    title="FSDP units",
    description="root: fully_shard on each decoder layer and at the root, which holds the embedding, the "
    "final norm and the head and stays unsharded from forward to its post-backward (FSDP2's documented "
    "recipe, the plain loop). embed-tail: the embedding as a unit of its own, resharded after forward, and "
    "the final norm with the head as one unit kept unsharded, the root owning no parameter (Accelerate "
    "1.15.0's fsdp2_prepare_model; torchtitan 0.3.0 carves alike). The schedule walks either. Default: the "
    "stack's.",
    examples=["embed-tail"],
    json_schema_extra=form("stack", "units", None),
)
BUFFERS_FIELD: Any = optional(
    title="Registered buffers",
    description="Buffers every rank holds whole through the step (FSDP2 shards parameters, not buffers): none "
    "(transformers' and the plain loop's rotary tables are computed per forward from a head_dim ÷ 2 "
    "inv_freq) or rope-per-layer (torchtitan 0.3.0: each layer's attention keeps its own complex64 RoPE "
    "cache of seq_len × head_dim ÷ 2). Default: the stack's.",
    examples=["rope-per-layer"],
    json_schema_extra=form("stack", "buffers", None),
)
RESERVE_BYTES_FIELD: Any = optional(
    ge=0,
    le=TWO_46,
    title="Allocator reserve",
    description="What PyTorch's caching allocator reserves beyond the allocated peak (torch.cuda."
    "max_memory_reserved − max_memory_allocated of a run: block rounding, cached and split blocks): a "
    "reconciled run's (zero3-lab reconcile offers it) or a declared figure, never a multiplier. 0: the verdict "
    "compares the allocated peak with the capacity; else the reserved estimate, allocated peak + this. At "
    "most capacity_bytes.",
    examples=[4_294_967_296],
    json_schema_extra=form("measured", "bytes", 0),
)
RESERVE_SOURCE_FIELD: Any = optional(
    title="Reserve from",
    description="Where the allocator reserve comes from: declared, or measured (a reconciled run's reserved − "
    "allocated at its step peak).",
    examples=["measured"],
    json_schema_extra=form("measured", "source", "declared"),
)
ACT_POLICY_FIELD: Any = optional(
    title="Recomputation",
    description="Activation checkpointing, per decoder layer: none; selective (Korthikanti et al. 2022: the "
    "attention core recomputed; Megatron's 'selective'); op (torchtitan's per-op selective AC: the outputs of "
    "matmuls and attention saved except every second matmul, the rest recomputed; a Llama-style dense "
    "model); full (each layer keeps only its input and recomputes its forward in backward). Default: the "
    "stack's.",
    examples=["full"],
    json_schema_extra=form("activation", "policy", None),
)
AC_EVERY_FIELD: Any = optional(
    ge=AC_EVERY[0],
    le=AC_EVERY[1],
    title="Checkpoint every N-th layer",
    description="With act_policy full: checkpoint layers 0, N, 2N, … and let the others keep their whole saved "
    "set (transformers 5.23.0's activation_checkpointing_enable(every_n_layers=N), the HF Trainer's "
    "activation_checkpointing_kwargs); 1 = every layer. At most the model's layer count.",
    examples=[2],
    json_schema_extra=form("activation", "layers", 1),
)
LOSS_CHUNKS_FIELD: Any = optional(
    ge=LOSS_CHUNKS[0],
    le=LOSS_CHUNKS[1],
    title="Loss chunks",
    description="With loss chunked: how many slices of the sequence the head and the loss run on "
    "(ChunkedLossWrapper.Config.num_chunks, torchtitan 0.3.0's --loss.num-chunks; its llama3 configs use 8). "
    "Must divide seq_len, as torchtitan checks.",
    examples=[8],
    json_schema_extra=form("stack", "slices", 8),
)
NORMS_FIELD: Any = optional(
    title="RMSNorm kernel",
    description="What an RMSNorm keeps for backward (Llama-style models): unfused (transformers' "
    "LlamaRMSNorm in eager PyTorch keeps an FP32 upcast and the normalised input besides its input: what a "
    "trace of a transformers-style model allocates), composite (torch.nn.RMSNorm without a fused kernel, as "
    "torchtitan's runs on CPU: the FP32 upcast and the normalised input in FP32) or fused (a fused kernel "
    "such as Liger's or Apex's keeps its input and the FP32 1/rms: 4·s·b·h B less per norm than unfused). "
    "LayerNorm models: no effect. Default: the stack's.",
    examples=["unfused"],
    json_schema_extra=form("activation", "kernel", None),
)
OPTIMIZER_IMPL_FIELD: Any = optional(
    title="Optimizer implementation",
    description="How AdamW steps, as torch.optim.AdamW's foreach= and fused= choose: for-loop (one tensor at a "
    "time: two temporaries of the largest tensor), foreach (multi-tensor: one temporary of every optimizer shard at "
    "once, torch's default on CUDA) or fused (one kernel, in place: no temporaries). Default: the stack's.",
    examples=["fused"],
    json_schema_extra=form("precision", "kind", None),
)
GQA_FIELD: Any = optional(
    title="Grouped K/V heads",
    description="How attention reads a GQA model's K and V: native (SDPA's enable_gqa or a flash kernel reads the "
    "kv heads as they are) or expand (transformers' SDPA path when the batch carries a mask it cannot drop, "
    "padding or packed sequences: repeat_kv materialises K and V for every head, and SDPA keeps the mask in the "
    "activation width, b·s² per layer, both saved for backward). A GQA model only. Default: the stack's.",
    examples=["native"],
    json_schema_extra=form("activation", "kind", None),
)
GRAD_ACCUM_FIELD: Any = optional(
    ge=GRAD_ACCUM[0],
    le=GRAD_ACCUM[1],
    title="Gradient accumulation",
    description="Micro batches per optimizer step (gradient_accumulation_steps): each runs forward and backward "
    "before one optimizer step. The global batch is micro batch × this × D. Under grad_sync every it adds no bytes "
    "beyond one micro batch's, except that every gradient shard is resident from the second micro batch on; under "
    "grad_sync last see there. The communication per step scales with it.",
    examples=[4],
    json_schema_extra=form("schedule", "micro batches", 1),
)
RESHARD_AFTER_BACKWARD_FIELD: Any = optional(
    title="Reshard after backward",
    description="With gradient accumulation above 1: 0 keeps each unit's gathered parameters from its backward to the "
    "next micro batch (FSDP2's set_reshard_after_backward(False) on every micro batch but the last, which some loops "
    "pair with grad_sync last): the next forward gathers nothing it kept, at the cost of holding every unit's "
    "unsharded parameters from the end of one micro batch's backward into the next. Stage 3 only. 1: FSDP2's "
    "default.",
    examples=[1],
    json_schema_extra=form("schedule", "0 or 1", 1),
)
SAVE_PATH_FIELD: Any = optional(
    title="Checkpoint save",
    description="How a checkpoint is saved, for the host ledger: sharded (each rank writes its own shards with "
    "torch.distributed.checkpoint: no whole copy on the host) or full-rank0 (full state dicts gathered to rank 0's "
    "host memory, FSDP2's get_model_state_dict / get_optimizer_state_dict with full_state_dict and cpu_offload, "
    "Accelerate's FULL_STATE_DICT: the model's, then the optimizer's). Default: the stack's.",
    examples=["full-rank0"],
    json_schema_extra=form("host", "path", None),
)
GRAD_SYNC_FIELD: Any = optional(
    title="Gradient sync under accumulation",
    description="With gradient accumulation above 1: every (each micro batch's backward reduce-scatters, and the "
    "gradient shards accumulate: torchtitan, a plain loop, DeepSpeed's partitioned gradients) or last (no sync "
    "until the last micro batch: FSDP2's set_requires_gradient_sync(False), what Accelerate's no_sync calls; FSDP2 "
    "then keeps every unit's unsharded gradient, held in the reduce width, across the micro batches: the whole "
    "model's at stages 2–3, from the second micro batch's forward on). Default: the stack's.",
    examples=["last"],
    json_schema_extra=form("schedule", "when", None),
)
LOAD_PATH_FIELD: Any = optional(
    title="Model load",
    description="How the model reaches the ranks, for the host ledger: partitioned (meta device or zero.Init, "
    "shard by shard: nothing whole at stage 3), rank0 (one rank per node loads and broadcasts: Accelerate's "
    "cpu_ram_efficient_loading) or every-rank (each rank loads the whole model: from_pretrained's default). "
    "Replaces zero_init (1: partitioned, 0: every-rank). Default: the stack's.",
    examples=["rank0"],
    json_schema_extra=form("host", "path", None),
)
