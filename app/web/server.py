"""``zero3-lab serve``: uvicorn on the app factory (no app is built at import time)."""

from __future__ import annotations

import uvicorn


def serve(
    host: str = "127.0.0.1", port: int = 8000, workers: int = 1, reload: bool = False, access_log: bool = True
) -> int:
    uvicorn.run(
        "app.web.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        reload=reload,
        proxy_headers=False,
        server_header=False,
        log_level="info",
        access_log=access_log,
    )
    return 0
