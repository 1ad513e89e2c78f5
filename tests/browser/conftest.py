"""Real-browser fixtures: the lab served by uvicorn on a free port, driven by Debian's Chromium.

Every test in this folder is marked ``browser`` (``scripts/test fast`` leaves them out). The tests wait for
the state they assert, never for a time: each ``expect(...)`` polls until its state holds, for up to
``STATE_TIMEOUT_MS``, a bound generous enough for a busy two-core machine and only ever reached by a failing test.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, expect, sync_playwright

from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.support.live_server import wait_until_serving

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
HERE = Path(__file__).resolve().parent
# Playwright's own default for expect(...) is 5 s: on a loaded machine (CI on two cores, the suite's other
# processes) a history restore or an htmx swap has taken longer than that. Actions already wait 30 s.
STATE_TIMEOUT_MS = 30_000
expect.set_options(timeout=STATE_TIMEOUT_MS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.browser)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``zero3-lab serve`` as a user starts it, on a free port; yields its base URL.

    The server's log (uvicorn writes one access line per request to stderr) goes to a file: an
    unread pipe would fill after a few hundred requests and stall the server, and would be left
    open at exit (a ResourceWarning, an error under ``filterwarnings = error``).
    """
    port = _free_port()
    log_path = tmp_path_factory.mktemp("live-server") / "serve.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    base = f"http://127.0.0.1:{port}"
    wait_until_serving(base, proc, log_path)
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def playwright_session() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright_session: Playwright) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: run scripts/setup (it installs Debian's chromium)")
    b = playwright_session.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield b
    b.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
