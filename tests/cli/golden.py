"""Golden cases of the compactctl command line: run, normalise, record, compare.

Each case copies fixtures (and files it generates) into a fresh temporary folder, runs one
or more ``python -m compactctl ...`` commands there (relative file names, so paths in
messages are stable), and records per step the exit code, stdout, stderr, the bytes each
pre-existing file gained (the original bytes must stay an unchanged prefix), and every file
the step created or changed (``-o`` outputs). Text that differs from run to run (the time of
the run, durations, the temporary folder) is normalised by :func:`normalise`; nothing else is.

Usage::

    python tests/cli/golden.py --write --source /work/golden-base   # record the reference
    python tests/cli/golden.py --check [--source DIR]                # compare, print diffs

``--source DIR`` puts DIR first on ``PYTHONPATH`` (the code under test); without it, an
inherited ``PYTHONPATH`` wins, then the repository holding this file. ``tests/cli/
test_golden.py`` runs the same cases under pytest.

A case file ``cases/<name>.json`` has the keys ``args``, ``input``, ``files``, ``stdin``,
``env``, ``exit``, ``stdout``, ``stderr``, ``appended``, ``outputs``. For a case of one
command, ``args`` is its argument list (after ``compactctl``) and the result keys hold that
command's result; for a sequence of commands on the same files, each of ``args``, ``stdin``
and the result keys is a list with one entry per step. ``input`` is the fixture path (or a
``{name: fixture}`` map when several are copied); ``appended`` is the text appended to the
one pre-existing file (or a ``{name: text}`` map when there are several). Bytes that are not
valid UTF-8 are stored as ``{"base64": ...}``.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import difflib
import gzip
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIXTURES = ROOT / "fixtures"
CASES_DIR = HERE / "cases"

PREV = "<previous stdout>"
"""The ``stdin`` of a step that reads the stdout of the step before it (``<|`` in a command)."""

BROKEN = "<<golden: "
"""Starts the text recorded instead of a file's bytes when an input was changed other than
by an append (or a file was deleted): a broken invariant, recorded and reported."""

STEP_TIMEOUT = 300.0
"""Seconds one command may take before the case fails."""

# --- fixtures and generated files -----------------------------------------------------------

FIXTURE_ALIASES: dict[str, str] = {
    "s1": "samples/small-s1.canonical.jsonl",
    "s1-claude-code": "samples/small-s1.claude-code.jsonl",
    "s1-claude-stream": "samples/small-s1.claude-stream.jsonl",
    "s1-codex-rollout": "samples/small-s1.codex-rollout.jsonl",
    "s1-openai-chat": "samples/small-s1.openai-chat.jsonl",
    "s2": "samples/messy-s2.canonical.jsonl",
    "s2-claude-code": "samples/messy-s2.claude-code.jsonl",
    "s3-cjk": "samples/cjk-s3.canonical.jsonl",
    "handcount": "cases/handcount.jsonl",
    "claude-code-branches": "formats/claude-code-branches.jsonl",
    "claude-stream-compact": "formats/claude-stream-compact.jsonl",
    "codex-exec": "formats/codex-exec-s1.jsonl",
    "codex-rollout-compacted": "formats/codex-rollout-compacted.jsonl",
    "openai-chat-variants": "formats/openai-chat-variants.jsonl",
    "openhands": "formats/openhands-s1.json",
    "swe-agent": "formats/swe-agent-s1.traj",
}
"""Short names (used in case names) of the fixtures, relative to ``fixtures/``."""

CANONICAL = ("s1", "s2", "s3-cjk", "handcount")
FOREIGN = tuple(a for a in FIXTURE_ALIASES if a not in CANONICAL)
ALL_FIXTURES = tuple(FIXTURE_ALIASES)


@dataclass(frozen=True)
class Gen:
    """A file (or folder) a case creates before its first command.

    Attributes:
        description: what it is, recorded in the case file.
        make: its bytes from the fixtures folder, or ``None`` for an empty folder.
    """

    description: str
    make: Callable[[Path], bytes | None]


def text_file(text: str) -> Gen:
    """A file holding ``text`` (UTF-8)."""
    return Gen(f"text: {text!r}", lambda _: text.encode())


def binary_file() -> Gen:
    """1 KiB of every byte value in turn: not UTF-8, not JSON."""
    return Gen("binary: bytes 0..255 four times", lambda _: bytes(range(256)) * 4)


def gzip_of(alias: str) -> Gen:
    """The fixture gzip-compressed (mtime 0, so the bytes are stable)."""
    rel = FIXTURE_ALIASES[alias]
    return Gen(
        f"gzip of fixtures/{rel}", lambda fx: gzip.compress((fx / rel).read_bytes(), mtime=0)
    )


def torn_copy(alias: str, tail: str) -> Gen:
    """The fixture followed by ``tail``, a last line without its newline (a torn write)."""
    rel = FIXTURE_ALIASES[alias]
    return Gen(
        f"fixtures/{rel} + torn last line {tail!r}",
        lambda fx: (fx / rel).read_bytes() + tail.encode(),
    )


def empty_folder() -> Gen:
    """An empty folder."""
    return Gen("empty folder", lambda _: None)


def _secrets_transcript() -> str:
    """A small canonical transcript whose old tool calls and outputs carry secrets."""
    ts = "2025-02-01T10:{:02d}:00.000Z"
    lines: list[dict[str, Any]] = [
        {"type": "session", "uuid": "s0", "sessionId": "secrets-1", "model": "gpt-4o",
         "timestamp": ts.format(0)},
    ]  # fmt: skip
    secrets = [
        "export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz0123",
        "curl -H 'Authorization: Bearer abcdefghijklmnop1234' https://bob:hunter22@db.local/x",
        "aws configure set aws_access_key_id AKIAABCDEFGHIJKLMNOP",
        "gh auth login --with-token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "echo password=supersecret99 >> .env",
    ]
    n = 1
    for turn, cmd in enumerate(secrets * 2, start=1):
        call = f"c{turn}"
        ask = f"Step {turn}: run `{cmd}` and tell me what fails."
        output = f"$ {cmd}\nerror: request failed with {cmd.split()[-1]}\n" + "".join(
            f"line {i} of the deploy log, nothing to see here\n" for i in range(12)
        )
        lines += [
            {"type": "message", "uuid": f"u{turn}", "role": "user", "turnId": turn,
             "timestamp": ts.format(n), "content": ask},
            {"type": "message", "uuid": f"a{turn}", "role": "assistant", "turnId": turn,
             "timestamp": ts.format(n + 1), "content": "Running it.",
             "toolCalls": [{"id": call, "name": "bash", "arguments": {"command": cmd}}]},
            {"type": "message", "uuid": f"t{turn}", "role": "tool", "toolCallId": call,
             "toolName": "bash", "turnId": turn, "timestamp": ts.format(n + 2),
             "content": output},
            {"type": "message", "uuid": f"r{turn}", "role": "assistant", "turnId": turn,
             "timestamp": ts.format(n + 3), "content": f"It failed: {cmd.split()[-1]}."},
        ]  # fmt: skip
        n += 4
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in lines)


SECRETS = Gen("canonical transcript with secrets", lambda _: _secrets_transcript().encode())


def _many_findings() -> bytes:
    """fixtures/cases/handcount.jsonl with 24 malformed lines after it (more than the 20
    findings the inspect table shows without -v)."""
    head = (FIXTURES / FIXTURE_ALIASES["handcount"]).read_bytes()
    return head + b"".join(b'{"type":"message","uuid":"bad%d",\n' % i for i in range(24))


def _nothing_to_report() -> bytes:
    """fixtures/samples/small-s1.canonical.jsonl with one summary that replaces every message
    by "Nothing to report.": a compaction that kept none of the probes."""
    data = (FIXTURES / FIXTURE_ALIASES["s1"]).read_bytes()
    records = [json.loads(line) for line in data.splitlines() if line.strip()]
    uuids = [r["uuid"] for r in records if r.get("type") == "message"]
    summary = {"type": "summary", "uuid": "s-nothing", "replaces": uuids,
               "summaryText": "Nothing to report.", "lastSummarizedTurnId": 6,
               "timestamp": "2025-05-16T10:00:00Z"}  # fmt: skip
    return data + json.dumps(summary, separators=(",", ":")).encode() + b"\n"


NOTHING_TO_REPORT = Gen(
    "fixtures/samples/small-s1.canonical.jsonl + a summary replacing every message by "
    "'Nothing to report.'",
    lambda _: _nothing_to_report(),
)

MANY_FINDINGS = Gen(
    "fixtures/cases/handcount.jsonl + 24 malformed lines", lambda _: _many_findings()
)

# --- cases ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One command of a case.

    Attributes:
        args: the arguments after ``compactctl``.
        stdin: a file of the case folder fed on stdin, :data:`PREV`, or ``None`` (no input).
    """

    args: tuple[str, ...]
    stdin: str | None = None


@dataclass(frozen=True)
class Case:
    """A golden case: files to set up, then commands run in order in one folder.

    Attributes:
        name: unique, also the case file's name.
        steps: the commands.
        inputs: ``(destination name, fixture path relative to fixtures/)``.
        files: generated files, ``(name, Gen)``.
        env: extra environment variables (over :func:`base_env`).
    """

    name: str
    steps: tuple[Step, ...]
    inputs: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, Gen], ...] = ()
    env: tuple[tuple[str, str], ...] = ()


def parse_step(command: str, names: Sequence[str]) -> Step:
    """A :class:`Step` from a command line (after ``compactctl``).

    ``{in}`` is the first input's name and ``{in0}``, ``{in1}``, ... each input's by
    position (the copied fixtures, then the generated files); ``< FILE`` feeds FILE on stdin
    and ``<|`` the previous step's stdout.

    >>> parse_step("rules - < {in}", ["a.jsonl"])
    Step(args=('rules', '-'), stdin='a.jsonl')
    >>> parse_step("dedup --json - <|", []).stdin == PREV
    True
    """
    fields = {"in": names[0] if names else ""}
    fields.update({f"in{i}": n for i, n in enumerate(names)})
    tokens = shlex.split(command.format(**fields))
    stdin: str | None = None
    if "<|" in tokens:
        tokens.remove("<|")
        stdin = PREV
    if "<" in tokens:
        i = tokens.index("<")
        stdin = tokens[i + 1]
        del tokens[i : i + 2]
    return Step(tuple(tokens), stdin)


def case(
    name: str,
    commands: str | Sequence[str],
    inputs: str | Sequence[str] = (),
    *,
    files: Mapping[str, Gen] | None = None,
    env: Mapping[str, str] | None = None,
) -> Case:
    """Build a :class:`Case` from the compact notation of :data:`CASES`.

    ``inputs`` are fixture aliases (:data:`FIXTURE_ALIASES`), copied under their file name,
    or ``alias>dest`` to copy one to ``dest`` (which may be in a sub-folder).
    """
    specs = [inputs] if isinstance(inputs, str) else list(inputs)
    copied: list[tuple[str, str]] = []
    for spec in specs:
        alias, _, dest = spec.partition(">")
        rel = FIXTURE_ALIASES[alias]
        copied.append((dest or Path(rel).name, rel))
    names = [d for d, _ in copied] + list(files or {})
    cmds = [commands] if isinstance(commands, str) else list(commands)
    return Case(
        name=name,
        steps=tuple(parse_step(c, names) for c in cmds),
        inputs=tuple(copied),
        files=tuple((files or {}).items()),
        env=tuple(sorted((env or {}).items())),
    )


TEXT_FILE = {"notes.txt": text_file("hello\nthis is not json\n")}
BINARY_FILE = {"blob.jsonl": binary_file()}
EMPTY_FILE = {"empty.jsonl": text_file("")}
GZIP_FILE = {"s.jsonl.gz": gzip_of("s1")}
SECRETS_FILE = {"secrets.jsonl": SECRETS}
FINDINGS_FILE = {"findings.jsonl": MANY_FINDINGS}
NOTHING_FILE = {"nothing.jsonl": NOTHING_TO_REPORT}
CONFIG = '[compact]\nkeep_recent = 4\nstrategy = "full_replace"\nkeep_recnt = 3\n'
REDACT = "compact --force --keep-recent 2"
"""The compaction of the secrets transcript (old enough tool outputs to be summarized)."""
COMPACT_THEN_TIERS = ["compact --force {in}", "tiers {in}"]


COMMANDS = ("inspect", "compact", "rules", "dedup", "tiers", "convert", "eval")
ESTIMATED = ("s1", "s2-claude-code")
EFFECTIVE = ("s1", "handcount", "claude-stream-compact", "codex-rollout-compacted", "openhands")
SEVERAL = ["s1", "s3-cjk", "handcount"]
FOLDER = [
    "s1>sessions/a.jsonl",
    "handcount>sessions/sub/b.jsonl",
    "s1-claude-code>sessions/c.jsonl",
    "openhands>sessions/d.json",
]
"""A folder: searched for *.jsonl (d.json is not one)."""


def _build_cases() -> list[Case]:
    """The case table: ``case(name, command or commands, fixture alias(es), files=, env=)``."""
    c = case
    return [
        # help and version
        c("help", "--help"),
        c("no-args", ""),
        c("version", "--version"),
        *(c(f"help-{cmd}", f"{cmd} --help") for cmd in COMMANDS),
        # inspect: the table of every fixture, --json and the other views of a selection
        *(c(f"inspect-{a}", "inspect --jobs 1 {in}", a) for a in ALL_FIXTURES),
        *(
            c(f"inspect-json-{a}", "inspect --json --jobs 1 {in}", a)
            for a in ("s1", "s2", "handcount", "s1-claude-code", "openhands")
        ),
        c("inspect-json-swe-agent", "inspect --json {in}", "swe-agent"),
        *(c(f"inspect-estimate-{a}", "inspect --estimate {in}", a) for a in ESTIMATED),
        *(c(f"inspect-effective-{a}", "inspect --effective {in}", a) for a in EFFECTIVE),
        *(c(f"inspect-check-{a}", "inspect --check {in}", a) for a in ("s1", "handcount")),
        c("inspect-many-findings", "inspect {in}", files=FINDINGS_FILE),  # 20 findings shown
        c("inspect-many-findings-verbose", "inspect -v {in}", files=FINDINGS_FILE),  # all
        c(
            "inspect-top-encoding-window",
            "inspect --top 3 --encoding cl100k_base --context-window 5000 {in}",
            "s2",
        ),
        c("inspect-format-claude-code", "inspect --format claude-code {in}", "s1-claude-code"),
        c("inspect-stdin", "inspect - < {in}", "s1"),
        c("inspect-stdin-json-estimate", "inspect --json --estimate - < {in}", "handcount"),
        c("inspect-many-jobs1", "inspect --jobs 1 {in0} {in1} {in2}", SEVERAL),
        c("inspect-folder-json-jobs2", "inspect --json --estimate --jobs 2 sessions/", FOLDER),
        # compact
        *(c(f"compact-force-{a}", "compact --force {in}", a) for a in CANONICAL),
        *(c(f"compact-default-{a}", "compact {in}", a) for a in ("s1", "s2", "s3-cjk")),
        c("compact-context-window-trigger", "compact --context-window 8000 {in}", "s1"),
        c("compact-input-token-threshold", "compact --input-token-threshold 3000 {in}", "s1"),
        c("compact-dry-run", "compact --force --dry-run {in}", "s1"),
        c("compact-check-force", "compact --force --check {in}", "s1"),
        c("compact-check-default", "compact --check {in}", "s2"),
        c("compact-json", "compact --force --json {in}", "s1"),
        # what landed: a dry run saves 0 (tokensWouldSave), an up-to-date output too
        c("compact-dry-run-json", "compact --force --dry-run --json {in}", "s1"),
        c("rules-out-dir-twice-json", ["rules --json -o out/ {in}"] * 2, "s1"),
        c("compact-full-replace", "compact --force --strategy full_replace {in}", "s1"),
        c("compact-task-state", "compact --force --summary-format task-state {in}", "s1"),
        c(
            "compact-task-state-json",
            "compact --force --summary-format task-state --json {in}",
            "s2",
        ),
        c("compact-materialize", "compact --force --materialize -o out.jsonl {in}", "s1"),
        c(
            "compact-materialize-openai",
            "compact --force --materialize --as openai -o out.json {in}",
            "s1",
        ),
        c("compact-materialize-stdout", "compact --force --materialize {in}", "s3-cjk"),
        c("compact-events", "compact --force --events {in}", "s1"),
        c("compact-estimate", "compact --force --estimate {in}", "s2"),
        c("compact-micro-only", "compact --micro-only --context-window 8000 {in}", "s1"),
        c("compact-no-micro", "compact --force --no-micro {in}", "s1"),
        c("compact-keep-recent-4", "compact --force --keep-recent 4 {in}", "s2"),
        c("compact-reactive", "compact --reactive {in}", "s3-cjk"),
        c("compact-max-summary-chars", "compact --force --max-summary-chars 2000 {in}", "s2"),
        c("compact-instructions", "compact --force --instructions 'keep test names' {in}", "s1"),
        c("compact-preserve-bash", "compact --force --preserve bash {in}", "s1"),
        c(
            "compact-model-dry-run",
            "compact --force --dry-run --model openai/gpt-4o-mini {in}",
            "s1",
        ),
        c("compact-twice", ["compact --force {in}"] * 2, "s1"),
        c("compact-twice-s2", ["compact --force --jobs 1 {in}", "compact --force {in}"], "s2"),
        c("compact-stdin", "compact --force - < {in}", "s1"),
        c("compact-stdin-json", "compact --force --json - < {in}", "s1"),
        c("compact-many-jobs2", "compact --force --jobs 2 {in0} {in1} {in2}", SEVERAL),
        c(
            "compact-many-to-dir",
            "compact --force --jobs 1 -o out/ {in0} {in1}",
            ["s1", "s1-claude-code"],
        ),
        *(c(f"compact-foreign-{a}", "compact --force -o out.jsonl {in}", a) for a in FOREIGN),
        c("compact-foreign-in-place", "compact --force {in}", "openhands"),
        c("compact-gzip-in-place", "compact --force s.jsonl.gz", files=GZIP_FILE),
        c("compact-gzip-out", "compact --force -o out.jsonl s.jsonl.gz", files=GZIP_FILE),
        c(
            "compact-torn-line",
            "compact --force t.jsonl",
            files={"t.jsonl": torn_copy("s1", '{"type":"message","uuid":"x","role":"us')},
        ),
        # compact: configuration file, environment, redaction
        c(
            "compact-config-file",
            "compact --force --config cfg.toml {in}",
            "s1",
            files={"cfg.toml": text_file(CONFIG)},
        ),
        c(
            "compact-config-default-location",
            "compact --force {in}",
            "s1",
            files={"xdg/compactctl/config.toml": text_file("[compact]\nkeep_recent = 2\n")},
            env={"XDG_CONFIG_HOME": "xdg"},
        ),
        c("compact-config-missing", "compact --force --config nope.toml {in}", "s1"),
        c(
            "compact-config-invalid",
            "compact --force --config bad.toml {in}",
            "s1",
            files={"bad.toml": text_file("[compact\nkeep_recent = \n")},
        ),
        c(
            "compact-env-keep-recent",
            "compact --force {in}",
            "s1",
            env={"COMPACTCTL_KEEP_RECENT": "3"},
        ),
        c(
            "compact-env-bad-value",
            "compact --force {in}",
            "s1",
            env={"COMPACTCTL_KEEP_RECENT": "three"},
        ),
        c("compact-redact-default", f"{REDACT} {{in}}", files=SECRETS_FILE),
        *(
            c(
                f"compact-redact-env-{value or 'empty'}",
                f"{REDACT} {{in}}",
                files=SECRETS_FILE,
                env={"COMPACTCTL_REDACT": value},
            )
            for value in ("0", "bogus", "")
        ),
        c("compact-no-redact", f"{REDACT} --no-redact {{in}}", files=SECRETS_FILE),
        c(
            "compact-redact-config-false",
            f"{REDACT} --config cfg.toml secrets.jsonl",
            files={**SECRETS_FILE, "cfg.toml": text_file("redact = false\n")},
        ),
        c(
            "compact-redact-task-state",
            f"{REDACT} --summary-format task-state {{in}}",
            files=SECRETS_FILE,
        ),
        # compact: usage errors
        c("compact-bad-strategy", "compact --force --strategy bogus {in}", "s1"),
        c("compact-bad-summary-format", "compact --force --summary-format xml {in}", "s1"),
        c("compact-bad-as", "compact --force --materialize --as xml {in}", "s1"),
        c("compact-as-without-materialize", "compact --force --as openai {in}", "s1"),
        c("compact-output-is-input", "compact --force -o {in} {in}", "s1"),
        c("compact-output-several", "compact --force -o out.jsonl {in0} {in1}", ["s1", "s3-cjk"]),
        c("compact-bad-jobs", "compact --force --jobs 0 {in}", "s1"),
        c("compact-bad-tier", "compact --force --materialize --tier L7 {in}", "s1"),
        # rules
        c("rules-list", "rules --list"),
        c("rules-list-json", "rules --list --json"),
        *(c(f"rules-{a}", "rules {in}", a) for a in CANONICAL),
        c("rules-json", "rules --json {in}", "s2"),
        c("rules-dry-run", "rules --dry-run {in}", "s2"),
        c("rules-check", "rules --check {in}", "s2"),
        c("rules-twice-then-check", ["rules {in}", "rules {in}", "rules --check {in}"], "s3-cjk"),
        c("rules-stdin", "rules - < {in}", "s1"),
        c("rules-stdin-json", "rules --json - < {in}", "s1"),
        c("rules-only", "rules --only ansi --only whitespace {in}", "s2"),
        c("rules-skip", "rules --skip cjk_punct --skip whitespace {in}", "s3-cjk"),
        c("rules-only-unknown", "rules --only nope {in}", "s2"),
        c("rules-estimate", "rules --estimate {in}", "s1"),
        c("rules-materialize", "rules --materialize -o out.jsonl {in}", "s2"),
        c("rules-foreign-out", "rules -o out.jsonl {in}", "s1-claude-code"),
        c("rules-foreign-in-place", "rules {in}", "codex-rollout-compacted"),
        c("rules-no-paths", "rules"),
        # dedup
        *(c(f"dedup-{a}", "dedup {in}", a) for a in CANONICAL),
        c("dedup-threshold-0.9", "dedup --threshold 0.9 {in}", "s2"),
        c("dedup-scope-tool", "dedup --scope tool {in}", "s2"),
        c("dedup-scope-assistant", "dedup --scope assistant {in}", "s2"),
        c("dedup-json", "dedup --json {in}", "s2"),
        c("dedup-min-chars", "dedup --min-chars 50 {in}", "s1"),
        c("dedup-check", "dedup --check {in}", "s2"),
        c("dedup-twice", ["dedup {in}", "dedup {in}"], "s2"),
        c("dedup-stdin", "dedup - < {in}", "s1"),
        c("dedup-foreign-out", "dedup -o out.jsonl {in}", "s1-claude-code"),
        c("dedup-bad-threshold", "dedup --threshold 1.5 {in}", "s1"),
        c("dedup-threshold-not-a-number", "dedup --threshold abc {in}", "s1"),
        c("dedup-bad-scope", "dedup --scope everything {in}", "s1"),
        # pipes (each step reads the stdout of the one before) and the layers in place
        c(
            "pipe-rules-dedup-compact",
            ["rules - < {in}", "dedup - <|", "compact --force - <|"],
            "s1",
        ),
        c("pipe-rules-dedup-json", ["rules --json - < {in}", "dedup --json - <|"], "s1"),
        c(
            "layers-in-place",
            ["rules {in}", "dedup {in}", "compact --force {in}", "inspect {in}"],
            "s2",
        ),
        # tiers (after a summary)
        *(c(f"tiers-{a}", COMPACT_THEN_TIERS, a) for a in ("s1", "s2", "s3-cjk")),
        c("tiers-without-summary", "tiers {in}", "s1"),
        c("tiers-json", ["compact --force {in}", "tiers --json {in}"], "s2"),
        c("tiers-twice", [*COMPACT_THEN_TIERS, "tiers {in}"], "s1"),
        c(
            "tiers-l0-materialize",
            ["compact --force {in}", "tiers --tier L0 --materialize -o ctx.jsonl {in}"],
            "s1",
        ),
        c("tiers-l2-dry-run", ["compact --force {in}", "tiers --tier L2 --dry-run {in}"], "s3-cjk"),
        c(
            "tiers-then-inspect",
            [
                "compact --force {in}",
                "tiers --tier L1 {in}",
                "inspect --tier L0 --effective {in}",
                "inspect {in}",
            ],
            "s1",
        ),
        c(
            "tiers-compact-materialize-tier",
            [*COMPACT_THEN_TIERS, "compact --materialize --tier L1 -o ctx.jsonl {in}"],
            "s2",
        ),
        c("tiers-foreign-stream", "tiers -o out.jsonl {in}", "claude-stream-compact"),
        c("tiers-foreign-codex", "tiers -o out.jsonl {in}", "codex-rollout-compacted"),
        c("tiers-bad-tier", "tiers --tier L9 {in}", "s1"),
        # convert
        c("convert-list-formats", "convert --list-formats"),
        c("convert-list-formats-json", "convert --list-formats --json"),
        *(c(f"convert-{a}", "convert -o out.jsonl {in}", a) for a in FOREIGN),
        c("convert-canonical", "convert -o out.jsonl {in}", "handcount"),
        c("convert-stdout", "convert {in}", "openai-chat-variants"),
        c("convert-stdin", "convert - < {in}", "codex-exec"),
        c("convert-json", "convert --json -o out.jsonl {in}", "openhands"),
        c("convert-dry-run", "convert --dry-run -o out.jsonl {in}", "swe-agent"),
        c("convert-check-canonical", "convert --check {in}", "s1"),
        c("convert-check-foreign", "convert --check {in}", "s1-claude-code"),
        c(
            "convert-check-several",
            "convert --check --jobs 1 {in0} {in1} {in2}",
            ["s1", "s1-claude-stream", "openhands"],
        ),
        c(
            "convert-to-dir",
            "convert --jobs 2 -o conv/ {in0} {in1} {in2}",
            ["s1-claude-code", "s1-codex-rollout", "swe-agent"],
        ),
        c("convert-several-no-dir", "convert {in0} {in1}", ["s1-claude-code", "swe-agent"]),
        c(
            "convert-format-forced",
            "convert --format claude-code -o out.jsonl {in}",
            "s1-claude-code",
        ),
        c("convert-format-wrong", "convert --format openhands -o out.jsonl {in}", "s1"),
        c("convert-format-unknown", "convert --format nope -o out.jsonl {in}", "s1"),
        # eval: probes kept by a compaction (writes nothing; exit 1 below a --min gate)
        *(c(f"eval-{a}", "eval {in}", a) for a in ("s1", "s3-cjk", "s1-claude-code")),
        c("eval-json", "eval --json {in}", "s2"),
        c("eval-estimate-stdin", "eval --estimate - < {in}", "handcount"),
        c("eval-after-compact", ["compact --force {in}", "eval {in}"], "s1"),
        c("eval-after-compact-json", ["compact --force {in}", "eval --json {in}"], "s2"),
        c(
            "eval-min-retention-gate",
            [
                "eval --min-retention 0.9 {in}",
                "eval --min-retention 0.9 --json {in}",
                "eval --min-retention 0 {in}",
            ],
            files=NOTHING_FILE,
        ),
        c("eval-min-kind-gate", "eval --min error=1 --min command=0.5 {in}", files=NOTHING_FILE),
        c("eval-min-kind-pass", ["compact --force {in}", "eval --min error=1 --json {in}"], "s1"),
        c(
            "eval-against-materialized",
            ["compact --force --materialize -o ctx.jsonl {in}", "eval --against {in} ctx.jsonl"],
            "s1",
        ),
        c("eval-compare-default", "eval --compare default {in}", "s1"),
        c("eval-many-jobs1", "eval --jobs 1 {in0} {in1} {in2}", SEVERAL),
        c("eval-bad-min", "eval --min bogus=2 {in}", "s1"),
        c("eval-bad-min-retention", "eval --min-retention 1.5 {in}", "s1"),
        c("eval-no-paths", "eval"),
        # options no case above gives
        c("compact-quiet", "compact --force -q {in}", "s1"),
        c("compact-verbose", "compact --force -v {in}", "s2"),
        c("compact-min-saving-high", "compact --force --min-saving 0.99 {in}", "s1"),
        c(
            "compact-triggers",
            "compact --context-window 20000 --micro-trigger 0.1 --summary-trigger 0.3 "
            "--keep-turns 0 {in}",
            "s1",
        ),
        c("compact-encoding", "compact --force --json --encoding o200k_base {in}", "s1"),
        c(
            "compact-format-forced",
            "compact --force --format claude-code -o out.jsonl {in}",
            "s1-claude-code",
        ),
        c("rules-quiet-verbose", ["rules -q {in}", "rules -v {in}"], "s2"),
        c("rules-materialize-openai", "rules --materialize --as openai -o out.json {in}", "s2"),
        c("rules-encoding-json", "rules --json --encoding cl100k_base {in}", "s3-cjk"),
        c("dedup-dry-run-estimate", "dedup --dry-run --estimate {in}", "s2"),
        c("dedup-materialize", "dedup --materialize -o out.jsonl {in}", "s2"),
        c("tiers-check", ["compact --force {in}", "tiers --check {in}", "tiers -q {in}"], "s1"),
        c(
            "tiers-context-window",
            ["compact --force {in}", "tiers --context-window 9000 {in}"],
            "s2",
        ),
        c("convert-quiet", "convert -q -o out.jsonl {in}", "openhands"),
        # the SQLite store (in the case folder)
        c(
            "store-after-compact",
            ["compact --force {in}", "inspect --store", "inspect --store --json"],
            "s1",
        ),
        c(
            "store-all-commands",
            ["rules {in}", "dedup {in}", *COMPACT_THEN_TIERS, "inspect --json --store --days 1"],
            "s2",
        ),
        c("store-missing", "inspect --store"),
        c("store-no-store", ["compact --force --no-store {in}", "inspect --store"], "s1"),
        c(
            "store-db-option",
            ["compact --force --db ../state/my.db {in}", "inspect --db ../state/my.db"],
            "s1",
        ),
        # bad inputs and usage errors
        c("missing-file-inspect", "inspect missing.jsonl"),
        c("missing-and-present", "inspect --jobs 1 missing.jsonl {in}", "handcount"),
        *(
            c(f"text-file-{cmd.split()[0]}", f"{cmd} notes.txt", files=TEXT_FILE)
            for cmd in ("inspect", "convert -o out.jsonl")
        ),
        *(
            c(f"binary-file-{cmd.split()[0]}", f"{cmd} blob.jsonl", files=BINARY_FILE)
            for cmd in ("compact --force", "rules", "dedup")
        ),
        c("empty-file-inspect", "inspect empty.jsonl", files=EMPTY_FILE),
        c("empty-file-compact", "compact --force empty.jsonl", files=EMPTY_FILE),
        c("empty-folder", "inspect empty/", files={"empty": empty_folder()}),
        c(
            "torn-line-inspect",
            "inspect t.jsonl",
            files={"t.jsonl": torn_copy("handcount", '{"type":"message","uuid":"m8"')},
        ),
        c(
            "torn-line-rules",
            "rules t.jsonl",
            files={"t.jsonl": torn_copy("s2", '{"type":"message","uuid":"zz"')},
        ),
        c("gzip-inspect", "inspect s.jsonl.gz", files=GZIP_FILE),
        c("unknown-command", "frobnicate {in}", "s1"),
        c("unknown-option", "inspect --nope {in}", "s1"),
        c("inspect-no-paths", "inspect"),
        c("inspect-bad-tier", "inspect --tier L5 {in}", "s1"),
        c("inspect-bad-jobs", "inspect --jobs 0 {in}", "s1"),
        c("inspect-format-unknown", "inspect --format nope {in}", "s1"),
        c("inspect-format-wrong", "inspect --format swe-agent {in}", "s1"),
    ]


CASES: list[Case] = _build_cases()
"""Every golden case, in table order."""

# --- running --------------------------------------------------------------------------------


def base_env(
    tmp: Path, cache: Path, source_root: Path | None, extra: Iterable[tuple[str, str]] = ()
) -> dict[str, str]:
    """The complete environment of a case's commands (nothing is inherited but PYTHONPATH).

    State, config and the store live under ``tmp``; the tiktoken cache (``cache``) may be
    shared between cases. ``source_root`` goes on ``PYTHONPATH``; without it, an inherited
    ``PYTHONPATH`` comes first, then the repository holding this file.
    """
    if source_root is not None:
        pythonpath = str(source_root)
    else:
        inherited = os.environ.get("PYTHONPATH")
        pythonpath = os.pathsep.join(p for p in (inherited, str(ROOT)) if p)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp / "home"),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "COLUMNS": "80",
        "TERM": "dumb",
        "PYTHONPATH": pythonpath,
        "PYTHONDONTWRITEBYTECODE": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "XDG_STATE_HOME": str(tmp / "state"),
        "XDG_CONFIG_HOME": str(tmp / "config"),
        "XDG_CACHE_HOME": str(cache),
        "COMPACTCTL_DB": str(tmp / "state" / "compactctl.db"),
        "COMPACTCTL_TORN_WAIT": "0.2",
    }
    for key, value in extra:
        # a relative folder in a case's env is relative to the case folder
        env[key] = str(tmp / "work" / value) if key.startswith("XDG_") else value
    return env


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (``None``) under ``folder``, by relative path."""
    out: dict[str, bytes | None] = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        out[rel] = None if p.is_dir() else p.read_bytes()
    return out


def _appended(before: bytes | None, after: bytes | None) -> bytes | str:
    """The bytes a file gained, or a :data:`BROKEN` message when it changed otherwise."""
    if after is None:
        return BROKEN + "the file was deleted>>"
    if before is None or not after.startswith(before):
        size = 0 if before is None else len(before)
        return f"{BROKEN}the original {size} bytes are not a prefix of the new {len(after)}>>"
    return after[len(before or b"") :]


@dataclass
class RunContext:
    """What normalisation needs to know about a run.

    Attributes:
        tmp: the case folder.
        cache: the shared cache folder.
        input_bytes: every file as it was before the first command.
        dates: the UTC dates (``YYYY-MM-DD``) the case ran on.
    """

    tmp: Path
    cache: Path
    input_bytes: bytes = b""
    dates: set[str] = field(default_factory=set)


def run_case(
    case: Case,
    python: str,
    source_root: Path | str | None,
    *,
    cache_dir: Path | None = None,
    normalise_text: bool = True,
) -> dict[str, Any]:
    """Run ``case`` and return its results, normalised.

    Args:
        case: the case.
        python: the interpreter that runs ``-m compactctl``.
        source_root: the code to test (first on ``PYTHONPATH``), or ``None``: see
            :func:`base_env`.
        cache_dir: the cache folder shared by cases (default: one inside the case folder).
        normalise_text: ``False`` returns the raw text (to find what varies between runs).

    Returns:
        ``{"exit", "stdout", "stderr", "appended", "outputs"}``; with several steps each
        value is a list with one entry per step.
    """
    src = Path(source_root) if source_root is not None else None
    with tempfile.TemporaryDirectory(prefix="compactctl-golden-") as name:
        tmp = Path(name).resolve()
        work = tmp / "work"
        work.mkdir()
        cache = cache_dir if cache_dir is not None else tmp / "cache"
        for dest, rel in case.inputs:
            target = work / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((FIXTURES / rel).read_bytes())
        for dest, gen in case.files:
            target = work / dest
            data = gen.make(FIXTURES)
            if data is None:
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        originals = {k: v for k, v in snapshot(work).items() if v is not None}
        ctx = RunContext(tmp=tmp, cache=Path(cache).resolve())
        ctx.input_bytes = b"\n".join(originals.values())
        env = base_env(tmp, cache, src, case.env)
        steps: list[dict[str, Any]] = []
        previous = b""
        for step in case.steps:
            before = snapshot(work)
            if step.stdin is None:
                stdin: bytes | None = (
                    None  # no input at all (/dev/null): a piped stdin is read as -
                )
            elif step.stdin == PREV:
                stdin = previous
            else:
                stdin = (work / step.stdin).read_bytes()
            ctx.dates.add(_utc_date())
            proc = subprocess.run(
                [python, "-m", "compactctl", *step.args],
                input=stdin,
                stdin=subprocess.DEVNULL if stdin is None else None,
                capture_output=True,
                env=env,
                cwd=work,
                timeout=STEP_TIMEOUT,
                check=False,
            )
            ctx.dates.add(_utc_date())
            after = snapshot(work)
            previous = proc.stdout
            appended = {k: _appended(before.get(k), after.get(k)) for k in originals}
            outputs: dict[str, bytes | str] = {
                k: v
                for k, v in after.items()
                if k not in originals and v is not None and before.get(k) != v
            }
            outputs.update({k: BROKEN + "deleted>>" for k in before if k not in after})
            steps.append(
                {
                    "exit": proc.returncode,
                    "stdout": proc.stdout,
                    "stderr": proc.stderr,
                    "appended": _one_or_map(appended),
                    "outputs": outputs,
                }
            )
    norm = (lambda b: normalise(b, ctx)) if normalise_text else _text
    results: list[dict[str, Any]] = [_map_bytes(s, norm) for s in steps]
    if len(results) == 1:
        return results[0]
    return {
        key: [r[key] for r in results]
        for key in ("exit", "stdout", "stderr", "appended", "outputs")
    }


def _one_or_map(appended: dict[str, Any]) -> Any:
    """The appended value of a step: ``None`` (no files), the one file's, or a map."""
    if not appended:
        return None
    return next(iter(appended.values())) if len(appended) == 1 else appended


def _utc_date() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")


def _map_bytes(value: Any, fn: Callable[[bytes], Any]) -> Any:
    """``value`` with every ``bytes`` inside (dicts, lists) replaced by ``fn(bytes)``."""
    if isinstance(value, bytes):
        return fn(value)
    if isinstance(value, dict):
        return {k: _map_bytes(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_bytes(v, fn) for v in value]
    return value


def _text(data: bytes) -> str | dict[str, str]:
    """``data`` as text, or ``{"base64": ...}`` when it is not valid UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


# --- normalisation --------------------------------------------------------------------------

TIMESTAMP = re.compile(
    r"(?<![\d])(\d{4}-\d{2}-\d{2})T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?(?![\d])"
)
"""An RFC 3339 / ISO 8601 timestamp; group 1 is its date."""

DATE = re.compile(r"(?<![\d-])(\d{4}-\d{2}-\d{2})(?![\d:T-])")
"""A bare date (the store report's days)."""

DURATION_MS = re.compile(rb'("durationMs": ?)\d+')
"""The wall time of a run in ``--json`` reports (``_layer_path`` and ``compact`` time
themselves with ``time.monotonic``)."""

OUTPUT_SHA = re.compile(rb'("outputSha256": ?")[0-9a-f]{64}')
"""The hash of an ``-o DIR/`` output in its record (``DIR/.compactctl/``): the output holds
the ``timestamp`` of the events appended, so its hash differs from run to run."""


def normalise(data: bytes, ctx: RunContext) -> str | dict[str, str]:
    """Replace what differs between two runs of the same case, and nothing else.

    - a timestamp dated on a day the case ran and not in any input file -> ``<NOW>`` (the
      ``timestamp`` of appended events, ``now_rfc3339``); fixture timestamps are all older;
    - a bare date that is a day the case ran and not in any input -> ``<TODAY>`` (the store
      report's ``day``);
    - ``"durationMs": N`` -> ``"durationMs": <MS>`` (wall time);
    - ``"outputSha256": "..."`` -> ``<SHA256>`` (the hash of an output holding ``<NOW>``);
    - the case folder -> ``<TMP>``, the shared cache folder -> ``<CACHE>`` (``inspect
      --store`` prints the store's path).
    """
    data = DURATION_MS.sub(rb"\g<1><MS>", data)
    data = OUTPUT_SHA.sub(rb"\g<1><SHA256>", data)
    for path, token in ((ctx.tmp, b"<TMP>"), (ctx.cache, b"<CACHE>")):
        data = data.replace(str(path).encode(), token)
    text = _text(data)
    if not isinstance(text, str):
        return text

    def stamp(m: re.Match[str]) -> str:
        if m.group(1) in ctx.dates and m.group(0).encode() not in ctx.input_bytes:
            return "<NOW>"
        return m.group(0)

    def day(m: re.Match[str]) -> str:
        if m.group(1) in ctx.dates and m.group(0).encode() not in ctx.input_bytes:
            return "<TODAY>"
        return m.group(0)

    return DATE.sub(day, TIMESTAMP.sub(stamp, text))


# --- case files -----------------------------------------------------------------------------


def record(case: Case, result: Mapping[str, Any]) -> dict[str, Any]:
    """The content of a case file: how the case runs, and ``result`` (from :func:`run_case`)."""
    several = len(case.steps) > 1
    inputs: Any = None
    if len(case.inputs) == 1 and case.inputs[0][0] == Path(case.inputs[0][1]).name:
        inputs = f"fixtures/{case.inputs[0][1]}"
    elif case.inputs:
        inputs = {dest: f"fixtures/{rel}" for dest, rel in case.inputs}
    args = [list(s.args) for s in case.steps]
    stdin = [s.stdin for s in case.steps]
    return {
        "args": args if several else args[0],
        "input": inputs,
        "files": {name: gen.description for name, gen in case.files},
        "stdin": stdin if several else stdin[0],
        "env": dict(case.env),
        **{k: result[k] for k in ("exit", "stdout", "stderr", "appended", "outputs")},
    }


def dumps(doc: Mapping[str, Any]) -> str:
    """A case file's text (JSON, indent 1, sorted keys, UTF-8 kept readable)."""
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def case_path(name: str) -> Path:
    """The case file of case ``name``."""
    return CASES_DIR / f"{name}.json"


def load(name: str) -> dict[str, Any]:
    """The recorded case file of case ``name``."""
    doc: dict[str, Any] = json.loads(case_path(name).read_text(encoding="utf-8"))
    return doc


STEP_KEYS = ("args", "stdin", "exit", "stdout", "stderr", "appended", "outputs")
"""The keys of a case file that hold one entry per step when the case has several."""


def diff(expected: Mapping[str, Any], actual: Mapping[str, Any], name: str) -> str:
    """A unified diff of two case files, multi-line texts shown line by line."""
    return "\n".join(
        difflib.unified_diff(
            _lines(expected), _lines(actual), f"expected/{name}", f"actual/{name}", lineterm=""
        )
    )


def _lines(doc: Mapping[str, Any]) -> list[str]:
    """A case file as labelled lines: ``stdout[1]: |`` then the text, indented."""
    several = isinstance(doc.get("exit"), list)
    out: list[str] = []
    for key in sorted(doc):
        if several and key in STEP_KEYS:
            for i, value in enumerate(doc[key]):
                out.extend(_show(f"{key}[{i}]", value))
        else:
            out.extend(_show(key, doc[key]))
    return out


def _show(label: str, value: Any) -> list[str]:
    if isinstance(value, str) and "\n" in value:
        return [f"{label}: |", *("  " + line for line in value.split("\n"))]
    if isinstance(value, dict) and value and set(value) != {"base64"}:
        return [line for k in sorted(value) for line in _show(f"{label}[{k!r}]", value[k])]
    return [f"{label}: {json.dumps(value, sort_keys=True, ensure_ascii=False)}"]


def non_utf8(doc: Any, where: str = "") -> list[str]:
    """The places in a case file's content stored as base64 (not valid UTF-8)."""
    if isinstance(doc, dict):
        if set(doc) == {"base64"}:
            return [where]
        return [p for k, v in doc.items() for p in non_utf8(v, f"{where}.{k}")]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in non_utf8(v, f"{where}[{i}]")]
    return []


def broken(doc: Mapping[str, Any]) -> list[str]:
    """The places in a case file where a file changed other than by an append."""

    def walk(value: Any, where: str) -> list[str]:
        if isinstance(value, str):
            return [where] if value.startswith(BROKEN) else []
        if isinstance(value, dict):
            return [p for k, v in value.items() for p in walk(v, f"{where}.{k}")]
        if isinstance(value, list):
            return [p for i, v in enumerate(value) for p in walk(v, f"{where}[{i}]")]
        return []

    return walk(doc["appended"], "appended") + walk(doc["outputs"], "outputs")


def which_source(python: str, source_root: Path | None) -> str:
    """Where ``python`` imports compactctl from under the case environment."""
    with tempfile.TemporaryDirectory() as name:
        env = base_env(Path(name), Path(name), source_root)
        proc = subprocess.run(
            [python, "-c", "import compactctl; print(compactctl.__file__)"],
            capture_output=True,
            text=True,
            env=env,
            cwd=name,
            check=False,
        )
    return proc.stdout.strip() or proc.stderr.strip()


# --- command line ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``--write`` records every case, ``--check`` compares; exit 1 when a case differs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="record cases/<name>.json")
    mode.add_argument("--check", action="store_true", help="compare with cases/<name>.json")
    mode.add_argument(
        "--raw", type=Path, metavar="DIR", help="write unnormalised results to DIR (to diff runs)"
    )
    parser.add_argument("--source", type=Path, help="code to run (first on PYTHONPATH)")
    parser.add_argument("--python", default=sys.executable, help="interpreter (default: this)")
    parser.add_argument("--only", help="run the cases whose name matches this regex")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="cases at once")
    args = parser.parse_args(argv)

    cases = [c for c in CASES if not args.only or re.search(args.only, c.name)]
    names = [c.name for c in CASES]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        print(f"duplicate case names: {sorted(dupes)}", file=sys.stderr)
        return 2
    print(f"compactctl from {which_source(args.python, args.source)}", file=sys.stderr)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="compactctl-golden-cache-") as cache:

        def run(c: Case) -> tuple[Case, dict[str, Any]]:
            result = run_case(
                c, args.python, args.source, cache_dir=Path(cache), normalise_text=not args.raw
            )
            return c, record(c, result)

        with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
            done = list(pool.map(run, cases))
    elapsed = time.monotonic() - started

    failed = 0
    for c, doc in done:
        if args.raw:
            args.raw.mkdir(parents=True, exist_ok=True)
            (args.raw / f"{c.name}.json").write_text(dumps(doc), encoding="utf-8")
            continue
        for where in non_utf8(doc):
            print(f"{c.name}: {where} is not valid UTF-8 (stored as base64)", file=sys.stderr)
        for where in broken(doc):
            print(f"{c.name}: {where}: changed other than by an append", file=sys.stderr)
        if args.write:
            CASES_DIR.mkdir(parents=True, exist_ok=True)
            case_path(c.name).write_text(dumps(doc), encoding="utf-8")
        elif not case_path(c.name).exists():
            print(f"{c.name}: no case file", file=sys.stderr)
            failed += 1
        else:
            expected = load(c.name)
            if expected != doc:
                failed += 1
                print(diff(expected, doc, c.name))
    if args.write and not args.only:
        for stale in sorted(set(CASES_DIR.glob("*.json")) - {case_path(n) for n in names}):
            stale.unlink()
            print(f"removed stale {stale.name}", file=sys.stderr)
    verb = "checked" if args.check else "wrote"
    summary = f"{verb} {len(done)} cases in {elapsed:.1f} s"
    print(summary + (f"; {failed} differ" if failed else "; all equal"), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
