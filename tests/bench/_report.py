"""What the locust benchmarks (``workshop.py``'s profiles) print: percentiles, the machine, where the CPU went."""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
BUSY_OTHER = 0.15  # cores used by other processes beyond which a run is flagged


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (the smallest value with at least q % of the values at or below it)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def machine() -> str:
    model = platform.processor() or "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    cores = len(os.sched_getaffinity(0))
    return f"machine: {cores} cores ({model}), Python {platform.python_version()}, {platform.system()}"


@dataclass(frozen=True)
class Cpu:
    """Where the machine's CPU went during a phase, in cores (1.0 = one core busy throughout)."""

    server: float | None  # None: not known (--url), counted in other
    generator: float
    other: float

    def line(self) -> str:
        if self.server is None:
            other = f"other processes (the server included) {self.other:.2f}"
            return f"CPU: load generator {self.generator:.2f} cores, {other}"
        text = f"CPU: server {self.server:.2f} cores, load generator {self.generator:.2f}, "
        text += f"other processes {self.other:.2f}"
        if self.other > BUSY_OTHER:
            text += "  <- the machine was busy with other work: these figures are not reliable"
        return text


def measured(server_pid: int | None, run: Callable[[], T]) -> tuple[T, Cpu]:
    """``run()``'s result and the CPU the server (when its pid is known), this process and everything
    else used meanwhile."""
    from tests.bench import _server

    def server_cpu() -> float:
        return _server.cpu_seconds(server_pid) if server_pid is not None else 0.0

    wall, server, own, busy = time.monotonic(), server_cpu(), time.process_time(), _server.machine_busy_seconds()
    result = run()
    wall = time.monotonic() - wall
    server = server_cpu() - server
    own = time.process_time() - own
    busy = _server.machine_busy_seconds() - busy
    return result, Cpu(server / wall if server_pid else None, own / wall, max(0.0, busy - server - own) / wall)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def print_failures(errors: dict[str, int], most: int = 5) -> None:
    """The commonest failures, with their counts."""
    for error, count in sorted(errors.items(), key=lambda kv: -kv[1])[:most]:
        print(f"  failure ×{count}: {error}")


def print_goals(goals: list[tuple[bool, str]]) -> int:
    """Each goal with PASS or FAIL; the exit status: 0 when all pass, else 1."""
    print("goals:")
    for ok, text in goals:
        print(f"  {verdict(ok)}  {text}")
    return 0 if all(ok for ok, _ in goals) else 1
