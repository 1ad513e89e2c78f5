"""Request bodies and pasted JSON that Python's ``json`` would take but no answer can hold: a key given twice (its
earlier value silently dropped) and lone UTF-16 surrogates (an answer echoing one failed while written: a 500).
Each is a 422 naming the key, on every JSON route and on the page's paste forms; never a 5xx."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

# Each route's body with room for one more key: the key given twice is the one already there.
ROUTES = {
    "/api/estimate": (b'{"dp": 8, %s}', "dp"),
    "/api/deepspeed": (b'{"config": {"train_batch_size": 8, %s}}', "train_batch_size"),
    "/api/model-inventory": (b'{"model_type": "llama", %s}', "model_type"),
    "/api/torchtitan": (b'{"command": "--training.seq-len 2048", %s}', "command"),
}


@pytest.mark.parametrize("path", list(ROUTES))
@pytest.mark.parametrize(("insert", "field", "kind"), [
    (None, None, "duplicate_key"),
    (b'"\\ud800": 1', "\\ud800", "lone_surrogate"),
    (b'"name": "x\\udfffy"', "name", "lone_surrogate"),
])  # fmt: skip
def test_a_json_body_that_cannot_be_read_back_is_a_422_naming_the_key(
    client: TestClient, path: str, insert: bytes | None, field: str | None, kind: str
) -> None:
    template, present = ROUTES[path]
    if insert is None:  # the key already there, again
        insert, field = f'"{present}": "again"'.encode(), present
    body = template % insert
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, (path, r.status_code, r.text)
    (detail,) = r.json()["detail"]
    assert (detail["field"], detail["type"]) == (field, kind)
    assert detail["loc"][0] == "body"


@pytest.mark.parametrize(("form", "field"), [("/model", "config"), ("/deepspeed", "ds_config")])
def test_pasted_json_with_a_lone_surrogate_is_refused_inline(client: TestClient, form: str, field: str) -> None:
    pasted = '{"model_type": "llama", "train_batch_size": 8, "\\ud800": 1}'
    for headers in ({}, {"HX-Request": "true"}):
        r = client.post(form, data={field: pasted}, headers=headers)
        assert r.status_code < 500, (form, r.status_code)
        assert "lone UTF-16 surrogate" in r.text
