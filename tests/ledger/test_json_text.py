"""JSON text read strictly: a repeated key and a lone surrogate are named, a surrogate pair is text."""

from __future__ import annotations

import json

import pytest

from app.ledger.json_text import JSONTextError, loads_strict


@pytest.mark.parametrize(("text", "kind", "path"), [
    ('{"dp": 8, "dp": 16}', "duplicate_key", ("dp",)),
    ('{"config": {"stage": 3, "stage": 2}}', "duplicate_key", ("stage",)),
    ('{"\\ud800x": 1}', "lone_surrogate", ("\\ud800x",)),
    ('{"config": {"name": "a\\udc00"}}', "lone_surrogate", ("config", "name")),
    ('{"layers": ["ok", "\\ud83d"]}', "lone_surrogate", ("layers", "1")),
    ('"\\udfff"', "lone_surrogate", ("\\udfff",)),
])  # fmt: skip
def test_what_cannot_be_read_back_is_named(text: str, kind: str, path: tuple[str, ...]) -> None:
    with pytest.raises(JSONTextError) as caught:
        loads_strict(text)
    assert (caught.value.kind, caught.value.path) == (kind, path)
    json.dumps(caught.value.message, ensure_ascii=False).encode("utf-8")  # the message itself can be written


def test_text_and_surrogate_pairs_read_as_json_does() -> None:
    text = '{"name": "\\ud83d\\ude00 ok", "n": [1, 2.5, null, true], "nested": {"a": {"b": "c"}}}'
    assert loads_strict(text) == json.loads(text)
    assert loads_strict(text.encode()) == json.loads(text)


def test_text_that_is_not_json_raises_what_json_raises() -> None:
    with pytest.raises(json.JSONDecodeError):
        loads_strict("{")
