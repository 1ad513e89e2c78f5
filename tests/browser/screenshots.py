"""Screenshots of the lab for the README (issue 14): the page at 1440 × 900, 1280 × 720, a projector
at 150 % zoom (853 × 480 CSS px, drawn at 1.5 device pixels per CSS pixel as the projector shows
it) and a 390 × 844 phone (at 2×), presenter mode at 1440 × 900 and on the projector, and the
comparison at 1440 × 900. Each is the viewport (what a user sees first), not the whole page.

Run as ``scripts/screenshots`` (set-up included) or ``.venv/bin/python -m tests.browser.screenshots
[--out DIR] [--base-url URL]``: it starts ``zero3-lab serve`` on a free port (unless given a base
URL), drives Debian's Chromium and writes docs/screenshots/*.png.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.bench._server import free_port, start, stop
from tests.support.chromium import CHROMIUM, CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "screenshots"
LIMIT_BYTES = 400 * 1024  # each file stays small enough to commit and to load in a README


@dataclass(frozen=True)
class Shot:
    name: str
    path: str
    width: int
    height: int
    scale: float = 1
    caption: str = ""


SHOTS: tuple[Shot, ...] = (
    Shot("lab-1440x900", "/", 1440, 900, caption="the lab at 1440 × 900"),
    Shot("lab-1280x720", "/", 1280, 720, caption="the lab at 1280 × 720"),
    Shot("lab-853x480-projector", "/", 853, 480, 1.5, "a 1280 × 720 projector at 150 % zoom (853 × 480 CSS px)"),
    Shot("lab-390x844-phone", "/", 390, 844, 2, "a 390 × 844 phone: the answer before the form"),
    Shot("present-1440x900", "/?present=1", 1440, 900, caption="presenter mode at 1440 × 900"),
    Shot("present-853x480-projector", "/?present=1", 853, 480, 1.5, "presenter mode on the projector"),
    Shot("compare-1440x900", "/compare?a=dp%3D8&b=dp%3D64", 1440, 900, caption="comparing D = 8 with D = 64"),
)


def take(base: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for shot in SHOTS:
                ctx = browser.new_context(
                    viewport={"width": shot.width, "height": shot.height}, device_scale_factor=shot.scale
                )
                page = ctx.new_page()
                response = page.goto(base + shot.path, wait_until="networkidle")
                if response is None or not response.ok:
                    raise RuntimeError(f"{shot.path} answered {response.status if response else 'nothing'}")
                target = out / f"{shot.name}.png"
                page.screenshot(path=str(target), animations="disabled", caret="hide")
                ctx.close()
                size = target.stat().st_size
                if size > LIMIT_BYTES:
                    raise RuntimeError(f"{target} is {size:,} bytes, over {LIMIT_BYTES:,}")
                print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}  {size:>9,} B")
                written.append(target)
        finally:
            browser.close()
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT, help="folder for the PNGs (default: docs/screenshots)")
    parser.add_argument("--base-url", help="a running lab to photograph (default: start one on a free port)")
    args = parser.parse_args(argv)
    if args.base_url:
        take(args.base_url.rstrip("/"), args.out)
        return
    port = free_port()
    server = start(port)
    try:
        take(f"http://127.0.0.1:{port}", args.out)
    finally:
        stop(server)


if __name__ == "__main__":
    main()
