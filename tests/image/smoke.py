"""The image's smoke tests, as a user runs the image: run by ``scripts/image`` after it builds (not by pytest: they
need a container engine and minutes). Each check prints one ``ok:`` line; the first that fails stops the run with
what it saw.

    .venv/bin/python -m tests.image.smoke --engine podman --lean zero3-lab:latest \\
        [--trace-image zero3-lab:trace] [--compose PODMAN_COMPOSE --redis-image IMAGE]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from app.ledger.models.reference import compact
from app.ledger.scenario import parse_scenario
from app.ledger.scenario.links import canonical_query

ROOT = Path(__file__).resolve().parents[2]
UID = "10001"
START_S = 90  # liveness bounds, not benchmarks
TRACE_S = 300
# A small Llama-style model in the FSDP2 layout: its trace takes seconds on a CPU.
SMALL = compact({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                 "intermediate_size": 128, "vocab_size": 128})  # fmt: skip
TRACE_QUERY = canonical_query(parse_scenario({
    "model": SMALL, "dp": 4, "seq_len": 16, "param_bytes": 4, "master_bytes": 0, "grad_bytes": 4, "gather_bytes": 2,
}))  # fmt: skip
HX = {"HX-Request": "true"}


def ok(text: str) -> None:
    print(f"ok: {text}", flush=True)


def fail(text: str) -> NoReturn:
    raise SystemExit(f"smoke test failed: {text}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Engine:
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run([self.name, *args], capture_output=True, text=True, check=False, timeout=START_S)
        except subprocess.TimeoutExpired:
            fail(f"{self.name} {' '.join(args[:3])} … did not end in {START_S} s")
        if check and done.returncode != 0:
            fail(f"{self.name} {' '.join(args[:3])} …: {done.stderr.strip()[-500:]}")
        return done

    @contextmanager
    def container(self, image: str, *args: str) -> Iterator[str]:
        cid = self("run", "-d", *args, image).stdout.strip()
        try:
            yield cid
        finally:
            self("rm", "-f", cid, check=False)


def get(url: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, data=data, headers=headers or {}, method="POST" if data is not None else "GET"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            status: int = response.status
            return status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def wait_healthy(base: str, logs: Callable[[], str] | None = None) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        try:
            if get(base + "/healthz")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    fail(f"{base}/healthz did not answer in {START_S} s" + (f"; logs:\n{logs()}" if logs else ""))


def check_page(base: str, what: str) -> None:
    status, page = get(base + "/")
    if status != 200 or b"Your run" not in page:
        fail(f"{what}: / answered {status}")
    status, csv = get(base + "/receipt.csv")
    if status != 200 or b"peak" not in csv.lower():
        fail(f"{what}: /receipt.csv answered {status}")
    htmx = get(base + "/static/vendor/htmx.min.js")[0]
    docs = get(base + "/docs")[0]
    if (htmx, docs) != (200, 200):
        fail(f"{what}: /static/vendor/htmx.min.js {htmx}, /docs {docs}")
    ok(f"{what}: /healthz, the page, a receipt download (/receipt.csv, {len(csv):,} B), htmx and /docs")


def lean(engine: Engine, image: str) -> None:
    port = free_port()
    with engine.container(image, "--read-only", "--cap-drop", "ALL", "-p", f"127.0.0.1:{port}:8000") as cid:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, lambda: engine("logs", cid, check=False).stderr[-2000:])
        ok(f"{image} started with --read-only --cap-drop ALL and answers /healthz")
        check_page(base, image)
        uid = engine("exec", cid, "id", "-u").stdout.strip()
        if uid != UID:
            fail(f"{image} runs as uid {uid}, not {UID}")
        ok(f"{image} runs as the numeric non-root user {UID}:{UID}")
        if engine.name == "podman":
            engine("healthcheck", "run", cid)
            ok(f"{image}: its HEALTHCHECK passes (kept by --format docker)")
    port = free_port()
    with engine.container(image, "-e", "ZERO3_LAB_PORT=8080", "-p", f"127.0.0.1:{port}:8080") as cid:
        wait_healthy(f"http://127.0.0.1:{port}")
        if engine.name == "podman":
            engine("healthcheck", "run", cid)
        ok(f"{image} with ZERO3_LAB_PORT=8080 serves there and its health check follows")


def trace_through(base: str, what: str) -> dict[str, object]:
    status, _ = get(f"{base}/trace?{TRACE_QUERY}", data=b"", headers=HX)
    if status != 200:
        fail(f"{what}: POST /trace answered {status}")
    deadline = time.monotonic() + TRACE_S
    while time.monotonic() < deadline:
        status, body = get(f"{base}/trace.json?{TRACE_QUERY}")
        if status == 200:
            report: dict[str, object] = json.loads(body)
            return report
        time.sleep(1)
    fail(f"{what}: the trace did not finish in {TRACE_S} s")


def _total(report: dict[str, object]) -> int:
    peak = report.get("peak")
    total = peak.get("total") if isinstance(peak, dict) else None
    if not isinstance(total, int) or total <= 0:
        fail(f"the trace's report has no peak: {str(report)[:300]}")
    return total


def traced(engine: Engine, image: str) -> None:
    port = free_port()
    with engine.container(image, "--read-only", "--cap-drop", "ALL", "-p", f"127.0.0.1:{port}:8000") as cid:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, lambda: engine("logs", cid, check=False).stderr[-2000:])
        report = trace_through(base, image)
        ok(f"{image}: a trace started on the page finished in the container (traced peak {_total(report):,} B)")
    done = engine("run", "--rm", "--read-only", "--cap-drop", "ALL", "-v", "zero3-lab-smoke-ro:/var/lib/zero3-lab:ro",
                  image, check=False)  # fmt: skip
    engine("volume", "rm", "-f", "zero3-lab-smoke-ro", check=False)
    if done.returncode != 2 or "ZERO3_LAB_TRACE_CACHE" not in done.stderr or "Traceback" in done.stderr:
        fail(f"{image} with a read-only data volume: exit {done.returncode}, {done.stderr.strip()[-300:]!r}")
    ok(f"{image} with a read-only data volume stops at start: {done.stderr.strip().splitlines()[-1]}")


def composed(compose: str, image: str, redis: str) -> None:
    port = free_port()
    env = {**os.environ, "ZERO3_LAB_IMAGE": image, "REDIS_IMAGE": redis, "ZERO3_LAB_PUBLISH": f"127.0.0.1:{port}",
           "ZERO3_LAB_REDIS_PASSWORD": secrets.token_hex(16)}  # fmt: skip
    project = ["-p", "zero3-lab-smoke", "-f", str(ROOT / "compose.yaml")]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*compose.split(), *project, *args], env=env, capture_output=True, text=True, check=False,
                              timeout=TRACE_S)  # fmt: skip

    try:
        up = run("up", "-d", "--no-build")
        if up.returncode != 0:
            fail(f"compose up: {up.stderr.strip()[-800:]}")
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, lambda: run("logs").stdout[-3000:])
        ok("compose.yaml: web, Redis and one worker are up; the page answers")
        report = trace_through(base, "compose")
        ok(f"compose.yaml: a trace asked on the page ran on the worker via Redis (traced peak {_total(report):,} B)")
    finally:
        run("down", "-v")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--engine", default="podman")
    p.add_argument("--lean", required=True)
    p.add_argument("--trace-image")
    p.add_argument("--compose", help="the compose command (podman-compose, or 'docker compose')")
    p.add_argument("--redis-image", default="docker.io/library/redis:7-bookworm")
    args = p.parse_args(argv)
    engine = Engine(args.engine)
    lean(engine, args.lean)
    if args.trace_image:
        traced(engine, args.trace_image)
        if args.compose:
            composed(args.compose, args.trace_image, args.redis_image)
    return 0


if __name__ == "__main__":
    sys.exit(main())
