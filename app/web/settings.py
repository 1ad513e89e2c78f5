"""Settings, read from the environment only when the app factory asks for them."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class Settings:
    static_dir: Path = ROOT / "static"
    max_query_chars: int = 2048
    max_body_bytes: int = 64 * 1024

    @classmethod
    def from_env(cls) -> Settings:
        """``ZERO3_LAB_STATIC`` overrides the static assets folder."""
        return cls(static_dir=Path(os.environ.get("ZERO3_LAB_STATIC", cls().static_dir)))
