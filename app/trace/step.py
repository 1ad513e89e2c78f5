"""One FSDP2 training step on fake tensors, piece by piece (imports torch; :mod:`app.trace.tracer` drives it).

A fake process group of ``dp`` ranks, the model built and cast, ``fully_shard`` per decoder layer
and at the root, the optimizer, and one iteration of ``zero_grad(set_to_none=True)``, forward,
loss, backward and optimizer step with the timeline's named instants.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed._composable.checkpoint_activation import checkpoint
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.testing._internal.distributed.fake_pg import FakeStore

from app.ledger.models.reference import config_of
from app.trace.models import build_model, decoder_layers
from app.trace.models.hf import as_real_tensors, build_hf_model
from app.trace.result import Progress
from app.trace.setup import MESH_DIM, TraceSetup
from app.trace.timeline import TimelineTracker

LEARNING_RATE = 1e-4


@contextmanager
def fake_world(dp: int) -> Iterator[Any]:
    """A fake process group of ``dp`` ranks (this process is rank 0) and its 1-D CPU mesh."""
    if dist.is_initialized():
        raise RuntimeError("a process group is already initialised in this process; the trace needs its own")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=dp)
    try:
        yield init_device_mesh("cpu", (dp,), mesh_dim_names=(MESH_DIM,))
    finally:
        dist.destroy_process_group()


def dtype(width: int) -> Any:
    return {2: torch.bfloat16, 4: torch.float32}[width]


def _unit_name(fqn: str) -> str:
    """``model.layers.3`` → ``layers.3``; the root (``""``) → ``root``."""
    if not fqn:
        return "root"
    parts = fqn.split(".")
    return ".".join(parts[-2:]) if len(parts) >= 2 else fqn


def _layer_index(unit: str) -> int:
    """``layers.3`` → 3; 0 for a unit that is not a decoder layer."""
    index = unit.rpartition(".")[2]
    return int(index) if index.isdigit() else 0


def _optimizer(setup: TraceSetup, params: Any) -> Any:
    fused = setup.optimizer_impl == "fused"
    if setup.stack == "torchtitan" and setup.opt_states == 2:
        # torchtitan 0.3.0 default_adamw (components/optimizer/optimizer.py): betas, eps and weight decay its own
        return torch.optim.AdamW(params, lr=LEARNING_RATE, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1,
                                 fused=fused, foreach=setup.foreach)  # fmt: skip
    if setup.opt_states == 2:
        return torch.optim.AdamW(params, lr=LEARNING_RATE, foreach=setup.foreach, fused=fused)
    momentum = 0.9 if setup.opt_states == 1 else 0.0
    return torch.optim.SGD(params, lr=LEARNING_RATE, momentum=momentum, foreach=setup.foreach)


def step_counter_bytes(optimizer: Any) -> int:
    """Bytes of the optimizer's per-parameter ``step`` tensors (AdamW keeps one 0-d tensor each)."""
    total = 0
    for state in optimizer.state.values():
        step = state.get("step")
        if step is not None and hasattr(step, "untyped_storage"):
            total += int(step.untyped_storage().nbytes())
    return total


@contextmanager
def stack_context(setup: TraceSetup) -> Iterator[None]:
    """What the stack's model needs around a trace: transformers' class takes fake tensors as real ones
    (:func:`app.trace.models.hf.as_real_tensors`: one sequence per row, no mask); with ``gqa = expand`` it is left
    to take the batch as packed, as it takes a padded or packed batch: a mask, and K and V expanded; Liger's fused
    loss its stand-ins (:func:`app.trace.liger.stand_ins`). The other stacks need nothing."""
    real = as_real_tensors() if setup.stack == "hf-fsdp2" and setup.gqa == "native" else nullcontext()
    if setup.loss == "fused":
        from app.trace.liger import stand_ins

        with real, stand_ins():
            yield
        return
    with real:
        yield


def build(setup: TraceSetup, report: Progress) -> Any:
    """The stack's model in training mode (under ``FakeTensorMode``): transformers' own class for
    ``hf-fsdp2``, else the lab's plain-torch decoder of the family."""
    if setup.stack == "hf-fsdp2":
        from app.trace.trains import apply_trains

        report("building the model (transformers)", 0, 1)
        model = apply_trains(build_hf_model(config_of(setup.scenario.model)), setup)
        if setup.loss == "fused":
            from app.trace.liger import with_fused_loss

            return with_fused_loss(model)
        return model
    if setup.stack == "torchtitan":
        from app.trace.models.titan import build_titan_model

        report("building the model (torchtitan)", 0, 1)
        return build_titan_model(setup.architecture, setup.seq_len)
    model = build_model(setup.architecture, lambda done, of: report("building layers", done, of))
    model.train()
    return model


@dataclass(frozen=True, slots=True)
class Sharded:
    """The model after ``fully_shard``, its optimizer, and its FSDP units by module id and by name."""

    model: Any
    optimizer: Any
    units: dict[int, str]  # id(module) → unit name (``root``, ``layers.3``)
    units_by_fqn: dict[str, str]  # the module's qualified name → unit name

    def ordered_units(self) -> tuple[str, ...]:
        """The unit names, root first, then the embedding's and the tail's where they are units of their own
        (the hf-fsdp2 stack), then the layers in order."""
        order = {"root": 0, "embed": 1, "tail": 2}
        return tuple(sorted(set(self.units.values()), key=lambda u: (order.get(u, 3), _layer_index(u))))


def shard(model: Any, setup: TraceSetup, mesh: Any, report: Progress) -> Sharded:
    """Cast the parameters, ``fully_shard`` every decoder layer (checkpointed under ``full``) and the root;
    ``wrap = embed-tail`` (the ``hf-fsdp2`` stack's) by Accelerate's own code (:mod:`app.trace.accelerate`)."""
    mp = MixedPrecisionPolicy(param_dtype=dtype(setup.gather_bytes), reduce_dtype=dtype(setup.reduce_bytes))
    # the parameters only (buffers, the rotary tables, stay FP32); Accelerate casts its own
    if setup.param_bytes != 4 and setup.stack != "hf-fsdp2":
        for p in model.parameters():
            p.data = p.data.to(dtype(setup.param_bytes))
    if setup.stack == "torchtitan":
        from app.trace.titan import prepare as titan_prepare

        report("sharding (torchtitan)", 0, 1)
        names = titan_prepare(model, setup, mesh, dtype(setup.gather_bytes), dtype(setup.reduce_bytes))
        units = {id(m): names[fqn] for fqn, m in model.named_modules() if fqn in names}
        return Sharded(model, _optimizer(setup, model.parameters()), units, names)
    if setup.wrap == "embed-tail":
        from app.trace.accelerate import prepare

        report("sharding (Accelerate)", 0, 1)
        model, names = prepare(model, setup, mesh, mp)
        units = {id(m): names[fqn] for fqn, m in model.named_modules() if fqn in names}
        return Sharded(model, _optimizer(setup, model.parameters()), units, names)
    layers = decoder_layers(model)
    # every N-th layer on transformers' class: its own activation_checkpointing_enable(every_n_layers=N), as the HF
    # Trainer calls it; else torch's checkpoint on layers 0, N, 2N, …
    hf_every = setup.stack == "hf-fsdp2" and setup.act_policy == "full" and setup.ac_every > 1
    if hf_every:
        model.activation_checkpointing_enable(every_n_layers=setup.ac_every)
    for k, layer in enumerate(layers):
        if setup.act_policy == "full" and not hf_every and k % setup.ac_every == 0:
            checkpoint(layer)
        fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=setup.reshard_after_forward)
        report("sharding layers", k + 1, setup.architecture.layers)
    # The root keeps fully_shard's default (None): it is not resharded after forward, since backward
    # needs the head and the final norm first (the recipe of torchtitan and FSDP2's documentation).
    fully_shard(model, mesh=mesh, mp_policy=mp)
    unit_fqns = {id(m): fqn for fqn, m in model.named_modules() if m is model or any(m is la for la in layers)}
    units = {key: _unit_name(fqn) for key, fqn in unit_fqns.items()}
    optimizer = _optimizer(setup, model.parameters())
    return Sharded(model, optimizer, units, {fqn: _unit_name(fqn) for fqn in unit_fqns.values()})


def layer_progress(report: Progress, what: str, layers: int) -> Callable[[str, str], None]:
    """The tracker's progress for one iteration: forward and backward counted over the units."""
    done = {"forward": 0, "backward": 0}

    def step(phase: str, unit: str) -> None:
        done[phase] += 1
        report(f"{what}: {phase}", min(done[phase], layers + 1), layers + 1)

    return step


def _loss_outside(tracker: TimelineTracker, model: Any, setup: TraceSetup, tokens: Any, labels: Any,
                  logits_dtype: Any) -> Any:  # fmt: skip
    """The training loop's loss on the logits the model returns (a plain loop's, torchtitan's)."""
    logits = model(input_ids=tokens).logits if setup.stack == "hf-fsdp2" else model(tokens)  # torchtitan: logits
    tracker.instant("end of forward (logits)", "forward")
    tracker.phase = "loss"
    if logits.dtype != logits_dtype:
        logits = logits.to(logits_dtype)
        tracker.instant("logits cast for the loss", "loss")
    loss = F.cross_entropy(logits.view(-1, setup.architecture.vocab), labels.view(-1))
    del logits  # as a training loop drops its reference before backward (torchtitan's `del pred`)
    return loss


def _next_micro_batch(tracker: TimelineTracker, model: Any, setup: TraceSetup, micro: int) -> None:
    """Before micro batch ``micro`` of an accumulating step: with ``grad_sync = last`` no sync until the last (what
    Accelerate 1.15.0's no_sync calls under FSDP2); the tracker's per-module statistics forgotten (it takes a
    module's second forward for a new iteration; the trace reads only its totals)."""
    last = micro == setup.grad_accum - 1
    if setup.grad_sync == "last":
        model.set_requires_gradient_sync(last)
    if not setup.reshard_after_backward:
        model.set_reshard_after_backward(last)
    if micro:
        tracker.reset_mod_stats()
    tracker.instant(f"micro batch {micro + 1} of {setup.grad_accum}" + (" (sync)" if last else ""), "start")


def iteration(
    tracker: TimelineTracker, sharded: Sharded, setup: TraceSetup, tokens: Any, labels: Any, report: Progress, what: str
) -> None:
    """zero_grad, forward, loss, backward and the optimizer step, each marked on the timeline."""
    model, optimizer = sharded.model, sharded.optimizer
    logits_dtype = dtype(setup.logits_bytes)
    tracker.phase = "start"
    tracker.instant("iteration start (last step's gradients still resident)", "start")
    optimizer.zero_grad(set_to_none=True)
    tracker.instant("zero_grad(set_to_none=True)", "start")
    for micro in range(setup.grad_accum):
        if setup.grad_accum > 1:
            _next_micro_batch(tracker, model, setup, micro)
        tracker.phase = "forward"
        if setup.loss in ("inside", "fused"):  # the model's forward computes its loss from labels= (HF Trainer)
            loss = model(input_ids=tokens, labels=labels).loss
        elif setup.loss == "chunked":
            from app.trace.titan import chunked_loss

            loss = chunked_loss(tracker, model, setup, tokens, labels)
        else:
            loss = _loss_outside(tracker, model, setup, tokens, labels, logits_dtype)
        tracker.instant("loss computed", "loss")
        tracker.phase = "backward"
        loss.backward()
        del loss
        tracker.instant("end of backward", "backward")
    tracker.phase = "optimizer"
    report(f"{what}: optimizer step", 1, 1)
    if setup.stack == "torchtitan":  # its train step clips before the step (trainer.py: max_norm 1.0, foreach)
        from torchtitan.distributed.utils import clip_grad_norm_

        clip_grad_norm_(list(model.parameters()), 1.0, foreach=True)
        tracker.instant("gradient norm clipped", "optimizer")
    optimizer.step()
    tracker.instant("after the optimizer step (steady state)", "optimizer")
