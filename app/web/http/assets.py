"""Where the page's templates and static files are, in a checkout and in an installed wheel.

The design card keeps ``templates/`` and ``static/`` at the top of the repository, beside the ``app`` package. A
built wheel carries them inside the package instead (pyproject.toml's ``force-include``), so that a plain
``pip install .`` serves the page from any folder; an editable install or a checkout reads them in place.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2]  # the ``app`` package folder


def assets_dir(name: str) -> Path:
    """The folder ``name`` (``templates`` or ``static``): inside the package where a wheel put it there, otherwise
    beside the package (the source tree)."""
    inside = PACKAGE / name
    return inside if inside.is_dir() else PACKAGE.parent / name


TEMPLATES_DIR = assets_dir("templates")
STATIC_DIR = assets_dir("static")
