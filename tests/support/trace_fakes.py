"""A fake ``zero3-lab trace`` for the trace-job tests: a small Python child that says progress lines as
the real one does, then prints a report, fails, hangs or waits for the test to let it finish.

The queue runs it exactly as it runs the real trace (a child process, its stderr read line by line,
its stdout parsed), so the tests exercise the real process handling in milliseconds.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from app.trace.runner import Command

SCRIPT = r"""
import os, sys, time
from app.trace.watch import watch_parent
watch_parent()  # as the real trace does: it ends once its worker is gone
mode, log, gate, report, query = sys.argv[1:6]
with open(log + ".pids", "a", encoding="utf-8") as f:
    f.write(str(os.getpid()) + "\n")
with open(log, "a", encoding="utf-8") as f:
    f.write(query + "\n")
for step in ("building layers 2/2", "sharding layers 1/2", "sharding layers 2/2", "iteration 1/2: forward 3/3"):
    print("zero3-lab trace: " + step, file=sys.stderr, flush=True)
if mode == "block":  # until the test opens the gate (at most 20 s, so that nothing hangs for ever)
    end = time.time() + 20
    while not os.path.exists(gate) and time.time() < end:
        time.sleep(0.01)
elif mode == "hang":
    time.sleep(20)
elif mode == "fail":
    print("zero3-lab: error: trace: --model: family 'bert' is not yet traceable", file=sys.stderr)
    sys.exit(2)
elif mode == "crash":
    print("Traceback (most recent call last):", file=sys.stderr)
    print("RuntimeError: out of fake memory", file=sys.stderr)
    sys.exit(1)
elif mode == "garbage":
    print("this is not JSON")
    sys.exit(0)
with open(report, encoding="utf-8") as f:
    sys.stdout.write(f.read())
"""

# What the page reads of a report (app.trace.store.summarise), with the real report's shape.
REPORT: dict[str, Any] = {
    "schema": "zero3-lab.trace/1",
    "trace": {"model": "custom llama config", "world_size": 4, "torch": "2.13.0+cpu", "seconds": {"import": 1.5}},
    "peak": {"activations": 100, "total": 759_868},
    "peak_at": {"phase": "backward", "after": "backward layers.1: reduce-scattered", "unit": "layers.1",
                "module": "model.layers.1", "op": "mm", "during": ""},
    "modelled": {"stage3_peak": 758_464, "stage3_peak_instant": "backward at layer 0 (the first)",
                 "stage3_declared_peak": 534_784},
    "instants": [
        {"key": "end-of-forward", "instant": "end of forward", "modelled": 423_808, "traced": 425_204},
        {"key": "head-backward", "instant": "backward at the head", "modelled": 524_544, "traced": None},
        {"key": "backward-layer-0", "instant": "backward at layer 0 (the first)", "modelled": 758_464,
         "traced": 759_868},
    ],
    "communication": {
        "all_gather": {"traced": 19_997_696, "lab": 19_997_696, "lab_vs_traced": "+0.0 %"},
        "reduce_scatter": {"traced": 9_998_848, "lab": 9_998_848, "lab_vs_traced": "+0.0 %"},
        "all_reduce": {"traced": 0, "lab": 0, "lab_vs_traced": None},
    },
}  # fmt: skip


def fake_command(folder: Path, modes: Mapping[str, str] | None = None, default: str = "ok") -> Command:
    """A command for :class:`TraceQueue`: each query runs the fake in ``modes[query]`` (else ``default``):
    ``ok``, ``block`` (until :func:`open_gate`), ``hang``, ``fail``, ``crash`` or ``garbage``. Every run
    appends its query to :func:`runs`'s log."""
    report = folder / "report.json"
    report.write_text(json.dumps(REPORT), encoding="utf-8")
    chosen = dict(modes or {})

    def command(query: str) -> list[str]:
        mode = chosen.get(query, default)
        return [sys.executable, "-c", SCRIPT, mode, str(folder / "runs.log"), str(folder / "gate"), str(report), query]

    return command


def open_gate(folder: Path) -> None:
    (folder / "gate").touch()


def runs(folder: Path) -> list[str]:
    """The queries the fake ran, in order."""
    log = folder / "runs.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def pids(folder: Path) -> list[int]:
    """The process ids of the fakes that ran, in order."""
    log = folder / "runs.log.pids"
    return [int(line) for line in log.read_text(encoding="utf-8").split()] if log.exists() else []


def wait_for(predicate: Callable[[], object], timeout: float = 15) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)
