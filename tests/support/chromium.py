"""How the tests and the page-metrics script launch Debian's Chromium (Playwright cannot download one)."""

from __future__ import annotations

import os

CHROMIUM = os.environ.get("ZERO3_LAB_CHROMIUM", "/usr/bin/chromium")
# Without these flags Chromium keeps dialling Google's hosts, which this network refuses.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
