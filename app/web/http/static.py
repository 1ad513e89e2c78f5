"""Static assets with a long cache life when their URL carries a version.

Pages link our assets as ``/static/app.css?v=<content hash>`` (see the templates' ``static_url``),
so a changed file gets a new URL and a browser may keep each version for a year: a workshop of
200 attendees downloads htmx and the stylesheet once each, not on every visit.
"""

from __future__ import annotations

import os

from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

ONE_YEAR = "public, max-age=31536000, immutable"
UNVERSIONED = "no-cache"  # revalidate: the file may change under the same URL


class VersionedStaticFiles(StaticFiles):
    def file_response(
        self, full_path: str | os.PathLike[str], stat_result: os.stat_result, scope: Scope, status_code: int = 200
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        versioned = b"v=" in scope.get("query_string", b"")
        response.headers["Cache-Control"] = ONE_YEAR if versioned else UNVERSIONED
        return response
