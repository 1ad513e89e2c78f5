"""The Jinja environment, built once per app with every template compiled up front."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from app.receipts import display


class Renderer:
    def __init__(self, templates_dir: Path) -> None:
        self.env = Environment(
            loader=FileSystemLoader(templates_dir),
            autoescape=select_autoescape(default=True, default_for_string=True),
            undefined=StrictUndefined,
            auto_reload=False,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(
            gb=display.gb,
            gib=display.gib,
            int=display.integer,
            pct=display.percent_bp,
        )
        self.page_template = self.env.get_template("page.html")
        self.fragment_template = self.env.get_template("fragment.html")
        self.docs_template = self.env.get_template("docs.html")

    def page(self, ctx: dict[str, Any]) -> str:
        return self.page_template.render(ctx)

    def fragment(self, ctx: dict[str, Any]) -> str:
        return self.fragment_template.render(ctx)

    def docs(self) -> str:
        return self.docs_template.render()
