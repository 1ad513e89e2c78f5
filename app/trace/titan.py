"""The ``torchtitan`` stack's checkpointing and wrapping, by torchtitan's own code (0.3.0,
``models/llama3/parallelize.py`` ``parallelize_llama``).

First the activation checkpointing policy wraps every block (``distributed/activation_checkpoint.py``):
``FullAC`` (``checkpoint_wrapper``) for ``full``, ``SelectiveAC`` (per-op: outputs of the compute-intensive ops,
attention and reduce-scatter saved, every second matmul recomputed) for ``op``. Then ``apply_fsdp_to_decoder``
(``distributed/fsdp.py``) shards: the token embedding alone, the final norm with the head as one unit that is not
resharded after forward, each block, the root last; ``MixedPrecisionPolicy(param_dtype, reduce_dtype,
cast_forward_inputs=False)``; FSDP's gradient division disabled.

What stands in: the CPU attention kernel (the stand-in for FlexAttention, :mod:`app.trace.models.titan`) is not in
``SelectiveAC``'s save list, where flex's higher-order op is; :class:`_FlexOnCpu` adds it through the hook
torchtitan documents for tuning the save set (``get_save_ops``), so the stand-in's output and log-sum-exp are
saved as flex's are on a GPU.

With ``loss = chunked`` the loss is torchtitan's own ``ChunkedLossWrapper`` (``components/loss.py``: the head and
the cross-entropy run chunk by chunk, each chunk's backward at once, the head's gradient accumulated across chunks
and reduce-scattered with the last). Imports torch and torchtitan: call it from a trace only.
"""

from __future__ import annotations

from typing import Any

import torch
from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
from torchtitan.distributed.fsdp import apply_fsdp_to_decoder

from app.trace.setup import TraceSetup
from app.trace.timeline import TimelineTracker
from app.trace.units import unit_names


class _FlexOnCpu(SelectiveAC):
    """torchtitan's per-op selective AC, with the CPU attention kernel saved as FlexAttention's op is."""

    def get_save_ops(self) -> set[Any]:
        ops: set[Any] = super().get_save_ops()
        return ops | {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default}


def prepare(model: Any, setup: TraceSetup, mesh: Any, param_dtype: Any, reduce_dtype: Any) -> dict[str, str]:
    """Checkpoint and shard ``model`` as torchtitan's ``parallelize_llama`` does (in place): its FSDP modules'
    names by qualified name (``root``; ``embed``: the token embedding; ``tail``: the final norm and the head;
    ``layers.k``)."""
    if setup.act_policy == "full":
        FullAC(FullAC.Config()).apply(model)
    elif setup.act_policy == "op":
        _FlexOnCpu(SelectiveAC.Config()).apply(model)
    apply_fsdp_to_decoder(
        model,
        mesh,
        param_dtype=param_dtype,
        reduce_dtype=reduce_dtype,
        pp_enabled=False,
        reshard_after_forward_policy="default" if setup.reshard_after_forward else "never",
    )
    return unit_names(model, None if model.enable_weight_tying else model.tok_embeddings)


class _ChunkInstants:
    """Marks each chunk on the timeline: a forward pre-hook on the head numbers the chunk (the head's hooks'
    instants carry it while it runs), and torchtitan's per-chunk loss (its ``CrossEntropyLoss``), wrapped, marks
    the chunk's loss."""

    def __init__(self, loss_fn: Any, tracker: TimelineTracker, chunks: int) -> None:
        self.loss_fn, self.tracker, self.chunks, self.started = loss_fn, tracker, chunks, 0

    def next_chunk(self, *unused: Any) -> None:
        self.started += 1
        self.tracker.chunk = f"loss chunk {self.started}/{self.chunks}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        out = self.loss_fn(*args, **kwargs)
        self.tracker.instant(f"{self.tracker.chunk}: loss computed", "loss")
        return out


def chunked_loss(tracker: TimelineTracker, model: Any, setup: TraceSetup, tokens: Any, labels: Any) -> Any:
    """torchtitan's train step with its llama3 configs' loss (trainer.py ``forward_backward_step``): the model
    returns the final norm's output (``_skip_lm_head``, as the trainer sets it for this loss), the wrapper runs
    the head and the loss chunk by chunk, then the returned loss's backward runs the decoder's."""
    from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss

    config = ChunkedLossWrapper.Config(
        num_chunks=setup.loss_chunks, loss_fn=CrossEntropyLoss.Config(global_vocab_size=setup.architecture.vocab)
    )
    wrapper = ChunkedLossWrapper(config)
    wrapper.set_lm_head(model.lm_head)
    model._skip_lm_head = True
    marks = _ChunkInstants(wrapper.loss_fn, tracker, setup.loss_chunks)
    wrapper.loss_fn = marks
    pred = model(tokens)
    tracker.instant("end of forward (hidden states)", "forward")
    tracker.phase = "loss"
    handle = model.lm_head.register_forward_pre_hook(marks.next_chunk, prepend=True)
    try:
        loss, _ = wrapper(pred, labels)
    finally:
        handle.remove()
        tracker.chunk = ""
    del pred  # as the train step drops its reference before backward
    return loss
