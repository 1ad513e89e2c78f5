"""torchtitan's command line and the HF Trainer's arguments as downloads, on the page and in /api/snippets."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_each_writer_downloads_and_answers_in_api_snippets(client: TestClient) -> None:
    for path, media in (("/torchtitan.sh", "text/x-shellscript"), ("/hf_trainer.py", "text/x-python")):
        response = client.get(f"{path}?stack=torchtitan&dp=16")
        assert response.status_code == 200 and response.headers["content-type"].startswith(media)
        assert response.headers["content-disposition"].endswith(f'.{path.removeprefix("/")}"')
    body = client.get("/api/snippets?stack=torchtitan").json()
    assert set(body) == {"deepspeed", "fsdp2", "torchtitan", "hf_trainer"}
    assert body["torchtitan"]["text"].endswith("activation-checkpoint:selective\n")


def test_the_run_it_section_shows_all_four_with_their_downloads(client: TestClient) -> None:
    html = client.get("/snippets?stack=torchtitan&dp=16").text
    for filename in ("ds_config.json", "fsdp2.py", "torchtitan.sh", "hf_trainer.py"):
        assert f'href="/{filename}?' in html, filename
    assert 'id="snippet-torchtitan"' in html and 'data-copy="#snippet-hf-trainer"' in html
