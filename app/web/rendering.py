"""The Jinja environment, built once per app with every template compiled up front."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from app.ledger.fields import FIELDS
from app.ledger.models.known import KNOWN_MODELS
from app.ledger.mutants import reference_kill_list
from app.ledger.presets import DEVICES, PRESETS
from app.receipts import display
from app.web.views import ErrorSlot


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
        self.env.globals["known_models"] = KNOWN_MODELS
        self.env.filters.update(
            gb=display.gb,
            gib=display.gib,
            int=display.integer,
            pct=display.percent_bp,
        )
        self.page_template = self.env.get_template("page.html")
        self.fragment_template = self.env.get_template("fragment.html")
        self.docs_template = self.env.get_template("docs.html")
        # The frozen scenario's kill list is the same on every page: render it once.
        self.reference_kills = Markup(  # noqa: S704 - our own template, rendered once
            self.env.get_template("_kills.html").render(
                caption="Reference: the frozen seed scenario (checks 1–5)", results=reference_kill_list()
            )
        )

        # A valid scenario's fragment clears all sixteen error slots: that text never changes either.
        self.empty_error_slots = Markup(  # noqa: S704 - our own template, rendered once
            self.env.from_string(
                '{% from "_field_error.html" import error_slot %}'
                "{% for ff in fields %}{{ error_slot(ff, oob=true) }}\n{% endfor %}"
            ).render(fields=[ErrorSlot(f, None) for f in FIELDS])
        )
        self.lines_template = self.env.get_template("_lines.html")
        self.fit_table_template = self.env.get_template("_fit_table.html")
        # The form's constant parts: presets, the device list and table, and each empty error slot.
        parts = self.env.get_template("_static_form_parts.html").module
        slot = self.env.get_template("_field_error.html").module
        self.static = {
            "presets": Markup(parts.presets_block(PRESETS)),  # type: ignore[attr-defined]  # noqa: S704 - ours
            "datalist": Markup(parts.datalist_block(DEVICES)),  # type: ignore[attr-defined]  # noqa: S704 - ours
            "devices": Markup(parts.devices_block(DEVICES)),  # type: ignore[attr-defined]  # noqa: S704 - ours
            "empty_slots": {
                f.name: Markup(slot.error_slot(ErrorSlot(f, None)))  # type: ignore[attr-defined]  # noqa: S704
                for f in FIELDS
            },
        }

    def page(self, ctx: dict[str, Any]) -> str:
        return self.page_template.render(ctx, reference_kills=self.reference_kills, static=self.static)

    def fragment(self, ctx: dict[str, Any]) -> str:
        return self.fragment_template.render(
            ctx, reference_kills=self.reference_kills, empty_error_slots=self.empty_error_slots
        )

    def lines(self, ctx: dict[str, Any]) -> str:
        return self.lines_template.render(ctx)

    def fit_table(self, ctx: dict[str, Any]) -> str:
        return self.fit_table_template.render(ctx)

    def docs(self) -> str:
        return self.docs_template.render()
