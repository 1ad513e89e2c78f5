"""Driving Debian's wrk against the lab through ``scenarios.lua`` (a random scenario per request),
and reading its report."""

from __future__ import annotations

import os
import re
from pathlib import Path

LUA = Path(__file__).with_name("scenarios.lua")


def command(base: str, path: str, hx: bool, seconds: int, connections: int, seed: int,
            *extra: str) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    """wrk's argv (one thread) and environment for ``path`` (with ``HX-Request`` when ``hx``)."""
    env = {**os.environ, "ZERO3_PATH": path, "ZERO3_HX": "1" if hx else "0", "ZERO3_SEED": str(seed)}
    return ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", *extra, "-s", str(LUA), base], env


def requests_per_second(out: str) -> float:
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]


def non_2xx(out: str) -> int:
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return int(bad.group(1)) if bad else 0
