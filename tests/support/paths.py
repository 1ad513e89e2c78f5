"""Where the checkout's parts are, for tests at any depth of ``tests/``."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
DATA = ROOT / "tests" / "data"
