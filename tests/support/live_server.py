"""Waiting for a ``zero3-lab serve`` process a test or benchmark started: one loop, for every such fixture."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path


def wait_until_serving(
    base: str, proc: subprocess.Popen[bytes], log: Path | None = None, timeout_s: float = 30
) -> None:
    """Poll ``base``/healthz until it answers 200. If the process ends or ``timeout_s`` passes first, kill it and
    raise RuntimeError with the end of its log (when one is given). A liveness bound, not a benchmark."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(base + "/healthz", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            tail = log.read_text(encoding="utf-8", errors="replace")[-2000:] if log is not None else ""
            raise RuntimeError(f"the lab did not start; its log ends:\n{tail}" if tail else "the lab did not start")
        time.sleep(0.1)
