"""zero3-lab's memory probe: per-rank JSON lines at named instants of a real training step.

One file, the standard library and torch only, so it can be copied onto a cluster where zero3-lab
is not installed (``zero3-lab probe > zero3_probe.py`` prints it). torch is imported inside the
functions that read the device, so importing this module needs no torch and no GPU.

Usage inside a standard FSDP2 loop (docs/observed.md has the whole recipe)::

    torch.cuda.set_device(local_rank)          # first: the probe reads the current device
    probe = Probe("probe")                     # probe/rank-<rank>.jsonl, one file per rank
    probe.start()                              # model sharded, optimizer built, nothing run yet
    for inputs, labels in loader:
        logits = model(inputs)
        probe.mark("end-of-forward")
        loss = loss_fn(logits, labels)
        del logits                             # the loss's graph holds what backward needs
        loss.backward()
        probe.mark("end-of-backward")
        optimizer.step()
        probe.mark("after-step")
        optimizer.zero_grad(set_to_none=True)

Each line is one JSON object with exact integers (bytes from the caching allocator):
``allocated`` (``torch.cuda.memory_allocated``) and ``reserved`` at the mark, ``max_allocated`` and
``max_reserved``: the highest since the previous mark (the probe resets the device's peak counters
after each record, so every record holds the peak of its own stretch of the step). The ``start``
record also holds the device's ``total`` and ``used`` memory (``torch.cuda.mem_get_info``): used
minus reserved there is the CUDA context and whatever else lives outside the allocator.
``zero3-lab reconcile`` reads the concatenated files (``cat probe/*.jsonl > observed.jsonl``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FORMAT = 1  # the "v" of every record; zero3-lab reconcile refuses versions it does not know
START = "start"
# The marks a training step can make, in step order. ``end-of-forward`` is the lab's schedule instant of
# the same key; the stretch before ``end-of-backward`` holds the lab's ``loss-backward`` and
# ``backward-layer-<k>`` instants, the stretch before ``after-step`` its ``optimizer-step``.
MARKS: tuple[str, ...] = ("end-of-forward", "end-of-backward", "after-step")


def _torch() -> Any:
    import torch  # lazily: importing the probe must not need torch

    return torch


def _rank_and_world() -> tuple[int, int]:
    """torch.distributed's rank and world size when a process group exists, else torchrun's variables."""
    dist = _torch().distributed
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank()), int(dist.get_world_size())
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def read_device(device: int, *, with_totals: bool) -> dict[str, int]:
    """The caching allocator's figures on ``device`` (and, at the start, the device's total and used
    memory), then the peak counters reset so that the next record's maxima are its own stretch's."""
    cuda = _torch().cuda
    figures = {
        "allocated": int(cuda.memory_allocated(device)),
        "max_allocated": int(cuda.max_memory_allocated(device)),
        "reserved": int(cuda.memory_reserved(device)),
        "max_reserved": int(cuda.max_memory_reserved(device)),
    }
    if with_totals:
        free, total = cuda.mem_get_info(device)
        figures["device_total"] = int(total)
        figures["device_used"] = int(total) - int(free)
    cuda.reset_peak_memory_stats(device)
    return figures


def record(rank: int, world: int, step: int, instant: str, figures: dict[str, int]) -> dict[str, Any]:
    """One line's object: who, when, and the figures (every value an exact integer)."""
    return {"v": FORMAT, "rank": rank, "world": world, "step": step, "instant": instant, **figures}


class Probe:
    """Writes this rank's records to ``<folder>/rank-<rank>.jsonl`` (anew at :meth:`start`, then appending,
    flushed per line).

    ``rank``, ``world`` and ``device`` default to the process group's and the current CUDA device.
    The step number advances by itself when a mark comes at or before the previous one in step order,
    so a loop that skips a mark still numbers its steps right.
    """

    def __init__(
        self, folder: str | os.PathLike[str] = "probe", *, rank: int | None = None, world: int | None = None,
        device: int | None = None,
    ) -> None:  # fmt: skip
        found_rank, found_world = (rank, world) if rank is not None and world is not None else _rank_and_world()
        self.rank = found_rank if rank is None else rank
        self.world = found_world if world is None else world
        self.device = int(_torch().cuda.current_device()) if device is None else device
        self.path = Path(folder).joinpath(f"rank-{self.rank}.jsonl")  # joinpath: no "/" in a byte-counting module
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.step = 0
        self._last = -1  # the position in MARKS of the previous mark; -1: none yet this step

    def _write(self, instant: str, figures: dict[str, int], mode: str = "a") -> None:
        line = json.dumps(record(self.rank, self.world, self.step, instant, figures), separators=(",", ":"))
        with self.path.open(mode, encoding="utf-8") as handle:
            handle.write(line + "\n")

    def start(self) -> None:
        """Before the first step (model sharded, optimizer built): the device's used memory too. A run
        starts its file anew, so running again in the same folder replaces the last run's records."""
        self.step, self._last = 0, -1
        self._write(START, read_device(self.device, with_totals=True), mode="w")

    def mark(self, instant: str) -> None:
        """Record the named instant, one of :data:`MARKS`."""
        if instant not in MARKS:
            raise ValueError(f"unknown instant {instant!r}: one of {', '.join(MARKS)}")
        position = MARKS.index(instant)
        if position <= self._last:
            self.step += 1
        self._last = position
        self._write(instant, read_device(self.device, with_totals=False))


def source() -> str:
    """This file's text, for ``zero3-lab probe``."""
    return Path(__file__).read_text(encoding="utf-8")
