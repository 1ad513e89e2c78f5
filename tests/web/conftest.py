"""In-process fixtures for contract tests: the real app factory behind Starlette's TestClient."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.web.app import create_app


@pytest.fixture(scope="session")
def client() -> Iterator[TestClient]:
    # raise_server_exceptions=False: a bug must show up as the 500 a user would get, and fail the test.
    with TestClient(create_app(), raise_server_exceptions=False) as c:
        yield c
