"""Trace one FSDP2 training step on fake tensors with PyTorch's own ``FSDPMemTracker``.

The scenario's model is built under ``FakeTensorMode`` (shapes and dtypes, no storage, no
weights, no GPU), sharded with ``fully_shard`` per decoder layer and at the root over a fake
process group of ``dp`` ranks (this process plays rank 0), and run for two iterations of
``zero_grad(set_to_none=True)``, forward, loss, backward and optimizer step. The tracker counts
every tensor storage rank 0 would hold, by category; the second iteration is reported (the first
creates the optimizer's states and so is not the steady state).

Beside the tracker's own figures this module records a timeline: the bytes resident at named
instants of the schedule (each FSDP unit's all-gather, reshard, gradient and reduce-scatter, the
end of forward, the loss, the optimizer step) with the highest total since the instant before,
and where the peak happened (phase, the instant before it, the innermost module and the op).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import wraps
from typing import Any

from app.trace import import_torch
from app.trace.setup import TraceSetup

# The tracker's categories (``_FSDPRefType`` values) under the names the report uses, in report order.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("params", "Sharded Param"),
    ("grads", "Sharded Grad"),
    ("optimizer_states", "OptState"),
    ("unsharded_params", "Unsharded Param"),
    ("all_gather", "All Gather"),
    ("unsharded_grads", "Unsharded Grad"),
    ("reduce_scatter", "Reduce Scatter"),
    ("activations", "Activation"),
    ("temps", "Temp"),
    ("buffers", "Buffer"),
    ("inputs", "Inputs"),
)
CATEGORY_NAMES: tuple[str, ...] = tuple(name for name, _ in CATEGORIES)
ITERATIONS = 2
LEARNING_RATE = 1e-4

Progress = Callable[[str, int, int], None]  # (what, done, of)


@dataclass(frozen=True, slots=True)
class Instant:
    """The bytes resident at one named instant of the reported iteration."""

    label: str
    phase: str  # start | forward | loss | backward | optimizer
    unit: str  # the FSDP unit (``root``, ``layers.3``) or "" for a whole-step instant
    parts: dict[str, int]
    total: int
    peak_since_previous: int  # the highest total between the previous instant and this one


@dataclass(frozen=True, slots=True)
class PeakAt:
    """Where the peak of the reported iteration happened."""

    phase: str
    after: str  # the last named instant before it
    unit: str  # the innermost FSDP unit running
    module: str  # the innermost module running
    op: str  # the operator whose output made the peak
    during: str = ""  # the FSDP2 hook running then, if one was (an unshard, a reduce-scatter)


@dataclass(frozen=True, slots=True)
class TraceResult:
    setup: TraceSetup
    torch_version: str
    params: int  # distinct parameter elements of the built model (a tied head counted once)
    tensors: int
    units: tuple[str, ...]  # the FSDP units, root first
    peak: dict[str, int]  # per category, and "total"
    peak_at: PeakAt
    steady: dict[str, int]  # after the optimizer step, per category, and "total"
    step_counter_bytes: int  # inside steady["optimizer_states"]: the optimizer's 0-d step tensors
    first_iteration_peak: int
    timeline: tuple[Instant, ...]
    seconds: dict[str, float] = field(default_factory=dict)


def _unit_name(fqn: str) -> str:
    """``model.layers.3`` → ``layers.3``; the root (``""``) → ``root``."""
    if not fqn:
        return "root"
    parts = fqn.split(".")
    return ".".join(parts[-2:]) if len(parts) >= 2 else fqn


def _tracker_class(torch: Any) -> Any:
    """``FSDPMemTracker`` with a timeline of named instants and the peak's location."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

    class TimelineTracker(FSDPMemTracker):  # type: ignore[no-untyped-call]
        def __init__(self, mod: Any, optm: Any, units: dict[int, str], units_by_fqn: dict[str, str]) -> None:
            super().__init__(mod, optm)
            self.units = units
            self.units_by_fqn = units_by_fqn
            self.instants: list[Instant] = []
            self.recording = False
            self.phase = "start"
            self.last_label = "iteration start"
            self.segment_max = 0
            self.peak_at = PeakAt("start", "iteration start", "", "", "")
            self.op: object = None
            self.total_before_op = 0
            self.in_hook = ""
            self.progress: Callable[[str, str], None] = lambda phase, unit: None

        # ------------------------------------------------------------------ bookkeeping
        def _total(self) -> int:
            return sum(int(snap.get("Total", 0)) for snap in self._curr_mem_snap.values())

        def parts(self, snap: dict[Any, dict[Any, int]] | None = None) -> dict[str, int]:
            devices = self._curr_mem_snap if snap is None else snap
            by_value: dict[str, int] = {}
            for dev_snap in devices.values():
                for key, value in dev_snap.items():
                    name = getattr(key, "value", key)
                    by_value[name] = by_value.get(name, 0) + int(value)
            out = {name: by_value.get(ref, 0) for name, ref in CATEGORIES}
            out["total"] = by_value.get("Total", 0)
            return out

        def peak_total(self) -> int:
            return sum(self._peak_mem.values())

        def restart_peak(self) -> None:
            """Forget the peak so far (as ``__enter__`` sets it) and the module statistics."""
            self.reset_mod_stats()
            self._peak_mem_snap = self.get_tracker_snapshot()
            self._peak_mem = {dev: snap["Total"] for dev, snap in self._peak_mem_snap.items()}
            self.segment_max = self._total()
            self.instants.clear()

        def instant(self, label: str, phase: str, unit: str = "") -> None:
            if self.recording:
                total = self._total()
                seg = max(self.segment_max, total)
                self.instants.append(Instant(label, phase, unit, self.parts(), total, seg))
                self.segment_max = total
            self.last_label = label

        @contextmanager
        def hook(self, what: str) -> Iterator[None]:
            outer, self.in_hook = self.in_hook, what
            try:
                yield
            finally:
                self.in_hook = outer

        def _unit(self, fsdp_mod: Any) -> str:
            return self.units.get(id(fsdp_mod), "?")

        # ------------------------------------------------------------------ the tracker's hooks
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.op = func
            self.total_before_op = self._total()
            return super().__torch_dispatch__(func, types, args, kwargs)  # type: ignore[no-untyped-call]

        def _update_peak_stats(self, peak_state: Any) -> None:
            before = self.peak_total()
            super()._update_peak_stats(peak_state)
            total = self._total()
            self.segment_max = max(self.segment_max, total)
            if self.peak_total() > before:
                parents = sorted(self._mod_tracker.parents - {"Global"}, key=lambda p: (p.count("."), p))
                module = parents[-1].partition(".")[2] if parents else ""
                unit_fqns = [p.partition(".")[2] for p in parents]
                units = [self.units_by_fqn[f] for f in unit_fqns if f in self.units_by_fqn]
                phase = "backward" if self._mod_tracker.is_bw else self.phase
                if self._in_opt:
                    phase = "optimizer"
                # Storage FSDP2 resizes (an unsharded parameter filled by its all-gather) grows outside the
                # dispatcher: then the op seen next did not allocate the peak, the resize before it did.
                op = (
                    str(self.op)
                    if self.total_before_op <= before
                    else f"storage resize_ (FSDP2 unshard), before {self.op}"
                )
                unit = units[-1] if units else "root"
                self.peak_at = PeakAt(phase, self.last_label, unit, module or "(root)", op, self.in_hook)

        def _fsdp_state_pre_forward(self, fsdp_mod: Any, orig: Any) -> Any:
            inner = super()._fsdp_state_pre_forward(fsdp_mod, orig)

            @wraps(inner)
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                unit = self._unit(fsdp_mod)
                with self.hook(f"pre-forward of {unit} (unshard)"):
                    out = inner(*args, **kwargs)
                if self._mod_tracker.is_bw:
                    self.instant(f"recompute {unit}: forward again", "backward", unit)
                else:
                    self.instant(f"forward {unit}: unsharded", "forward", unit)
                    self.progress("forward", unit)
                return out

            return wrapped

        def _fsdp_state_post_forward(self, fsdp_mod: Any, orig: Any) -> Any:
            inner = super()._fsdp_state_post_forward(fsdp_mod, orig)

            @wraps(inner)
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                unit = self._unit(fsdp_mod)
                with self.hook(f"post-forward of {unit} (reshard)"):
                    out = inner(*args, **kwargs)
                if self._mod_tracker.is_bw:
                    self.instant(f"recompute {unit}: done", "backward", unit)
                else:
                    self.instant(f"forward {unit}: done", "forward", unit)
                return out

            return wrapped

        def _fsdp_param_group_pre_backward(self, fsdp_mod: Any, orig: Any) -> Any:
            inner = super()._fsdp_param_group_pre_backward(fsdp_mod, orig)

            @wraps(inner)
            def wrapped(*args: Any, **kwargs: Any) -> None:
                unit = self._unit(fsdp_mod)
                with self.hook(f"pre-backward of {unit} (unshard, prefetch)"):
                    inner(*args, **kwargs)
                self.instant(f"backward {unit}: unsharded", "backward", unit)
                self.progress("backward", unit)

            return wrapped

        def _fsdp_param_group_post_backward(self, fsdp_mod: Any, orig: Any) -> Any:
            inner = super()._fsdp_param_group_post_backward(fsdp_mod, orig)

            @wraps(inner)
            def wrapped(*args: Any, **kwargs: Any) -> None:
                unit = self._unit(fsdp_mod)
                self.instant(f"backward {unit}: gradients computed", "backward", unit)
                with self.hook(f"post-backward of {unit} (reshard, reduce-scatter)"):
                    inner(*args, **kwargs)
                self.instant(f"backward {unit}: reduce-scattered", "backward", unit)

            return wrapped

    return TimelineTracker


@contextmanager
def _fake_world(torch: Any, dp: int) -> Iterator[Any]:
    """A fake process group of ``dp`` ranks (this process is rank 0) and its 1-D CPU mesh."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise RuntimeError("a process group is already initialised in this process; the trace needs its own")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=dp)
    try:
        yield init_device_mesh("cpu", (dp,))
    finally:
        dist.destroy_process_group()


def _dtype(torch: Any, width: int) -> Any:
    return {2: torch.bfloat16, 4: torch.float32}[width]


def _optimizer(torch: Any, setup: TraceSetup, params: Any) -> Any:
    if setup.opt_states == 2:
        return torch.optim.AdamW(params, lr=LEARNING_RATE, foreach=setup.foreach)
    momentum = 0.9 if setup.opt_states == 1 else 0.0
    return torch.optim.SGD(params, lr=LEARNING_RATE, momentum=momentum, foreach=setup.foreach)


def _step_counter_bytes(optimizer: Any) -> int:
    """Bytes of the optimizer's per-parameter ``step`` tensors (AdamW keeps one 0-d tensor each)."""
    total = 0
    for state in optimizer.state.values():
        step = state.get("step")
        if step is not None and hasattr(step, "untyped_storage"):
            total += int(step.untyped_storage().nbytes())
    return total


def run_trace(setup: TraceSetup, progress: Progress | None = None) -> TraceResult:
    """Trace ``setup`` (see the module docstring); ``progress`` hears what is done, as it is done."""
    report: Progress = progress or (lambda what, done, of: None)
    clock = time.perf_counter()
    seconds: dict[str, float] = {}
    torch = import_torch()
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._composable.checkpoint_activation import checkpoint
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from app.trace.models import build_model, decoder_layers

    seconds["import"] = time.perf_counter() - clock
    arch = setup.architecture
    layers_total = arch.layers
    with _fake_world(torch, setup.dp) as mesh, FakeTensorMode():
        clock = time.perf_counter()
        model = build_model(arch, lambda done, of: report("building layers", done, of))
        model.train()
        params = sum(p.numel() for p in model.parameters())
        tensors = sum(1 for _ in model.parameters())
        seconds["build"] = time.perf_counter() - clock

        clock = time.perf_counter()
        mp = MixedPrecisionPolicy(param_dtype=_dtype(torch, setup.gather_bytes),
                                  reduce_dtype=_dtype(torch, setup.reduce_bytes))  # fmt: skip
        if setup.param_bytes != 4:  # the parameters only: buffers (rotary tables) stay FP32
            for p in model.parameters():
                p.data = p.data.to(_dtype(torch, setup.param_bytes))
        layers = decoder_layers(model)
        for k, layer in enumerate(layers):
            if setup.act_policy == "full":
                checkpoint(layer)
            fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=setup.reshard_after_forward)
            report("sharding layers", k + 1, layers_total)
        # The root keeps fully_shard's default (None): it is not resharded after forward, since backward
        # needs the head and the final norm first (the recipe of torchtitan and FSDP2's documentation).
        fully_shard(model, mesh=mesh, mp_policy=mp)
        unit_fqns = {id(m): fqn for fqn, m in model.named_modules() if m is model or any(m is la for la in layers)}
        units = {key: _unit_name(fqn) for key, fqn in unit_fqns.items()}
        optimizer = _optimizer(torch, setup, model.parameters())
        seconds["shard"] = time.perf_counter() - clock

        tokens = torch.randint(0, arch.vocab, (setup.micro_batch, setup.seq_len))
        labels = torch.randint(0, arch.vocab, (setup.micro_batch, setup.seq_len))
        tracker = _tracker_class(torch)(model, optimizer, units, {fqn: _unit_name(fqn) for fqn in unit_fqns.values()})
        tracker.track_inputs((tokens, labels))
        logits_dtype = _dtype(torch, setup.logits_bytes)
        first_peak = 0
        with tracker:
            for iteration in range(1, ITERATIONS + 1):
                clock = time.perf_counter()
                what = f"iteration {iteration}/{ITERATIONS}"
                done = {"forward": 0, "backward": 0}

                def step(phase: str, unit: str, what: str = what, done: dict[str, int] = done) -> None:
                    done[phase] += 1
                    report(f"{what}: {phase}", min(done[phase], layers_total + 1), layers_total + 1)

                tracker.progress = step
                if iteration == ITERATIONS:
                    first_peak = tracker.peak_total()
                    tracker.restart_peak()
                    tracker.recording = True
                tracker.phase = "start"
                tracker.instant("iteration start (last step's gradients still resident)", "start")
                optimizer.zero_grad(set_to_none=True)
                tracker.instant("zero_grad(set_to_none=True)", "start")
                tracker.phase = "forward"
                logits = model(tokens)
                tracker.instant("end of forward (logits)", "forward")
                tracker.phase = "loss"
                if logits.dtype != logits_dtype:
                    logits = logits.to(logits_dtype)
                    tracker.instant("logits cast for the loss", "loss")
                loss = F.cross_entropy(logits.view(-1, arch.vocab), labels.view(-1))
                del logits  # as a training loop drops its reference before backward (torchtitan's `del pred`)
                tracker.instant("loss computed", "loss")
                tracker.phase = "backward"
                loss.backward()  # type: ignore[no-untyped-call]
                del loss
                tracker.instant("end of backward", "backward")
                tracker.phase = "optimizer"
                report(f"{what}: optimizer step", 1, 1)
                optimizer.step()
                tracker.instant("after the optimizer step (steady state)", "optimizer")
                seconds[f"iteration {iteration}"] = time.perf_counter() - clock
        peak = tracker.parts(tracker.get_tracker_snapshot("peak"))
        steady = tracker.parts()
        step_bytes = _step_counter_bytes(optimizer)
        ordered_units = tuple(sorted(units.values(), key=lambda u: (u != "root", int(u.rpartition(".")[2] or 0)
                                                                    if u != "root" else 0)))  # fmt: skip
        return TraceResult(
            setup=setup,
            torch_version=str(torch.__version__),
            params=int(params),
            tensors=tensors,
            units=ordered_units,
            peak=peak,
            peak_at=tracker.peak_at,
            steady=steady,
            step_counter_bytes=step_bytes,
            first_iteration_peak=first_peak,
            timeline=tuple(tracker.instants),
            seconds=seconds,
        )
