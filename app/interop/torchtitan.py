"""A scenario in torchtitan's own words: the command line of torchtitan 0.3.0's trainer, with notes.

torchtitan 0.3.0 reads no TOML job file (earlier releases did, ``--job.config_file``): a run is a registered
Python config (``--module llama3 --config llama3_8b``) with tyro flags over it, activation checkpointing a
subcommand that comes last (``activation-checkpoint:selective``). The notes name what torchtitan cannot express
or decides elsewhere (the model's sizes come from its registry flavour, not a config.json). A test parses the
command with torchtitan's own ``ConfigManager``.
"""

from __future__ import annotations

from app.interop.snippet import Snippet
from app.ledger.scenario import Scenario

__all__ = ["AC_SUBCOMMANDS", "DTYPES", "torchtitan_snippet"]

DTYPES = {2: "bfloat16", 4: "float32"}
# act_policy → torchtitan 0.3.0's activation-checkpoint subcommand (distributed/activation_checkpoint.py)
AC_SUBCOMMANDS = {"none": "none", "op": "selective", "full": "full"}


def torchtitan_snippet(s: Scenario) -> Snippet:
    """``python -m torchtitan.train`` with the flags that set the scenario's layout, batch and checkpointing."""
    notes: list[str] = []
    flags = ["--module llama3", "--config llama3_8b", *_parallelism(s, notes), *_training(s, notes)]
    flags.append(f"--parallelism.fsdp-reshard-after-forward {'default' if s.reshard_after_forward else 'never'}")
    flags.append(f"--optimizer.implementation {s.optimizer_impl}")
    if s.loss == "chunked":  # the llama3 configs' ChunkedLossWrapper
        flags.append(f"--loss.num-chunks {s.loss_chunks}")
    flags.append(f"activation-checkpoint:{_checkpointing(s, notes)}")
    _choices(s, notes)
    notes.append(
        "the model: torchtitan builds it from its registry flavour (--module llama3 --config llama3_8b is "
        "Llama 3 8B); another size is another registered config, not a config.json"
    )
    lines = ["python -m torchtitan.train \\", *(f"  {flag} \\" for flag in flags[:-1]), f"  {flags[-1]}"]
    return Snippet("\n".join(lines) + "\n", tuple(notes))


def _parallelism(s: Scenario, notes: list[str]) -> list[str]:
    out = [f"--parallelism.data-parallel-shard-degree {s.shard_group}"]
    if s.shard_group < s.dp:
        out.append(f"--parallelism.data-parallel-replicate-degree {s.dp // s.shard_group}")
    if s.tp > 1:
        out.append(f"--parallelism.tensor-parallel-degree {s.tp}")
    if s.pp > 1:
        out.append(f"--parallelism.pipeline-parallel-degree {s.pp}")
    if s.ep > 1:
        out.append(f"--parallelism.expert-parallel-degree {s.ep}")
    if s.cp > 1:  # torchtitan 0.3.0 config/configs.py context_parallel_degree (its FSDP mesh: dp_shard × cp)
        out.append(f"--parallelism.context-parallel-degree {s.cp}")
    if s.stage != 3:
        notes.append(f"stage {s.stage}: torchtitan shards with FSDP2 (stage 3) whatever the scenario's stage")
    return out


def _training(s: Scenario, notes: list[str]) -> list[str]:
    out = [f"--training.local-batch-size {s.micro_batch}", f"--training.seq-len {s.seq_len}"]
    if s.grad_accum > 1:  # trainer.py: gradient_accumulation_steps = global ÷ (local × the data-parallel degree)
        out.append(f"--training.global-batch-size {s.micro_batch * s.dp * s.grad_accum}")
        if not s.reshard_after_backward:
            notes.append("reshard_after_backward 0: torchtitan 0.3.0 keeps units gathered between micro batches only "
                         "under pipeline parallelism (torch's PipelineStage); written as its default")  # fmt: skip
        if s.grad_sync == "last":
            notes.append("grad_sync last: torchtitan 0.3.0 reduce-scatters every micro batch (no no_sync); written "
                         "as its own, which holds the gradient shards instead of unsharded gradients")  # fmt: skip
    if s.param_bytes in DTYPES:
        out.append(f"--training.dtype {DTYPES[s.param_bytes]}")
    else:
        notes.append(f"param_bytes {s.param_bytes}: torchtitan trains in float32 or bfloat16 (--training.dtype)")
    if s.gather_bytes in DTYPES:
        out.append(f"--training.mixed-precision-param {DTYPES[s.gather_bytes]}")
    else:
        notes.append(f"gather_bytes {s.gather_bytes}: torchtitan's mixed_precision_param is bfloat16 or float32")
    out.append("--training.mixed-precision-reduce float32")
    if s.reduce_bytes != 4:
        notes.append(f"reduce_bytes {s.reduce_bytes}: torchtitan 0.3.0 allows only float32 reductions")
    if s.master_bytes or s.grad_bytes != s.param_bytes or s.opt_bytes != s.param_bytes:
        notes.append(
            "master_bytes, grad_bytes, opt_bytes: under FSDP2 the optimizer updates the sharded parameters (no "
            "master copy) and gradients and AdamW's states take their dtype"
        )
    return out


def _checkpointing(s: Scenario, notes: list[str]) -> str:
    if s.act_policy == "full" and s.ac_every > 1:
        notes.append(f"ac_every {s.ac_every}: torchtitan 0.3.0 checkpoints every block or none (its layer-wise "
                     "option is gone); written as full, which keeps less")  # fmt: skip
    if s.act_policy == "selective":
        notes.append(
            "act_policy selective (Korthikanti's attention core): torchtitan has no such policy; written as its "
            "per-op selective AC (act_policy op), which keeps more"
        )
        return "selective"
    return AC_SUBCOMMANDS[s.act_policy]


def _choices(s: Scenario, notes: list[str]) -> None:
    """The stack choices torchtitan's code fixes: where the loss runs, its units, its norms and buffers."""
    if s.loss in ("inside", "fused"):
        notes.append(f"loss {s.loss}: torchtitan's train step computes the loss outside the model"
                     + (" (Liger's fused loss is an HF Trainer's use_liger_kernel; torchtitan chunks its own)"
                        if s.loss == "fused" else ""))  # fmt: skip
    elif s.loss == "outside":
        notes.append(
            "loss outside (whole logits): torchtitan's llama3 configs chunk the loss (ChunkedLossWrapper); "
            "a whole-logits loss is a registered config of your own with loss = CrossEntropyLoss.Config()"
        )
    if s.wrap != "embed-tail":
        notes.append("wrap root: torchtitan carves the embedding and [norm, lm_head] into units of their own")
    if s.buffers != "rope-per-layer":
        notes.append("buffers none: torchtitan 0.3.0 keeps a RoPE cache buffer in every layer")
    if s.norms == "unfused":
        notes.append("norms unfused: torchtitan's RMSNorm is torch.nn.RMSNorm (composite on CPU, fused on CUDA)")
    if s.save_path == "full-rank0":
        notes.append("save_path full-rank0: torchtitan 0.3.0 saves with torch.distributed.checkpoint, each rank its "
                     "own shards (sharded)")  # fmt: skip
    if s.frozen_params:
        notes.append(
            f"trainable_params {s.trainable_params:,} of {s.params:,}: torchtitan 0.3.0's job config has no frozen "
            "parameters or LoRA; freeze them in the model (requires_grad_(False)) before it is sharded"
        )
    if s.load_path != "partitioned":
        notes.append(f"load_path {s.load_path}: torchtitan 0.3.0 builds the model on the meta device and loads "
                     "each rank's shards (partitioned)")  # fmt: skip
    if s.offload_optimizer != "none" or s.offload_param != "none":
        notes.append("offload: torchtitan's --training.enable-cpu-offload moves parameters, gradients and the "
                     "optimizer step to the CPU together (FSDP2's CPUOffloadPolicy)")  # fmt: skip
