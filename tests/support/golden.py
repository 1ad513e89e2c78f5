"""The golden set: what the lab answers for many scenarios, through its public faces only.

Each entry is one request a user or a script makes — a page, a receipt download, the CLI's table, a
comparison, a DeepSpeed import — and the answer's text. The answers are recorded once
(``python -m tests.support.golden --write``) and every later run must give the same text
(``tests/test_golden.py``): a restructuring of the code changes no number, no formula, no message.

Only public faces are used (HTTP routes through the real app, the ``zero3-lab`` CLI's ``main``), so the
set survives any move of the code behind them. Pages are compared by their visible text and the
``data-bytes`` figures they carry, not their markup: a template may be reorganised, the figures not.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import lzma
import sys
import tempfile
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qsl

from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[2]
# xz (stdlib lzma): the answers repeat a great deal (pages, field lists); xz keeps them under a fifth of gzip's size
GOLDEN = ROOT / "tests" / "data" / "golden.json.xz"

_CFG_QWEN = (
    "cfg:model_type=qwen2;vocab_size=151936;hidden_size=896;intermediate_size=4864;num_hidden_layers=24;"
    "num_attention_heads=14;num_key_value_heads=2;max_position_embeddings=32768;tie_word_embeddings=true"
)
_FSDP2 = "param_bytes=4&master_bytes=0&grad_bytes=4&gather_bytes=2"

# One query per scenario, across every input group of the form (model, precision, parallelism,
# schedule, activation model, measured inputs, device, host) and the error states.
SCENARIOS: tuple[str, ...] = (
    "",
    "dp=64",
    "dp=1",
    "stage=0",
    "stage=1",
    "stage=2",
    _FSDP2,
    f"{_FSDP2}&reduce_bytes=4&reshard_after_forward=0",
    "params=13B&dp=64&activation_bytes=30GiB&capacity_bytes=80GiB&overhead_bytes=4GiB&contingency_pct=5",
    "params=175B&dp=1024&unit_params=2B&prefetch=2&bucket_bytes=500MB&opt_states=1&opt_bytes=8",
    "params=1.3B&dp=2&param_bytes=1&master_bytes=8&opt_states=0&name=tiny run",
    "shard_group=4&dp=32",
    "hpz=8&dp=64",
    "model=llama-2-7b",
    "model=llama-2-7b&dp=8&act_policy=full&micro_batch=2",
    "model=llama-2-7b&act_policy=selective&seq_len=8192&act_bytes=2&logits_bytes=2",
    f"model=llama-2-7b&{_FSDP2}&act_policy=full",
    f"model=llama-2-7b&{_FSDP2}&stack=hf-fsdp2&prefetch=2",
    f"model=qwen2-7b&{_FSDP2}&stack=hf-fsdp2&loss=outside&act_policy=full",
    "model=llama-2-13b&dp=16&tp=2&sequence_parallel=1&act_policy=full",
    "model=llama-2-70b&dp=64&act_policy=full&capacity_bytes=80GiB",
    "model=llama-2-70b&dp=64&pp=4&pp_stage=last&act_policy=full",
    "model=llama-2-70b&dp=32&pp=4&pp_stage=first&tp=2",
    "model=mistral-7b-v0.1&norms=fused&seq_len=2048",
    "model=mixtral-8x7b-v0.1&dp=64&ep=8&act_policy=full",
    "model=qwen2-0.5b&dp=4&micro_batch=8",
    "model=qwen2-7b&dp=16&stage=2",
    "model=gpt2&seq_len=1024&dp=2",
    "model=gpt-neox-20b&dp=32&prefetch=1",
    f"model={_CFG_QWEN}&dp=8",
    "model=llama-2-7b&offload_optimizer=cpu&dp=8",
    "model=llama-2-7b&offload_optimizer=cpu&offload_param=cpu&ranks_per_node=4&host_bytes=512GiB",
    "model=llama-2-70b&offload_optimizer=nvme&offload_param=nvme&dp=16&zero_init=0",
    "model=llama-2-7b&stage=1&offload_optimizer=cpu",
    "preset=llama2-70b-dp8",
    "preset=model-mixtral-full-dp64",
    # error states: each names its field and range
    "dp=0",
    "params=7.5&dp=abc",
    "model=gpt2&seq_len=4096",
    "unit_params=8B",
    "model=no-such-model",
)

# Comparisons (a, b) as the comparison page reads them.
COMPARISONS: tuple[tuple[str, str], ...] = (
    ("dp=8", "dp=64"),
    ("model=llama-2-7b", f"model=llama-2-7b&{_FSDP2}&act_policy=full"),
    ("model=llama-2-70b&dp=64", "model=llama-2-70b&dp=64&offload_optimizer=cpu"),
    ("dp=8", "dp=0"),
)

DEEPSPEED_DIR = ROOT / "tests" / "data" / "deepspeed"


class _Text(HTMLParser):
    """A page's visible text (one line per text node, whitespace collapsed) and its ``data-bytes`` figures."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        figures = [f"{k}={v}" for k, v in attrs if k in ("data-bytes", "value") and v]
        if figures and tag != "link":
            self.lines.append(f"<{tag} {' '.join(figures)}>")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        text = " ".join(data.split())
        if text and not self._skip:
            self.lines.append(text)


def page_text(html: str) -> str:
    reader = _Text()
    reader.feed(html)
    reader.close()
    return "\n".join(reader.lines)


def _cli(argv: list[str]) -> str:
    from app.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: object = main(argv)
        except SystemExit as exc:  # argparse's own refusals
            code = exc.code
    # paths inside the checkout are written relative to it: the set holds in any clone
    return f"exit {code}\n{out.getvalue()}{err.getvalue()}".replace(f"{ROOT}/", "")


def _table(query: str) -> str:
    """The terminal table for ``query``, through the CLI's ``--scenario`` file."""
    fields: dict[str, str] = dict(parse_qsl(query, keep_blank_values=True))
    fields.pop("preset", None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scenario.json"
        path.write_text(json.dumps(fields), encoding="utf-8")
        return _cli(["estimate", "--scenario", str(path)]).replace(str(path), "scenario.json")


def answers() -> Iterator[tuple[str, str]]:
    """(key, answer text) for every request of the set, in a fixed order."""
    from app.web.app import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:

        def get(path: str) -> str:
            r = client.get(path)
            return f"{r.status_code} {r.headers.get('content-type', '')}\n{r.text}"

        for q in SCENARIOS:
            yield f"page ?{q}", page_text(get(f"/?{q}"))
            yield f"lower ?{q}", page_text(get(f"/lower?{q}"))
            yield f"receipt.json ?{q}", get(f"/receipt.json?{q}")
            yield f"receipt.csv ?{q}", get(f"/receipt.csv?{q}")
            yield f"api/mutations ?{q}", get(f"/api/mutations?{q}")
            yield f"table ?{q}", _table(q)
            yield f"ds_config.json ?{q}", get(f"/ds_config.json?{q}")
            yield f"fsdp2.py ?{q}", get(f"/fsdp2.py?{q}")
        for a, b in COMPARISONS:
            query = f"a={_quote(a)}&b={_quote(b)}"
            yield f"compare ?{query}", page_text(get(f"/compare?{query}"))
            yield f"compare.json ?{query}", get(f"/compare.json?{query}")
            yield f"compare.csv ?{query}", get(f"/compare.csv?{query}")
        for path in sorted(DEEPSPEED_DIR.glob("*.json")):
            r = client.post("/api/deepspeed", content=path.read_bytes(), headers={"content-type": "application/json"})
            yield f"api/deepspeed {path.name}", f"{r.status_code}\n{r.text}"
            yield f"cli deepspeed {path.name}", _cli(["estimate", "--deepspeed-config", str(path), "--format", "json"])


def _quote(query: str) -> str:
    from urllib.parse import quote

    return quote(query, safe="")


def load() -> dict[str, str]:
    with lzma.open(GOLDEN, "rt", encoding="utf-8") as f:
        recorded: dict[str, str] = json.load(f)
    return recorded


def write(path: Path = GOLDEN) -> int:
    recorded = dict(answers())
    path.parent.mkdir(parents=True, exist_ok=True)
    # xz stores no timestamp: the same answers give the same file, byte for byte
    with lzma.open(path, "wb", preset=9 | lzma.PRESET_EXTREME) as raw, io.TextIOWrapper(raw, encoding="utf-8") as f:
        json.dump(recorded, f, ensure_ascii=False, indent=0, sort_keys=True)
    return len(recorded)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help=f"record the answers in {GOLDEN.relative_to(ROOT)}")
    parser.add_argument("--dump", type=Path, help="write each answer as a text file under this folder (to diff)")
    args = parser.parse_args()
    if args.write:
        print(f"{write()} answers recorded in {GOLDEN}")
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
        for i, (key, text) in enumerate(answers()):
            (args.dump / f"{i:04d}.txt").write_text(f"{key}\n{text}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
