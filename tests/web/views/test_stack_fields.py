"""The training stack in the form: its choices left empty follow the stack, and the page says which came
from the stack and which were typed over it."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient


def _select(html: str, name: str) -> str:
    match = re.search(rf'<select id="f-{name}".*?</select>', html, re.S)
    assert match, name
    return match.group(0)


def test_a_choice_the_stack_decides_is_empty_until_typed(client: TestClient) -> None:
    html = client.get("/?model=llama-2-7b&stack=hf-fsdp2").text
    for name, value in (("loss", "inside"), ("wrap", "embed-tail")):
        select = _select(html, name)
        assert '<option value="" selected>' in select  # empty: the stack's, so a change of stack carries it
        assert f"empty = the stack&#39;s (hf-fsdp2): {value}" in html
    assert "set by the stack (hf-fsdp2)" in html


@pytest.mark.parametrize(("query", "says"), [
    ("stack=hf-fsdp2&loss=outside", "Typed over the stack (hf-fsdp2), which sets inside."),
    ("stack=hf-fsdp2&loss=inside", "Typed; the stack (hf-fsdp2) sets the same."),
])  # fmt: skip
def test_a_typed_choice_says_what_the_stack_would_set(client: TestClient, query: str, says: str) -> None:
    html = client.get(f"/?model=llama-2-7b&{query}").text
    assert says in html
    assert '<option value="" selected>' not in _select(html, "loss")
