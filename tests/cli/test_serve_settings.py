"""What a container sets once: ``serve``'s host, port and workers from the environment (its health check reads the
same port), and the start-up checks of the trace cache and queue (issue 34: a data volume that is not writable, a
Redis URL that does not answer — each a one-line message naming the setting at start, exit 2, not a traceback)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import build_parser
from app.trace import torch_installed
from tests.support.cli_run import ROOT


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_host_port_and_workers_default_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZERO3_LAB_HOST", "0.0.0.0")
    monkeypatch.setenv("ZERO3_LAB_PORT", "8123")
    monkeypatch.setenv("ZERO3_LAB_WORKERS", "3")
    monkeypatch.setenv("ZERO3_LAB_TRACE_WORKERS", "0")
    args = build_parser().parse_args(["serve"])
    assert (args.host, args.port, args.workers) == ("0.0.0.0", 8123, 3)
    flags = build_parser().parse_args(["serve", "--port", "9000", "--workers", "2"])
    assert (flags.port, flags.workers) == (9000, 2)  # a flag wins over the environment


@pytest.mark.parametrize(("name", "value"), [("ZERO3_LAB_PORT", "abc"), ("ZERO3_LAB_PORT", "70000"),
                                             ("ZERO3_LAB_WORKERS", "0")])  # fmt: skip
def test_a_bad_setting_is_named_at_start(name: str, value: str) -> None:
    done = _run({name: value}, "serve")
    assert done.returncode == 2
    assert name in done.stderr and "Traceback" not in done.stderr


def test_a_worker_whose_redis_does_not_answer_stops_with_one_line(tmp_path: Path) -> None:
    url = f"redis://127.0.0.1:{_closed_port()}/0"
    done = _run({"ZERO3_LAB_QUEUE": url, "ZERO3_LAB_TRACE_CACHE": str(tmp_path / "t.sqlite3")}, "worker")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zero3-lab worker: ZERO3_LAB_QUEUE = redis://127.0.0.1:")
    assert "no Redis answers there" in lines[0]


def test_a_worker_whose_cache_cannot_be_written_stops_with_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    done = _run({"ZERO3_LAB_TRACE_CACHE": str(blocker / "traces.sqlite3")}, "worker")
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"zero3-lab worker: ZERO3_LAB_TRACE_CACHE (the queue's file is beside it): {blocker} is a file, not a folder"
    )


@pytest.mark.skipif(not torch_installed(), reason="without the trace extra serve writes no trace, so it checks nothing")
def test_serve_with_traces_checks_its_cache_and_queue_at_start(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    done = _run({"ZERO3_LAB_TRACE_CACHE": str(blocker / "traces.sqlite3")}, "serve", "--port", str(_closed_port()))
    assert done.returncode == 2 and "ZERO3_LAB_TRACE_CACHE" in done.stderr and "Traceback" not in done.stderr
    url = f"redis://127.0.0.1:{_closed_port()}/0"
    done = _run({"ZERO3_LAB_QUEUE": url, "ZERO3_LAB_TRACE_CACHE": str(tmp_path / "t.sqlite3")}, "serve")
    assert done.returncode == 2 and "no Redis answers there" in done.stderr and "Traceback" not in done.stderr
