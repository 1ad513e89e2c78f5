"""The trace queue on Redis, as a deployment scales it out: Debian's ``redis-server`` on a loopback port (scripts/setup
installs it), the web side in this process, the trace worker a separate process, as on another machine. The page
behaves the same: places while a job waits, progress while it runs, its end."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from fastapi.testclient import TestClient

from app.trace import torch_installed
from app.web.app import create_app
from app.web.http.settings import Settings
from tests.support.trace_fakes import open_gate, runs, wait_for
from tests.support.trace_queue import Jobs
from tests.web.routes.test_trace_jobs import HX, QUERY, poll_until_done

ROOT = Path(__file__).resolve().parents[2]
A, B = "dp=2", "dp=4"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    server = shutil.which("redis-server")
    assert server is not None, "redis-server is missing: scripts/setup installs Debian's redis-server"
    port = _free_port()
    proc = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline and proc.poll() is None, "redis-server did not start"
            time.sleep(0.05)
    client.close()
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def _worker(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **(env or {})})


def test_jobs_wait_run_and_end_through_a_worker_process_on_redis(redis_url: str, jobs: Jobs, tmp_path: Path) -> None:
    web = jobs({A: "block"}, queue_url=redis_url, workers=0)
    worker = _worker([sys.executable, "-m", "tests.support.fake_worker", redis_url, str(tmp_path), "block"])
    try:
        web.submit(A)
        wait_for(lambda: (s := web.status(A)) is not None and s.state == "running" and s.done == 3)
        queued = web.submit(B)
        assert (queued.state, queued.place) == ("queued", 1)
        open_gate(tmp_path)
        wait_for(lambda: all((s := web.status(q)) is not None and s.state == "finished" for q in (A, B)))
        assert runs(tmp_path) == [A, B]
        assert web.status(A).summary is not None  # type: ignore[union-attr]
    finally:
        worker.kill()
        worker.wait()


@pytest.mark.trace
@pytest.mark.skipif(not torch_installed(), reason="the trace extra is not installed (pip install -e '.[trace]')")
def test_a_real_trace_through_the_page_and_zero3_lab_worker_on_redis(redis_url: str, tmp_path: Path) -> None:
    env = {"ZERO3_LAB_QUEUE": redis_url, "ZERO3_LAB_TRACE_CACHE": str(tmp_path / "worker-cache" / "traces.sqlite3")}
    worker = _worker([sys.executable, "-m", "app.cli", "worker"], env)
    try:
        app = create_app(Settings(trace_cache=tmp_path / "traces.sqlite3", trace_queue_url=redis_url))
        with TestClient(app, raise_server_exceptions=False) as client:
            assert 'role="status"' in client.post(f"/trace?{QUERY}", headers=HX).text
            done = poll_until_done(client, timeout=120)
            assert '<table class="trace-instants">' in done.text, done.text
            assert client.get(f"/trace.json?{QUERY}").json()["peak"]["total"] > 0
    finally:
        worker.terminate()
        worker.wait(timeout=20)
