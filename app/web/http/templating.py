"""The lab's one Jinja environment: ``templates/``, autoescaped, strict, with the display formatters.

Every page and fragment is rendered through :data:`templates`. Autoescape is on for every
template, so user text (a scenario name, an echoed invalid value, a pasted config, an error
message quoting input) is escaped wherever it lands; nothing is marked safe. ``StrictUndefined``
turns a misspelt context name into an error in the tests instead of a silently empty cell.

The filters are the receipt's own formatters (:mod:`app.receipts.display`), so the page, the
CSV and the terminal table spell every figure the same way.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from fastapi.templating import Jinja2Templates

from app.ledger.models.architecture import FAMILIES
from app.ledger.scenario import DEFAULT_SCENARIO
from app.receipts.display import billions, gb, gib, human_bytes, human_count, integer, percent_bp
from app.web.http.assets import TEMPLATES_DIR
from app.web.http.settings import Settings


@cache
def _version(static_dir: Path, path: str) -> str | None:
    """The first 10 hex digits of the file's SHA-256, read once per file and process; None when the
    file is missing (its URL then goes out unversioned and the static route answers 404 as usual)."""
    try:
        data = (static_dir / path).read_bytes()
    except OSError:
        return None
    return hashlib.sha256(data).hexdigest()[:10]


@jinja2.pass_context
def static_url(context: jinja2.runtime.Context, path: str) -> str:
    """``/static/<path>?v=<content hash>``: a changed file gets a new URL, so the static route can
    let browsers keep each version for a long time. The hash is of the file the app serves (its
    settings' static folder, which ``ZERO3_LAB_STATIC`` may move)."""
    request = context.get("request")
    settings = getattr(getattr(getattr(request, "app", None), "state", None), "settings", None)
    static_dir = settings.static_dir if isinstance(settings, Settings) else Settings().static_dir
    version = _version(static_dir, path)
    return f"/static/{path}" if version is None else f"/static/{path}?v={version}"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES_DIR),
        autoescape=True,  # every template, whatever its name: user text is never trusted
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,  # a block tag on its own line leaves no blank line behind
        lstrip_blocks=True,
        keep_trailing_newline=True,
        # The templates ship with the app and change only with it (``--reload`` restarts the process):
        # no stat() of every included file on every render.
        auto_reload=False,
    )
    filters: dict[str, Any] = {
        "billions": billions,
        "gb": gb,
        "gib": gib,
        "integer": integer,
        "percent_bp": percent_bp,
        "human_bytes": human_bytes,
        "human_count": human_count,
    }
    env.filters.update(filters)
    env.globals["static_url"] = static_url
    env.globals["model_families"] = ", ".join(FAMILIES)  # the config.json families a paste may name
    env.globals["seed_capacity"] = DEFAULT_SCENARIO.capacity_bytes  # the article's decimal 80 GB: named as such
    return env


templates = Jinja2Templates(env=_environment())
