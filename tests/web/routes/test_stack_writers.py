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


def test_the_page_reads_a_torchtitan_command_beside_its_scenario(client: TestClient) -> None:
    """The "use a torchtitan command line" form: the flags replace the kept scenario's fields (its model stays), every
    flag is listed, a link opens the scenario; a refused flag comes back inline, the paste kept (422 without htmx)."""
    command = ("python -m torchtitan.train --module llama3 --config llama3_8b --training.local-batch-size 2 "
               "activation-checkpoint:full")  # fmt: skip
    ok = client.post("/torchtitan", data={"command": command, "keep": "model=llama-2-7b&dp=16"},
                     headers={"HX-Request": "true"})  # fmt: skip
    assert ok.status_code == 200
    assert 'href="/?act_policy=full&amp;dp=16&amp;micro_batch=2&amp;model=llama-2-7b&amp;stack=torchtitan"' in ok.text
    assert ok.text.count('<li data-status="sets">') == 3 and ok.text.count('<li data-status="ignored">') == 1
    bad = client.post("/torchtitan", data={"command": "--training.dtype float16 --job.note <b>",
                                           "keep": "model=llama-2-7b"})  # fmt: skip
    assert bad.status_code == 422
    assert "command: --training.dtype: &#39;float16&#39;: torchtitan takes bfloat16 or float32" in bad.text
    assert "&lt;b&gt;" in bad.text and "<b>" not in bad.text.split('id="tt-command"', 1)[1].split("</textarea>")[0]
