"""The HTML builders' two text helpers: escaping user text, and ASCII for the lab's own text."""

from __future__ import annotations

import html

from hypothesis import given
from hypothesis import strategies as st

from app.web.html.text import ascii_html, esc

# Letters, digits, punctuation, symbols and spaces: what the lab's text is made of. (HTML maps
# references to C1 controls onto Windows-1252 and drops noncharacters; the lab has neither.)
PRINTABLE = st.text(st.characters(categories=("L", "N", "P", "S", "Zs")))


@given(PRINTABLE)
def test_ascii_html_reads_back_as_the_same_text(text: str) -> None:
    out = ascii_html(text)
    assert out.isascii()
    if "&" not in text:  # the lab's own text has no entities of its own to be confused with
        assert html.unescape(out) == text


def test_ascii_html_leaves_ascii_alone_and_spells_the_rest_as_references() -> None:
    assert ascii_html("7,000,000,000 B") == "7,000,000,000 B"
    assert ascii_html("⌈7 ÷ 8⌉ × 2") == "&#8968;7 &#247; 8&#8969; &#215; 2"


@given(st.text())
def test_escaped_text_cannot_open_a_tag_or_leave_an_attribute(text: str) -> None:
    out = esc(text)
    assert "<" not in out and ">" not in out and '"' not in out and "'" not in out
    assert html.unescape(out) == text
