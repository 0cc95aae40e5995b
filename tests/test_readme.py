"""The README's library example runs as printed, in a fresh interpreter."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _library_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## The library", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "README's library section has no python block"
    return match.group(1)


def test_the_library_example_runs_as_printed(tmp_path: Path) -> None:
    # a fresh interpreter: `from compactctl import pipeline, read, replay` once returned the
    # pipeline and replay *modules* (a lazily exported name shadowed by its submodule)
    code = _library_example()
    assert 'read("session.jsonl")' in code
    shutil.copy(ROOT / "fixtures/samples/small-s1.canonical.jsonl", tmp_path / "session.jsonl")
    probe = code + "\nprint(len(events), len(context), type(context[0]).__name__)\n"
    r = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    # small-s1: 68 events in, the three layers append 3 CompactEvents; micro and rules
    # shorten messages but drop none of the 67
    assert r.stdout.split() == ["71", "67", "Message"]
