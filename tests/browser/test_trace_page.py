"""The page's "Trace this scenario" in real Chromium: started from the keyboard, its progress polled by
htmx until the traced column replaces it (and the polling stops), axe clean in each state, and the
finished trace in the page at once on reload. One real trace of the small config (skipped without
the trace extra); the server keeps its traces in a file of this test's own."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from app.trace import torch_installed
from tests.browser.conftest import _free_port
from tests.browser.test_accessibility import AXE, axe_violations, describe
from tests.support.live_server import wait_until_serving
from tests.web.routes.test_trace_jobs import QUERY

pytestmark = [
    pytest.mark.browser,
    pytest.mark.trace,
    pytest.mark.skipif(not torch_installed(), reason="the trace extra is not installed (pip install -e '.[trace]')"),
]


@pytest.fixture(scope="module")
def trace_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``zero3-lab serve`` with ``ZERO3_LAB_TRACE_CACHE`` in a temporary folder."""
    folder = tmp_path_factory.mktemp("trace-server")
    env = {**os.environ, "ZERO3_LAB_TRACE_CACHE": str(folder / "traces.sqlite3")}
    port = _free_port()
    with (folder / "serve.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )
    base = f"http://127.0.0.1:{port}"
    wait_until_serving(base, proc, folder / "serve.log")
    yield base
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    ctx = browser.new_context(viewport={"width": 1440, "height": 900}, bypass_csp=True)  # axe is injected
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    ctx.close()
    assert errors == []


def no_violation(page: Page, state: str) -> None:
    assert AXE.exists(), f"{AXE} is missing: run scripts/setup (npm ci installs the pinned axe-core)"
    found = axe_violations(page, AXE)
    assert not found, f"axe on the trace panel ({state}):\n{describe(found)}"


def test_trace_from_the_keyboard_to_the_traced_column(page: Page, trace_server: str) -> None:
    page.goto(f"{trace_server}/?{QUERY}")
    button = page.get_by_role("button", name="Trace this scenario")
    no_violation(page, "not traced yet")
    button.focus()
    page.keyboard.press("Enter")
    live = page.locator("#trace-live")
    expect(live).to_have_attribute("role", "status")
    expect(live).to_be_focused()  # the answer to the button takes the focus
    expect(page.get_by_label("Tracing")).to_be_attached()
    no_violation(page, "running")
    table = page.locator("table.trace-instants")
    expect(table).to_be_visible(timeout=120_000)
    expect(live).to_have_count(0)
    polls: list[str] = []
    page.on("request", lambda r: polls.append(r.url) if "/trace?" in r.url else None)
    page.wait_for_timeout(2_500)
    assert polls == []  # finished: the polling stopped
    no_violation(page, "finished")
    page.reload()
    expect(table).to_be_visible()  # the shared link shows it at once
    assert table.locator("tbody tr").count() > 5
