"""The templates' safety rules: autoescape everywhere, strict undefined names, nothing marked safe,
versioned static URLs, and no markup left in Python strings."""

from __future__ import annotations

import ast
import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import jinja2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.ledger.scenario import FieldError
from app.web.http.assets import TEMPLATES_DIR
from app.web.http.templating import templates
from app.web.views.form import form_field
from tests.support import paths

ROOT = paths.ROOT
FIELDS_MACROS: Any = templates.get_template("macros/fields.html").module
# Text a user may type: anything but NUL and lone surrogates (a query string cannot carry them).
TYPED = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))


class _Parsed(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text += data


def _parse(markup: str) -> _Parsed:
    parsed = _Parsed()
    parsed.feed(markup)
    parsed.close()
    return parsed


@given(TYPED)
def test_typed_text_stays_inside_its_attribute(text: str) -> None:
    from app.ledger.scenario.fields import FIELD_BY_NAME

    ff = form_field(FIELD_BY_NAME["name"], text, None, None)
    parsed = _parse(str(FIELDS_MACROS.input(ff)))
    assert [tag for tag, _ in parsed.tags] == ["input"]
    assert parsed.tags[0][1]["value"] == text


@given(TYPED, TYPED)
def test_typed_text_in_an_error_message_opens_no_tag(message: str, allowed: str) -> None:
    parsed = _parse(str(FIELDS_MACROS.error_slot("dp", FieldError("dp", message, allowed))))
    assert [tag for tag, _ in parsed.tags] == ["div", "span"]
    assert parsed.text == f"dp: {message} — allowed: {allowed}"


def test_autoescape_is_on_for_every_template_and_undefined_names_fail() -> None:
    env = templates.env
    assert env.from_string("{{ x }}").render(x="<b>&") == "&lt;b&gt;&amp;"
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ x.missing }}").render(x=FieldError("a", "b", "c"))


def test_the_lab_s_own_symbols_travel_as_utf8_text() -> None:
    out = templates.env.from_string("<code>{{ f }}</code>").render(f="⌈7 ÷ 8⌉ × 2 ≥ 1")
    assert out == "<code>⌈7 ÷ 8⌉ × 2 ≥ 1</code>"


def _template_files() -> list[Path]:
    return sorted(p for p in TEMPLATES_DIR.rglob("*.html"))


@pytest.mark.parametrize("path", _template_files(), ids=lambda p: str(p.relative_to(TEMPLATES_DIR)))
def test_no_template_marks_anything_safe(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert not re.search(r"\|\s*safe\b", source)
    assert not re.search(r"autoescape\s+false", source, re.IGNORECASE)
    assert "Markup" not in source


def test_there_are_partials_and_macros() -> None:
    partials = {p.name for p in (TEMPLATES_DIR / "partials").glob("_*.html")}
    assert {"_results.html", "_answer.html", "_persistent.html", "_peak.html", "_fit.html", "_kills.html"} <= partials
    assert {p.name for p in (TEMPLATES_DIR / "macros").glob("*.html")} >= {"fields.html", "charts.html", "cells.html"}


# An HTML or SVG start tag, as the old string builders wrote them.
TAG = re.compile(
    r"<(div|span|table|thead|tbody|tr|td|th|svg|rect|polyline|line|text|p|a|input|select|option|textarea"
    r"|form|section|details|summary|ul|li|br|small|code|strong|label|fieldset|html|head|body|meta|link|script)[\s>/]"
)


def _strings_outside_docstrings(tree: ast.AST) -> list[tuple[int, str]]:
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


@pytest.mark.parametrize("path", sorted((ROOT / "app").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_python_string_holds_markup(path: Path) -> None:
    """Markup lives in templates/: a Python string literal (f-string parts included) holding an HTML
    or SVG tag is a page fragment built outside them. Docstrings and comments may name tags."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = [(line, text) for line, text in _strings_outside_docstrings(tree) if TAG.search(text)]
    assert found == []


def test_the_markup_check_sees_f_strings() -> None:
    tree = ast.parse('x = 1\ny = f"<td class={x}>"\n"""<div> in a module string, not a docstring"""')
    assert sorted(line for line, text in _strings_outside_docstrings(tree) if TAG.search(text)) == [2, 3]


def test_static_urls_carry_the_file_s_content_hash() -> None:
    url = templates.env.from_string("{{ static_url('app.css') }}").render()
    digest = hashlib.sha256((ROOT / "static" / "app.css").read_bytes()).hexdigest()[:10]
    assert url == f"/static/app.css?v={digest}"
    # a file that is not there goes out unversioned (and answers 404), rather than failing the page
    assert templates.env.from_string("{{ static_url('nope.js') }}").render() == "/static/nope.js"
