"""``FSDPMemTracker`` with a timeline of named instants and the peak's location (imports torch).

The bytes resident at named instants of the schedule (each FSDP unit's all-gather, reshard, gradient
and reduce-scatter, the end of forward, the loss, the optimizer step) with the highest total since the
instant before, and where the peak happened (phase, the instant before it, the innermost module, the
op, and the FSDP2 hook running then).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any

from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker, _FSDPModMemStats

from app.trace.result import CATEGORIES, Instant, PeakAt


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
        # torchtitan's chunked loss (app.trace.titan.chunked_loss): the chunk being computed, whose hook instants
        # are labelled with it; the other units' hooks that FSDP2's final callback runs after each chunk's
        # backward are no-ops then and are not recorded
        self.chunk = ""

    # ---------------------------------------------------------------------- bookkeeping
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
        if self.chunk and unit:
            if unit != "tail":
                return
            label = f"{self.chunk}: {label}"
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

    def _forget_module_stats(self, fsdp_mod: Any) -> None:
        """Forget ``fsdp_mod``'s per-module statistics before a repeated top-level forward call. torchtitan's
        chunked loss calls the head once per chunk outside the model, which ``FSDPMemTracker`` takes for the next
        iteration and refuses (its message says to reset the module statistics). The trace reads only the
        tracker's totals, not its per-module statistics, so forgetting one module's loses nothing it reports."""
        if not self._mod_tracker.is_bw:
            self.memory_tracking.pop(fsdp_mod, None)  # type: ignore[no-untyped-call]

    def _unit(self, fsdp_mod: Any) -> str:
        return self.units.get(id(fsdp_mod), "?")

    def _where(self) -> tuple[str, str, str]:
        """(phase, innermost FSDP unit, innermost module) running now."""
        parents = sorted(self._mod_tracker.parents - {"Global"}, key=lambda p: (p.count("."), p))
        module = parents[-1].partition(".")[2] if parents else ""
        unit_fqns = [p.partition(".")[2] for p in parents]
        units = [self.units_by_fqn[f] for f in unit_fqns if f in self.units_by_fqn]
        phase = "backward" if self._mod_tracker.is_bw else self.phase
        if self._in_opt:
            phase = "optimizer"
        return phase, units[-1] if units else "root", module or "(root)"

    # ---------------------------------------------------------------------- the tracker's hooks
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
            phase, unit, module = self._where()
            # Storage FSDP2 resizes (an unsharded parameter filled by its all-gather) grows outside the
            # dispatcher: then the op seen next did not allocate the peak, the resize before it did.
            op = (
                str(self.op) if self.total_before_op <= before else f"storage resize_ (FSDP2 unshard), before {self.op}"
            )
            self.peak_at = PeakAt(phase, self.last_label, unit, module, op, self.in_hook)

    def _fsdp_state_pre_forward(self, fsdp_mod: Any, orig: Any) -> Any:
        inner = super()._fsdp_state_pre_forward(fsdp_mod, orig)

        @wraps(inner)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            unit = self._unit(fsdp_mod)
            if self.chunk:
                self._forget_module_stats(fsdp_mod)
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
            # a module whose forward never ran but whose unit's backward does: Liger's fused loss reads the head's
            # weight without calling the head (the tracker makes a module's statistics in its forward)
            if fsdp_mod not in self.memory_tracking:
                self.memory_tracking[fsdp_mod] = _FSDPModMemStats(unit)
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
