"""requirements.txt (the image's hashed runtime dependencies, from scripts/lock) agrees with pyproject.toml and
constraints.txt: a runtime pin changed without running scripts/lock would build an image with other versions than
the ones the suite ran against, or fail its --require-hashes install."""

from __future__ import annotations

import re
import tomllib

from tests.support import paths

PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^\s\\;]+)", re.MULTILINE)


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _pins(text: str) -> dict[str, str]:
    return {_name(name): version for name, version in PIN.findall(text)}


def test_the_lock_holds_every_runtime_dependency_at_its_constrained_version_with_hashes() -> None:
    lock_text = (paths.ROOT / "requirements.txt").read_text(encoding="utf-8")
    lock = _pins(lock_text)
    constraints = _pins((paths.ROOT / "constraints.txt").read_text(encoding="utf-8"))
    project = tomllib.loads((paths.ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    for name, version in _pins("\n".join(project["dependencies"])).items():
        assert lock.get(name) == version, f"{name}: pyproject {version}, requirements.txt {lock.get(name)}"
    for name, version in lock.items():
        assert constraints.get(name) == version, f"{name}: locked {version}, constrained {constraints.get(name)}"
    entries = re.split(r"\n(?=[A-Za-z0-9])", lock_text.split("\n", 2)[2])
    assert len(entries) == len(lock)
    for entry in entries:
        assert "--hash=sha256:" in entry, entry[:80]
