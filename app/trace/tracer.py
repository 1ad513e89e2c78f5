"""Trace one FSDP2 training step on fake tensors with PyTorch's own ``FSDPMemTracker``.

The scenario's model is built under ``FakeTensorMode`` (shapes and dtypes, no storage, no
weights, no GPU), sharded with ``fully_shard`` per decoder layer and at the root over a fake
process group of ``dp`` ranks (this process plays rank 0), and run for two iterations of
``zero_grad(set_to_none=True)``, forward, loss, backward and optimizer step. The tracker counts
every tensor storage rank 0 would hold, by category; the second iteration is reported (the first
creates the optimizer's states and so is not the steady state).

Beside the tracker's own figures the trace records a timeline (:mod:`app.trace.timeline`): the bytes
resident at named instants of the schedule (each FSDP unit's all-gather, reshard, gradient and
reduce-scatter, the end of forward, the loss, the optimizer step) with the highest total since the
instant before, and where the peak happened (phase, the instant before it, the innermost module and
the op). The step's pieces are :mod:`app.trace.step`; what a trace found, :mod:`app.trace.result`.
Nothing here imports torch until :func:`run_trace` runs.
"""

from __future__ import annotations

import time

from app.trace import import_torch
from app.trace.result import Progress, TraceResult
from app.trace.setup import TraceSetup

ITERATIONS = 2


def run_trace(setup: TraceSetup, progress: Progress | None = None) -> TraceResult:
    """Trace ``setup`` (see the module docstring); ``progress`` hears what is done, as it is done."""
    report: Progress = progress or (lambda what, done, of: None)
    clock = time.perf_counter()
    seconds: dict[str, float] = {}
    torch = import_torch()
    from torch._subclasses.fake_tensor import FakeTensorMode

    from app.trace import step
    from app.trace.collectives import CollectiveBytes
    from app.trace.timeline import TimelineTracker

    seconds["import"] = time.perf_counter() - clock
    arch = setup.architecture
    with step.fake_world(setup.dp) as mesh, FakeTensorMode(), step.stack_context(setup):
        clock = time.perf_counter()
        model = step.build(setup, report)
        params = sum(p.numel() for p in model.parameters())
        tensors = sum(1 for _ in model.parameters())
        seconds["build"] = time.perf_counter() - clock

        clock = time.perf_counter()
        sharded = step.shard(model, setup, mesh, report)
        seconds["shard"] = time.perf_counter() - clock

        tokens = torch.randint(0, arch.vocab, (setup.micro_batch, setup.seq_len))
        labels = torch.randint(0, arch.vocab, (setup.micro_batch, setup.seq_len))
        tracker = TimelineTracker(model, sharded.optimizer, sharded.units, sharded.units_by_fqn)
        tracker.track_inputs((tokens, labels))
        first_peak = 0
        collectives = CollectiveBytes()  # entered for the reported iteration only
        with tracker:
            for iteration in range(1, ITERATIONS + 1):
                clock = time.perf_counter()
                what = f"iteration {iteration}/{ITERATIONS}"
                tracker.progress = step.layer_progress(report, what, arch.layers)
                if iteration == ITERATIONS:
                    first_peak = tracker.peak_total()
                    tracker.restart_peak()
                    tracker.recording = True
                    with collectives:
                        step.iteration(tracker, sharded, setup, tokens, labels, report, what)
                else:
                    step.iteration(tracker, sharded, setup, tokens, labels, report, what)
                seconds[f"iteration {iteration}"] = time.perf_counter() - clock
        return TraceResult(
            setup=setup,
            torch_version=str(torch.__version__),
            params=int(params),
            tensors=tensors,
            units=sharded.ordered_units(),
            peak=tracker.parts(tracker.get_tracker_snapshot("peak")),
            peak_at=tracker.peak_at,
            steady=tracker.parts(),
            step_counter_bytes=step.step_counter_bytes(sharded.optimizer),
            first_iteration_peak=first_peak,
            timeline=tuple(tracker.instants),
            collectives=dict(collectives.sums),
            seconds=seconds,
        )
