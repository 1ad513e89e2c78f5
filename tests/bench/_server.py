"""Start and stop ``zero3-lab serve`` for benchmarks and load tests (one worker unless told, optional CPU
pin), and read a server's memory and CPU time from /proc."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from tests.support.live_server import wait_until_serving

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start(port: int, *, cpu: int | None = None, access_log: bool = False, workers: int = 1) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port)]
    if workers != 1:
        cmd += ["--workers", str(workers)]
    if not access_log:
        cmd.append("--no-access-log")
    if cpu is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(cpu), *cmd]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until_serving(f"http://127.0.0.1:{port}", proc)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def rss_kib(pid: int) -> int:
    """Resident memory of a process, from /proc (KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def _stat(pid: int) -> list[str]:
    # /proc/PID/stat: "pid (comm) state ppid …"; comm may hold spaces, so split after its ")".
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) used so far by a process and its live children (uvicorn's workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(_stat(int(entry.name))[1]) == pid:
                    pids.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    total = 0
    for p in pids:
        try:
            fields = _stat(p)
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of the whole line)
    return total / tick


def machine_busy_seconds() -> float:
    """CPU time all processes have used since boot, every core together (/proc/stat: all but idle and iowait)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields)
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
