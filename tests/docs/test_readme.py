"""The README's library example runs as printed, in a fresh interpreter."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT


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


def _library_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## The library", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_session_and_layer_example_appends_what_it_planned(tmp_path: Path) -> None:
    blocks = _library_blocks()
    assert len(blocks) == 2
    shutil.copy(ROOT / "fixtures/samples/small-s1.canonical.jsonl", tmp_path / "session.jsonl")
    before = (tmp_path / "session.jsonl").read_bytes()
    r = subprocess.run(
        [sys.executable, "-c", blocks[1] + "\nprint(len(new_events))\n"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    after = (tmp_path / "session.jsonl").read_bytes()
    assert after.startswith(before)
    # a rules CompactEvent, then compact's micro CompactEvent and SummaryEvent
    assert r.stdout.split()[-1] == "3"
    assert after.count(b"\n") - before.count(b"\n") == 3


def test_every_name_in_the_library_table_is_importable() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## The library", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    found = [n.split("(")[0] for row in rows for n in re.findall(r"`([^`]+)`", row)]
    names = {n.split(".")[0] for n in found}
    dotted = {n for n in found if n.startswith("compactctl.")}
    code = "import compactctl, importlib\n"
    for name in sorted(names - {"compactctl"}):
        code += f"getattr(compactctl, {name!r})\n"
    for name in sorted(dotted):
        module, _, attr = name.rpartition(".")
        code += f"getattr(importlib.import_module({module!r}), {attr!r})\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert len(rows) >= 10
