"""Shared test helpers: paths, running the CLI or a Python snippet in a subprocess, writing
transcripts, building events.

Importable from every test folder as ``tests.helpers`` (``pythonpath = ["."]`` in
pyproject.toml puts the repository root on ``sys.path``). Fixtures live in
``tests/conftest.py``; samples grown into long sessions in ``tests/sessions.py``; hypothesis
strategies in ``tests/strategies.py``; the fake summarizer and the fake litellm model in
``tests/fakes.py``.
"""

from __future__ import annotations

import functools
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from compactctl.io.jsonl import read_stream
from compactctl.model import Event, Message, event_from_dict
from compactctl.replay import tool_block_keys

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SAMPLES = FIXTURES / "samples"


def run_cli(
    *args: str,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m compactctl ARGS`` and capture stdout/stderr as bytes."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "compactctl", *args],
        input=input,
        capture_output=True,
        env=full_env,
        cwd=cwd,
        timeout=300,
    )


def run_python(code: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run ``python -c CODE ARGS`` in a fresh interpreter (from the repository root, with
    ``env`` added to the environment) and return its stdout as text; a non-zero exit raises
    ``CalledProcessError``."""
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=300,
    )
    return out.stdout


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> Path:
    """Write records as compact JSONL (orjson), one per line; returns ``path``."""
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def msg(uuid: str, role: str, content: Any = "", **extra: Any) -> dict[str, Any]:
    """A canonical message record (a dict, as in a JSONL line)."""
    return {"type": "message", "uuid": uuid, "role": role, "content": content, **extra}


def message(uuid: str, role: str, content: Any = "x", **extra: Any) -> Event:
    """A canonical message event (:func:`msg` read with ``event_from_dict``)."""
    return event_from_dict(msg(uuid, role, content, **extra))


def read_events(data: bytes) -> list[Event]:
    """The events of canonical JSONL ``data`` (:func:`compactctl.io.jsonl.read_stream`)."""
    return list(read_stream(io.BytesIO(data)))


def split_blocks(view: Iterable[Message], log: Iterable[Event]) -> list[str]:
    """uuids of the tool-block members (calls and their results, as grouped in ``log``) that
    are missing from ``view`` while another member of their block is in it: a replay or a
    filter must keep each block whole or drop it whole."""
    keys = tool_block_keys(e for e in log if isinstance(e, Message))
    members: dict[str, set[str]] = {}
    for uuid, key in keys.items():
        members.setdefault(key, set()).add(uuid)
    present = {m.uuid for m in view}
    broken: list[str] = []
    for group in members.values():
        inside = group & present
        if inside and inside != group:
            broken.extend(sorted(group - inside))
    return broken


def context_text(view: Iterable[Message]) -> str:
    """What a model sees of ``view``, lower-cased: each message's text and the JSON arguments
    of its tool calls, one per line (probes are looked for in it)."""
    parts = []
    for m in view:
        parts.append(m.text)
        for c in m.tool_calls:
            parts.append(json.dumps(c.get("arguments"), ensure_ascii=False))
    return "\n".join(parts).lower()


def broken_blocks(view: list[Message]) -> list[str]:
    """Tool calls and results of ``view`` without their partner in it (call ids), then the
    uuids whose tool block's key is not a message of ``view``: ``[]`` for a valid context."""
    keys = tool_block_keys(view)
    calls = {c["id"] for m in view for c in m.tool_calls}
    results = {m.tool_call_id for m in view if m.role == "tool"}
    present = {m.uuid for m in view}
    return sorted((results - calls) | (calls - results)) + [
        u for u, k in keys.items() if k not in present
    ]


@functools.cache
def fixture_strings() -> tuple[str, ...]:
    """Every string value (:func:`compactctl.text.string_leaves`) of the JSON lines
    of the ``*.json*`` files of fixtures/ (tool outputs, prose, ids), file by file in path
    order. Each line is parsed alone: a JSONL record or a one-line JSON document counts, the
    lines of a pretty-printed document do not parse and are left out. Read once per test
    process."""
    from compactctl.text import string_leaves

    texts: list[str] = []
    for path in sorted(FIXTURES.rglob("*.json*")):
        for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                texts.extend(string_leaves(json.loads(raw)))
            except ValueError:
                continue
    return tuple(texts)


RUN_MAIN = """
sys.argv = ["compactctl", *sys.argv[2:]]
from compactctl.cli import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
"""
"""The end of a ``python -c`` script that runs ``compactctl ARGS`` (``sys.argv[2:]``; the
script's own argument is ``sys.argv[1]``) in its process, its exit code left in ``code``."""

COUNT_OPENS = (
    """
import os, sys
target = os.path.realpath(sys.argv[1])
opened = []
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        if os.path.realpath(os.fsdecode(args[0])) == target:
            opened.append(args[1:])
sys.addaudithook(hook)
import compactctl.formats.reader as reader
parsed = []
real = reader.read_transcript
def counted(*a, **k):
    parsed.append(1)
    return real(*a, **k)
reader.read_transcript = counted
"""
    + RUN_MAIN
    + """
sys.stderr.write(f"EXIT {code} OPENS {len(opened)} PARSED {len(parsed)} {opened!r}\\n")
"""
)
"""A script that runs ``compactctl ARGS`` (``python -c COUNT_OPENS FILE ARGS...``) and ends
its stderr with ``EXIT C OPENS N PARSED M [...]``: the command's exit code, the ``open``
calls of FILE an audit hook saw (as strace would), and the calls of the reader's
``read_transcript`` (what ``Session.open`` parses with)."""


def count_opens(path: Path, *args: str, env: dict[str, str]) -> str:
    """The ``EXIT C OPENS N PARSED M [...]`` line of :data:`COUNT_OPENS` for ``compactctl ARGS`` on
    ``path`` (``env`` added to the environment), with the run's stderr when it is missing."""
    out = subprocess.run(
        [sys.executable, "-c", COUNT_OPENS, str(path), *args],
        capture_output=True,
        env={**os.environ, **env},
        cwd=ROOT,
        timeout=120,
    )
    lines = out.stderr.decode().strip().splitlines()
    return lines[-1] if lines else out.stderr.decode()
