"""A plain (not editable) install serves the page: the wheel carries the templates and static files.

The design card keeps ``templates/`` and ``static/`` beside the ``app`` package; a wheel built from this checkout
must carry them inside the package (pyproject.toml's ``force-include``), or ``pip install .`` — the Dockerfile's
install — gives a lab that answers every page with an error. This builds the wheel as the Dockerfile does, installs
it into an empty folder, and serves it with ``zero3-lab serve`` from a folder that is not the checkout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bench._server import free_port
from tests.support import paths
from tests.support.live_server import wait_until_serving

pytestmark = pytest.mark.server

START_WITHIN_S = 30  # a liveness bound, not a benchmark


def _pip(*args: str | Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet", *map(str, args)],
        check=True, capture_output=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    # --no-build-isolation: the pinned backend from the dev extra, as the Dockerfile builds (no registry needed).
    _pip("wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", dist, paths.ROOT)
    (built,) = dist.glob("zero3_lab-*.whl")
    return built


def _shipped(folder: str) -> set[str]:
    """The files of the checkout's ``folder``, as the wheel names them (inside ``app/``)."""
    root = paths.ROOT / folder
    return {f"app/{folder}/{p.relative_to(root).as_posix()}" for p in root.rglob("*") if p.is_file()}


def test_the_wheel_carries_every_template_and_static_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in ("templates", "static"):
        missing = _shipped(folder) - names
        assert not missing, f"{folder}/ files missing from the wheel: {sorted(missing)[:5]}"
    assert "app/static/vendor/htmx.min.js" in names  # scripts/setup copies it from node_modules before any build
    assert not [n for n in names if n.startswith(("tests/", "templates/", "static/"))], "only the app package ships"


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    _pip("install", "--no-deps", "--target", site, wheel)
    return site


def _env(site: Path, data: Path) -> dict[str, str]:
    # The installed copy first on the path (the checkout's editable .pth entry comes after PYTHONPATH).
    return {**os.environ, "PYTHONPATH": str(site), "ZERO3_LAB_TRACE_CACHE": str(data / "traces.sqlite3")}


def test_the_installed_package_is_the_one_imported(installed: Path, tmp_path: Path) -> None:
    where = subprocess.run(
        [sys.executable, "-c", "import app, app.web.http.assets as a; print(app.__file__); print(a.TEMPLATES_DIR)"],
        cwd=tmp_path, env=_env(installed, tmp_path), check=True, capture_output=True, text=True,
    ).stdout.split()  # fmt: skip
    assert [Path(p).is_relative_to(installed) for p in where] == [True, True], where


@pytest.fixture(scope="module")
def served(installed: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    port = free_port()
    with (elsewhere / "serve.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
            cwd=elsewhere, env=_env(installed, elsewhere), stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    wait_until_serving(base, proc, elsewhere / "serve.log", START_WITHIN_S)
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        status: int = response.status
        return status, response.read()


def test_the_installed_wheel_serves_the_page_and_its_assets(served: str) -> None:
    status, page = _get(served + "/")
    assert status == 200
    text = page.decode()
    assert "<h1" in text and "Peak" in text
    # Versioned static URLs: the app found the files it hashes (a missing file goes out unversioned).
    assets = re.findall(r"/static/[\w./-]+\?v=[0-9a-f]{10}", text)
    assert any("app.css" in a for a in assets) and any("htmx.min.js" in a for a in assets), assets
    for asset in assets:
        assert _get(served + asset.replace("&amp;", "&"))[0] == 200, asset
    status, csv_body = _get(served + "/receipt.csv")
    assert status == 200 and b"peak" in csv_body.lower()
