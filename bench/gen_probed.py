"""Seeded sessions with planted facts: what a summary must keep, known in advance (issue 15).

:func:`probed_session` writes one canonical session (docs/design.md section 3) on the
corpus of :mod:`bench.gen_corpus` (the same project, files, logs and tool rounds as filler)
and plants facts in it, each returned as a probe in the shape of
``fixtures/samples/*.probes.json`` (``{"kind", "text", "turn"}``, the kinds of
:data:`compactctl.evaluate.probes.KINDS`):

- the first request (turn 1) and the latest explicit request (the last user turn);
- standing user constraints ("Do not ...", "Never ...", "Always ...", "Keep ... as it is"),
  next to task sentences that only look like them ("... and make sure ...": not planted);
- decisions the assistant states ("Decision: X instead of Y because Z");
- errors: a type checker's ``file.py:N: error:`` line, a failing test's exception, a
  traceback's last line; each command fails first and passes on a later run;
- identifiers (a ticket id, function and class names), file paths edited or created,
  commands run;
- pending tasks: work the user defers ("Not now, but before the release, ...") and work
  the assistant leaves open ("I still need to ... later");
- noise that must never count as the user speaking: ``<task-notification>`` and
  ``<system-reminder>`` messages with role ``user``.

``one_turn=True`` writes an autonomous run instead (SWE-agent, ``claude -p``): one user
message, then every round in the same turn.

``fmt="claude-code"`` (``--format claude-code``) writes the same session as a Claude Code
file (:func:`claude_code_records`), for tools that read only that format (cozempic, in
:mod:`bench.peers`).

Same arguments, same bytes: everything comes from ``random.Random(seed)``.

    .venv/bin/python -m bench.gen_probed out.jsonl --turns 330 --seed 101
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

import orjson

from bench.gen_corpus import _call_id, _Session

__all__ = ["probed_session", "write_probed"]

_TASKS = (
    "write a migration note for the {ver} release",
    "add a changelog entry for {ticket}",
    "document the {word} option in the README",
    "benchmark {func} on a large {word} file",
    "remove the deprecated {word} flag",
)
_REASONS = (
    "it keeps the {word} format readable",
    "the {word} path is hot",
    "callers already pass a {word}",
    "it avoids a second pass over the {word}",
)


class _Planter(_Session):
    """A :class:`bench.gen_corpus._Session` that also plants facts and records probes."""

    def __init__(self, seed: int, turns: int, one_turn: bool) -> None:
        rng = random.Random(seed)
        super().__init__(rng, cjk=False, target=turns * 6_000)
        self.turns = turns
        self.one_turn = one_turn
        self.probes: list[dict[str, Any]] = []
        w, r = self.w, rng
        self.pkg = w.ident().split("_")[0] + "kit"
        self.ticket = f"{r.choice(('QUI', 'LED', 'WIN', 'PAG'))}-{r.randint(100, 9999)}"
        self.funcs = [
            f"{r.choice(('parse', 'load', 'merge', 'flush'))}_{w.ident()}" for _ in range(4)
        ]
        self.classes = [
            w.camel().capitalize() + r.choice(("Writer", "Index", "Cache")) for _ in range(2)
        ]
        self.paths = [f"src/{self.pkg}/{w.ident()}.py" for _ in range(6)]
        self.version = f"{r.randint(0, 3)}.{r.randint(1, 20)}.0"

    # -- helpers

    def probe(self, kind: str, text: str) -> None:
        self.probes.append({"kind": kind, "text": text, "turn": self.turn})

    def fill(self, word: str) -> str:
        return word.format(
            ver=self.version,
            ticket=self.ticket,
            word=self.rng.choice(("ledger", "window", "cursor", "page", "shard")),
            func=self.rng.choice(self.funcs),
        )

    def call(
        self, name: str, args: dict[str, Any], out: str, *, error: bool = False, lead: str = ""
    ) -> None:
        cid = _call_id(self.rng)
        self.message("assistant", lead, toolCalls=[{"id": cid, "name": name, "arguments": args}])
        extra: dict[str, Any] = {"toolCallId": cid, "toolName": name}
        if error:
            extra["isError"] = True
        self.message("tool", out, **extra)

    def user_says(self, text: str) -> None:
        if not self.one_turn:
            self.turn += 1
        self.message("user", text)

    # -- planted facts

    def first_request(self) -> None:
        self.turn = 1
        first = (
            f"Fix {self.ticket}: {self.funcs[0]} drops the last entry when the cursor is at "
            f"the end of a page"
        )
        self.message(
            "user",
            first + ". The bug shows up in `list --page 2`. Do not add new dependencies.",
        )
        self.probe("first_request", first)
        self.probe("identifier", self.ticket)
        self.probe("identifier", self.funcs[0])
        self.probe("user_constraint", "Do not add new dependencies")

    def constraint(self, index: int) -> None:
        options = [
            f"Never change the signature of {self.funcs[1]}",
            f"Keep {self.paths[5]} as it is",
            f"Always run ruff check src/{self.pkg} before you report back",
            "Do not reformat files you did not change",
            "Never commit generated files under build/",
        ]
        text = options[index % len(options)]
        bait = f"Add a test for {self.fill('{word}')} handling and make sure it fails first."
        self.user_says(f"{bait} {text}. Thanks.")
        self.probe("user_constraint", text)

    def decision(self, index: int) -> None:
        path = self.paths[index % len(self.paths)]
        verb = ("cache", "validate", "split", "compute")[index % 4]
        alt = ("a global dict", "a regex", "a second pass", "a subprocess")[index % 4]
        text = f"{verb} the offsets in {path} instead of using {alt}"
        reason = self.fill(self.rng.choice(_REASONS))
        self.message("assistant", f"Decision: {text}, because {reason}. Moving on.")
        self.probe("decision", text)
        self.probe("file_path", path)

    def type_error(self) -> None:
        path = self.paths[1]
        line = self.rng.randint(10, 400)
        err = (
            f'{path}:{line}: error: Incompatible return value type (got "int", '
            f'expected "str")  [return-value]'
        )
        command = f"mypy src/{self.pkg}"
        self.call(
            "bash",
            {"command": command},
            f"{err}\nFound 1 error in 1 file (checked 14 source files)\nExit code: 1",
            error=True,
            lead="Type-checking the package.",
        )
        self.probe("error", err)
        self.probe("command", command)
        self.call(
            "edit_file",
            {"path": path, "old_string": "return n", "new_string": "return str(n)"},
            f"Edited {path}: replaced 1 occurrence.",
        )
        self.call(
            "bash",
            {"command": command},
            "Success: no issues found in 14 source files\nExit code: 0",
        )

    def test_error(self) -> None:
        test = f"tests/test_{self.pkg}.py"
        key = self.rng.choice(("ledger_offset", "page_size", "cursor_end"))
        err = f"KeyError: '{key}'"
        command = f"python -m pytest {test} -q"
        name = f"test_{self.funcs[2]}_keeps_{key}"
        out = (
            f"F.....\n_____ {name} _____\n    def {name}():\n>       row = {self.funcs[2]}(data)\n"
            f"E       {err}\n\n{test}:{self.rng.randint(5, 90)}: KeyError\n"
            f"FAILED {test}::{name} - {err}\n1 failed, 5 passed in 0.31s"
        )
        self.call("bash", {"command": command}, out, error=True)
        self.probe("error", err)
        self.probe("command", command)
        self.probe("identifier", name)
        self.probe("file_path", test)
        self.call(
            "edit_file",
            {"path": self.paths[2], "old_string": "x", "new_string": "y"},
            f"Edited {self.paths[2]}: replaced 1 occurrence.",
        )
        self.probe("file_path", self.paths[2])
        self.call("bash", {"command": command}, "......\n6 passed in 0.29s")

    def traceback(self) -> None:
        cls = self.classes[0]
        err = f"ValueError: window size must be positive, got -{self.rng.randint(2, 9)}"
        command = f"python scripts/replay_{self.pkg}.py --window -3"
        out = (
            "Traceback (most recent call last):\n"
            f'  File "scripts/replay_{self.pkg}.py", line 12, in <module>\n'
            f"    {cls}(window=-3).run()\n"
            f'  File "{self.paths[3]}", line 88, in __init__\n'
            "    raise ValueError(...)\n"
            f"{err}\nExit code: 1"
        )
        self.call("bash", {"command": command}, out, error=True)
        self.probe("error", err)
        self.probe("command", command)
        self.probe("identifier", cls)

    def created(self) -> None:
        path = f"src/{self.pkg}/{self.classes[1].lower()}.py"
        self.call(
            "write_file",
            {"path": path, "content": f"class {self.classes[1]}:\n    pass\n"},
            f"Created {path} (2 lines).",
            lead=f"Adding {self.classes[1]} in a new module.",
        )
        self.probe("file_path", path)
        self.probe("identifier", self.classes[1])

    def deferred(self, index: int) -> None:
        task = self.fill(_TASKS[index % len(_TASKS)])
        if index % 2 == 0:
            self.user_says(f"Not now, but before the release, {task}.")
        else:
            self.message("assistant", f"I still need to {task} later; it is not started.")
        self.probe("pending_task", task)

    def notification(self) -> None:
        self.message(
            "user",
            f"<task-notification>\n<task-id>{self.rng.getrandbits(32):08x}</task-id>\n"
            '<status>completed</status>\n<summary>Background command "npm run build" '
            "completed (exit code 0)</summary>\n</task-notification>",
        )

    def reminder(self) -> None:
        self.message(
            "user",
            "<system-reminder>The TodoWrite tool hasn't been used recently.</system-reminder>",
            isMeta=True,
        )

    def latest_request(self) -> None:
        text = f"Now make {self.funcs[3]} accept a page size of zero and return an empty page"
        self.user_says(text + ". Report back when the tests pass.")
        self.probe("latest_request", text)
        self.probe("identifier", self.funcs[3])

    # -- the session

    def build(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        self.header()
        self.first_request()
        r = self.rng
        plants: list[Any] = [self.type_error, self.test_error, self.traceback, self.created]
        plants += [lambda i=i: self.constraint(i) for i in range(5)] if not self.one_turn else []
        plants += [lambda i=i: self.decision(i) for i in range(6)]
        plants += [lambda i=i: self.deferred(i) for i in range(4)]
        noise: list[Any] = [self.notification, self.reminder]
        steps = self.turns - 2
        at = sorted(r.sample(range(1, max(steps, len(plants) + 1)), len(plants)))
        schedule = dict(zip(at, r.sample(plants, len(plants)), strict=True))
        for step in range(1, steps + 1):
            if not self.one_turn:
                self.turn += 1
                self.message("user", self.w.prose(r.randint(1, 3)))
            for _ in range(r.choice((1, 2, 2, 3))):
                self.tool_round()
            if step in schedule:
                schedule[step]()
            if r.random() < 0.05:
                r.choice(noise)()
            if not self.one_turn and r.random() < 0.5:
                self.report()
        if not self.one_turn:
            self.latest_request()
            self.tool_round()
            self.report()
            self.notification()  # the last user-role message is not the user speaking
        records = [orjson.loads(line) for line in self.lines]
        return records, self.probes


def probed_session(
    seed: int, turns: int = 80, *, one_turn: bool = False
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One session with planted facts: ``(records, probes)``.

    Args:
        seed: the seed; the same arguments give the same records.
        turns: user turns (``one_turn``: tool-round steps, about 2.7 messages each).
        one_turn: an autonomous run: one user message, every round in turn 1.

    Returns:
        The canonical records (a ``session`` record, then messages) and the planted probes
        (``{"kind", "text", "turn"}``).
    """
    return _Planter(seed, turns, one_turn).build()


_CLAUDE_TOOLS = {
    "bash": ("Bash", {"command": "command"}),
    "read_file": ("Read", {"path": "file_path"}),
    "edit_file": ("Edit", {"path": "file_path", "old_string": "old_string",
                           "new_string": "new_string"}),
    "write_file": ("Write", {"path": "file_path", "content": "content"}),
    "grep": ("Grep", {"pattern": "pattern", "path": "path"}),
}  # fmt: skip
"""Canonical tool name -> Claude Code's tool and its argument names (``update_plan`` becomes
``TodoWrite`` with ``todos``)."""


def _claude_call(call: dict[str, Any]) -> dict[str, Any]:
    name, args = str(call["name"]), dict(call["arguments"])
    if name == "update_plan":
        todos = [{"content": s["step"], "status": s["status"], "activeForm": s["step"]}
                 for s in args["plan"]]  # fmt: skip
        return {"type": "tool_use", "id": call["id"], "name": "TodoWrite",
                "input": {"todos": todos}}  # fmt: skip
    tool, keys = _CLAUDE_TOOLS[name]
    return {"type": "tool_use", "id": call["id"], "name": tool,
            "input": {keys.get(k, k): v for k, v in args.items()}}  # fmt: skip


def claude_code_records(records: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The canonical records of :func:`probed_session` as a Claude Code session file (the
    JSON lines Claude Code writes under ``~/.claude/projects/``; docs/formats.md): one line
    per content block of an assistant message (``text``, ``tool_use``, with the message's
    ``usage``), one user line per tool result (``tool_result`` with ``is_error``), injected
    messages as Claude Code writes them (a system reminder with ``isMeta``, a task
    notification as plain user text), every line chained by ``parentUuid``. The system
    prompt is not in a Claude Code file and is left out. Tool names and argument keys
    become Claude Code's (``Bash``, ``Read`` with ``file_path`` ...): the planted texts are
    unchanged.
    """
    rng = random.Random(seed)
    session_id = str(records[0].get("sessionId") or "00000000-0000-4000-8000-000000000000")
    common = {"isSidechain": False, "userType": "external", "cwd": "/home/dev/work/project",
              "sessionId": session_id, "version": "2.0.55", "gitBranch": "main"}  # fmt: skip
    model = "claude-sonnet-4-5-20250929"
    out: list[dict[str, Any]] = []
    parent: str | None = None

    def line(kind: str, message: dict[str, Any], rec: dict[str, Any], **extra: Any) -> None:
        nonlocal parent
        uid = f"{rng.getrandbits(128):032x}"
        uid = f"{uid[:8]}-{uid[8:12]}-4{uid[13:16]}-8{uid[17:20]}-{uid[20:]}"
        out.append({"parentUuid": parent, **common, "type": kind, "message": message,
                    "uuid": uid, "timestamp": rec.get("timestamp"), **extra})  # fmt: skip
        parent = uid

    for rec in records:
        if rec.get("type") != "message" or rec["role"] == "system":
            continue
        role, content = rec["role"], rec.get("content")
        if role == "user":
            if isinstance(content, list):
                content = [
                    {"type": "image", "source": {"type": "base64", "media_type": p["mediaType"],
                                                 "data": p["data"]}}
                    if p.get("type") == "image" else p
                    for p in content
                ]  # fmt: skip
            extra = {"isMeta": True} if rec.get("isMeta") else {}
            line("user", {"role": "user", "content": content}, rec, **extra)
        elif role == "assistant":
            blocks = [{"type": "text", "text": content}] if content else []
            blocks += [_claude_call(c) for c in rec.get("toolCalls") or []]
            msg_id = f"msg_{rng.getrandbits(96):024x}"
            usage = {"input_tokens": 5, "cache_read_input_tokens": rng.randint(10_000, 150_000),
                     "output_tokens": rng.randint(50, 2_000)}  # fmt: skip
            for block in blocks:
                stop = "tool_use" if rec.get("toolCalls") else "end_turn"
                line("assistant", {"model": model, "id": msg_id, "type": "message",
                                   "role": "assistant", "content": [block], "stop_reason": stop,
                                   "usage": usage}, rec)  # fmt: skip
        elif role == "tool":
            result = {"tool_use_id": rec["toolCallId"], "type": "tool_result",
                      "content": content, "is_error": bool(rec.get("isError"))}  # fmt: skip
            line("user", {"role": "user", "content": [result]}, rec)
    return out


def write_probed(
    path: Path, seed: int, turns: int = 80, *, one_turn: bool = False, fmt: str = "canonical"
) -> Path:
    """Write :func:`probed_session` to ``path`` (``fmt``: ``canonical``, or ``claude-code``
    through :func:`claude_code_records`) and its probes to ``<stem>.probes.json``."""
    records, probes = probed_session(seed, turns, one_turn=one_turn)
    if fmt == "claude-code":
        records = claude_code_records(records, seed)
    elif fmt != "canonical":
        raise ValueError(f"unknown format {fmt!r}: canonical or claude-code")
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    path.with_name(path.name.split(".")[0] + ".probes.json").write_bytes(
        orjson.dumps(probes, option=orjson.OPT_INDENT_2)
    )
    return path


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--turns", type=int, default=80)
    parser.add_argument("--one-turn", action="store_true")
    parser.add_argument("--format", default="canonical", choices=("canonical", "claude-code"))
    args = parser.parse_args(argv)
    write_probed(args.out, args.seed, args.turns, one_turn=args.one_turn, fmt=args.format)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
