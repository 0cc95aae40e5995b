"""Per-file entry points of the commands: what ``cli.py`` calls for each path.

Each function takes a path (``-`` for stdin) and plain options, does the whole job for that
file through the library, and returns a JSON-ready result dict (or raises a
:class:`~compactctl.errors.CompactError`). They are top-level functions so that ``--jobs``
can run them in a process pool.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, BinaryIO, TypeVar

import orjson

from compactctl.app.inspect_fast import inspect_lines
from compactctl.app.inspector import inspect_events
from compactctl.app.report import Report
from compactctl.errors import InputError, UsageError
from compactctl.io.files import STDIN, append_events, open_input, write_output
from compactctl.io.jsonl import (
    BLOCK,
    BOM,
    HARMLESS_PROBLEMS,
    assign_turns,
    dump_events,
    read_blocks,
    read_bytes,
)
from compactctl.model import BadLine, Event, Message, dumps, event_from_dict
from compactctl.replay import replay
from compactctl.tokens import TokenCounter

__all__ = [
    "InspectOptions",
    "convert_path",
    "effective_lines",
    "inspect_path",
    "InspectTotals",
    "load",
]


def load(path: str, fmt: str | None = None) -> tuple[str, list[Event]]:
    """Read a whole session into memory as canonical events: ``(format name, events)``.

    The format is detected from the first records (``fmt`` overrides): canonical JSONL is
    read as is (raw bytes kept); a foreign line format (Claude Code, Codex, OpenAI chat, ...)
    or whole JSON document (OpenHands, SWE-agent ``.traj``) goes through its importer in
    :mod:`compactctl.formats`. Lines that are not JSON objects are kept as ``BadLine``
    events (for a foreign file, after the imported events).

    Memory: the session's events, one session at a time (DESIGN.md section 7). JSON lines
    are read in blocks of :data:`~compactctl.io.jsonl.BLOCK` bytes, so the file is never held
    as one buffer beside its events; a whole-document format is read whole.

    Raises:
        InputError: the file cannot be read, or its format is unknown (the message lists the
            known formats and says to pass ``--format``).
        UsageError: ``fmt`` is not a known format.
    """
    _check_format(fmt)
    with open_input(path) as stream:
        try:
            doc, events = _read_input(stream, fmt, lambda blocks: list(read_blocks(blocks)))
        except (OSError, EOFError) as exc:
            raise InputError(f"cannot read: {exc}", path=path) from None
    return _to_canonical(path, fmt, doc, events)


_T = TypeVar("_T")


def _check_format(fmt: str | None) -> None:
    """Raises: UsageError: ``fmt`` is not ``None`` nor a known format."""
    from compactctl.formats import FORMATS, known_formats

    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown --format {fmt!r}; known: {', '.join(known_formats())}")


def _read_input(
    stream: BinaryIO, fmt: str | None, read_lines: Callable[[Iterator[bytes]], _T]
) -> tuple[Any, _T | list[Event] | None]:
    """The content of a transcript stream: ``(document, None)`` for a whole JSON document,
    ``(None, events)`` for one that looks like a document but does not parse, else
    ``(None, read_lines(blocks))`` over the stream's blocks (JSON lines, streamed).

    Raises:
        OSError, EOFError: from the stream.
    """
    read = getattr(stream, "read1", None) or stream.read
    first = _first_line_block(read)
    if _may_be_document(first, fmt):  # a whole JSON document: read it all
        data = first + stream.read()
        del first
        try:
            return orjson.loads(data[3:] if data.startswith(BOM) else data), None
        except orjson.JSONDecodeError:
            return None, read_bytes(data)
    rest = iter(lambda: read(BLOCK), b"")
    return None, read_lines(itertools.chain([first], rest))  # the file is never one buffer


def _to_canonical(
    path: str, fmt: str | None, doc: Any, events: list[Event] | None
) -> tuple[str, list[Event]]:
    """:func:`load` after reading: ``(format name, canonical events)`` of a JSON document
    (``doc``) or of the events read from JSON lines (imported when the format is foreign).

    Raises:
        InputError: the format is unknown. UsageError: ``fmt`` is a whole-document format
            given for JSON lines.
    """
    from compactctl.formats import FORMATS, detect, detect_document, known_formats

    if events is None:
        name = fmt or detect_document(doc)
        importer = FORMATS[name].document_to_canonical if name else None
        if name and importer is None and isinstance(doc, list):
            line_importer = FORMATS[name].to_canonical
            if line_importer is not None:
                pairs = [(i, r) for i, r in enumerate(doc, 1) if isinstance(r, dict)]
                return name, _imported(line_importer(pairs), [])
        if name is None or importer is None:
            raise InputError(_unknown_format_message(known_formats()), path=path)
        return name, _imported(importer(doc), [])
    if fmt == "canonical":
        return fmt, events
    head50 = [e.data for e in itertools.islice(_records(events), 50)]
    if not head50 and fmt is None:
        _refuse_if_not_json_lines(path, events)
    name = fmt or (detect(head50) if head50 else "canonical")
    if name is None and len(head50) == 1:
        name = detect_document(head50[0])
        if name is not None and FORMATS[name].document_to_canonical is not None:
            importer = FORMATS[name].document_to_canonical
            assert importer is not None
            return name, _imported(importer(head50[0]), [])
    if name is None:
        raise InputError(_unknown_format_message(known_formats()), path=path)
    if name == "canonical":
        return name, events
    line_importer = FORMATS[name].to_canonical
    if line_importer is None:
        raise UsageError(f"--format {name} is a whole-document format, not JSON lines")
    bad = [e for e in events if isinstance(e, BadLine)]
    return name, _imported(line_importer((e.line or 0, e.data) for e in _records(events)), bad)


def _refuse_if_not_json_lines(path: str, events: list[Event]) -> None:
    """Refuse a file none of whose lines is a JSON object, unless its only bad lines are
    blank or a torn last one (a transcript whose first event is still being written).

    Raises:
        InputError: a complete line is malformed, not UTF-8 or not an object (a binary
            file, text that is not JSON lines); names the first such line.
    """
    bad = next(
        (e for e in events if isinstance(e, BadLine) and e.problem not in HARMLESS_PROBLEMS),
        None,
    )
    if bad is not None:
        raise InputError(
            f"not a JSON lines transcript: no line is a JSON object (line {bad.line}: "
            f"{bad.problem}); compactctl reads canonical JSONL and the formats listed by "
            "`compactctl convert --help`",
            path=path,
        )


def _records(events: list[Event]) -> Iterator[Event]:
    """The events that are JSON objects (not bad lines), lazily."""
    return (e for e in events if not isinstance(e, BadLine))


_NON_SPACE = re.compile(rb"[^ \t\n\r\x0b\x0c]")
"""The first byte that ``bytes.lstrip()`` would keep."""


def _first_line_block(read: Callable[[int], bytes]) -> bytes:
    """The first bytes of a stream, through the end of its first non-blank line (or EOF).

    A UTF-8 BOM at the start is skipped when looking for that line. Reads whole blocks, so
    the result usually holds more lines; ``bytearray`` appends keep a long first line
    linear.
    """
    buf = bytearray()
    start = -1  # where the first non-blank line starts, once known
    scanned = 0  # bytes already searched (for that start, then for its newline)
    while block := read(BLOCK):
        buf += block
        if start < 0:
            if len(buf) < 3 and BOM.startswith(buf):
                continue  # a BOM may still be arriving
            found = _NON_SPACE.search(buf, max(scanned, 3 if buf.startswith(BOM) else 0))
            scanned = len(buf)
            if found is None:
                continue
            start = scanned = found.start()
        if buf.find(b"\n", scanned) >= 0:
            break
        scanned = len(buf)
    return bytes(buf)


def _may_be_document(first: bytes, fmt: str | None) -> bool:
    """Whether a file opening with ``first`` (see :func:`_first_line_block`) may be one JSON
    document (OpenHands, SWE-agent ``.traj``) rather than JSON lines: it opens with ``[``,
    or with ``{`` on a first line that does not parse alone (pretty-printed JSON)."""
    if fmt not in (None, "openhands", "swe-agent"):
        return False
    body = first[3:] if first.startswith(BOM) else first
    found = _NON_SPACE.search(body)
    if found is None:
        return False
    start = found.start()
    head = body[start : start + 1]
    if head != b"{":
        return head == b"["
    end = body.find(b"\n", start)
    return not _parses(body[start : end if end >= 0 else len(body)])


def _parses(line: bytes) -> bool:
    try:
        orjson.loads(line)
        return True
    except orjson.JSONDecodeError:
        return False


def _imported(dicts: Iterable[dict[str, Any]], bad: list[BadLine]) -> list[Event]:
    events: list[Event] = [
        event_from_dict(
            d, None, d.get("sourceLine") if isinstance(d.get("sourceLine"), int) else None
        )
        for d in dicts
    ]
    return list(assign_turns(events)) + list(bad)


def _unknown_format_message(known: list[str]) -> str:
    return (
        "unknown transcript format (not canonical compactctl JSONL nor one the importers "
        f"know); known formats: {', '.join(known)}. Pass --format NAME if detection failed"
    )


@dataclass(frozen=True)
class InspectOptions:
    """Options of ``inspect``.

    Attributes:
        encoding: tiktoken encoding name, ``"estimate"``, or ``None`` (by the session model).
        context_window: context window override, in tokens.
        top: number of largest tool outputs listed.
        fmt: source format, or ``None`` to detect.
        tier: summary tier for the effective context (``None``: the selected one).
    """

    encoding: str | None = None
    context_window: int | None = None
    top: int = 10
    fmt: str | None = None
    tier: str | None = None


def inspect_path(path: str, options: InspectOptions) -> dict[str, Any]:
    """Inspect one transcript; the per-file object of ``inspect --json``.

    Canonical JSON lines are counted as they are read, with no Event per line
    (:func:`compactctl.app.inspect_fast.inspect_lines`; replay runs only when the log has
    compact or summary events); other formats go through :func:`load` and
    :func:`~compactctl.app.inspector.inspect_events`. Both give the same result (tested).

    Raises:
        InputError: the file cannot be read, or its format is unknown.
        UsageError: ``options.fmt`` is not a known format.
        ValueError: the tiktoken encoding is not available offline.
    """
    counter = TokenCounter(options.encoding) if options.encoding else None
    fmt = options.fmt
    _check_format(fmt)
    if fmt not in (None, "canonical"):
        fmt, events = load(path, fmt)
    else:  # JSON lines counted as they are read (inspect_fast)
        count = functools.partial(
            inspect_lines,
            path=path,
            counter=counter,
            context_window=options.context_window,
            top=options.top,
            tier=options.tier,
            detect=fmt is None,
        )
        with open_input(path) as stream:
            try:
                doc, got = _read_input(stream, fmt, count)
            except (OSError, EOFError) as exc:
                raise InputError(f"cannot read: {exc}", path=path) from None
        if isinstance(got, dict):
            return got
        fmt, events = _to_canonical(path, fmt, doc, got)
    return inspect_events(
        events,
        path=path,
        fmt=fmt,
        counter=counter,
        context_window=options.context_window,
        top=options.top,
        tier=options.tier,
    )


def effective_lines(
    path: str, *, tier: str | None = None, fmt: str | None = None
) -> Iterator[bytes]:
    """The effective context of a transcript as canonical JSONL lines (messages only)."""
    _, events = load(path, fmt)
    return dump_events(replay(events, tier=tier))


class InspectTotals:
    """``totals`` of ``inspect --json``, summed as each file's result arrives (no result is
    kept, so a run over any number of files holds one at a time)."""

    def __init__(self) -> None:
        self.files = 0
        self.sums = dict.fromkeys(("events", "messages", "tokens", "effectiveTokens"), 0)
        self.findings = 0

    def add(self, result: dict[str, Any]) -> None:
        """Count one :func:`inspect_path` result."""
        self.files += 1
        self.sums["events"] += sum(result["events"].values())
        for key in ("messages", "tokens", "effectiveTokens"):
            self.sums[key] += result[key]
        self.findings += len(result["findings"])

    def as_dict(self, report: Report) -> dict[str, Any]:
        """``{"files", "failed", "events", "messages", "tokens", "effectiveTokens",
        "findings", "errors"}``; failures come from ``report``."""
        return {
            "files": self.files,
            "failed": len(report.failures),
            **self.sums,
            "findings": self.findings,
            "errors": [{"path": p, "message": e.message} for p, e in report.failures],
        }


@dataclass(frozen=True)
class OutputOptions:
    """Where a command that changes a transcript writes (DESIGN.md section 4, output modes).

    Attributes:
        output: ``-o`` target (a path or ``-``); ``None``: append in place (a file) or
            stream to stdout (stdin input).
        output_dir: ``-o DIR/``: each input is written to ``DIR/`` + :func:`output_name`.
        materialize: write the effective context instead of the log.
        as_format: ``canonical`` or ``openai`` (Chat Completions messages), materialize only.
        dry_run: report only.
        check: report only; the CLI exits 1 if anything would change.
        lock_timeout: seconds to wait for the transcript's lock (and a mid-line writer).
        torn_wait: seconds a last line without ``\\n`` must stay unchanged to be torn.
        tier: summary tier used by ``--materialize``.
        fmt: the source format (``None``: detect).
        db: the store path (``None``: ``COMPACTCTL_DB`` or the XDG state folder); ``""``
            disables the store.
    """

    output: str | None = None
    output_dir: str | None = None
    materialize: bool = False
    as_format: str = "canonical"
    dry_run: bool = False
    check: bool = False
    lock_timeout: float = 10.0
    torn_wait: float = 2.0
    tier: str | None = None
    fmt: str | None = None
    db: str | None = None


Planner = Callable[[list[Event], str], tuple[list[Event], dict[str, Any]]]
"""``(events, path) -> (new events to append, report dict)``."""


def convert_path(path: str, out: OutputOptions) -> dict[str, Any]:
    """``convert`` on one transcript: its canonical JSONL, written where ``out`` says.

    The target is ``out.output`` (a file, or ``-``/``None`` for stdout) or, with ``-o DIR/``,
    ``DIR/`` + :func:`output_name`. The source is never changed. With ``out.dry_run`` or
    ``out.check`` nothing is written.

    Returns:
        ``{"path", "format", "events", "output", "changed"}``: the detected (or given)
        format, the number of canonical events, the target (``-`` for stdout), and whether
        the canonical form differs from the source (``False`` for a canonical source, whose
        lines are written back unchanged).

    Raises:
        InputError: unreadable file or unknown format. WriteError: the target cannot be
        written.
    """
    name, events = load(path, out.fmt)
    target = out.output or STDIN
    if out.output_dir is not None:
        target = os.path.join(out.output_dir, output_name(path))
    if not (out.dry_run or out.check):
        write_output(target, dump_events(events))
    return {
        "path": path,
        "format": name,
        "events": len(events),
        "output": target,
        "changed": name != "canonical",
    }


def transform_path(path: str, planner: Planner, out: OutputOptions) -> dict[str, Any]:
    """Run one transcript through a planner and write the result as ``out`` says.

    - a file, no ``-o``: the new events are appended in place (``files.append_events``);
    - ``-`` (stdin), no ``-o``: the input events (raw bytes) then the new ones, to stdout;
    - ``-o TARGET``: the same stream written to TARGET (atomically; ``-`` is stdout);
    - ``--materialize``: the effective context (canonical, or ``--as openai``) instead;
    - ``--dry-run`` / ``--check``: nothing is written.

    A foreign-format or gzip transcript is never appended to: it needs ``-o`` (refused
    before any planning, with ``--dry-run``/``--check`` too).

    Returns:
        The planner's report plus ``format``, ``changed``, ``appended``, ``skipped``,
        ``written`` (where the output went) and ``tornLine``.

    Raises:
        InputError: a foreign or gzip file to be changed in place (exit 3: the other files
            of a run are still processed), or a read failure.
        UsageError: ``-o`` naming the input itself.
        WriteError, LockTimeout: from writing.
    """
    # appends to the file itself (--materialize without -o prints to stdout instead)
    in_place = (
        out.output is None and out.output_dir is None and path != STDIN and not out.materialize
    )
    if in_place and not (out.dry_run or out.check) and _is_gzip(path):
        raise InputError(
            "is gzip-compressed; compactctl does not append to a compressed transcript "
            "(nothing was written). Pass -o FILE (or -o DIR/ for many files) to write the "
            "result",
            path=path,
        )
    fmt, events = load(path, out.fmt)
    if in_place and fmt != "canonical":
        raise InputError(
            f"is {'an' if fmt[0] in 'aeio' else 'a'} {fmt} transcript; compactctl never "
            "appends to another agent's file (nothing was written). Pass -o FILE, -o DIR/ "
            "(many files) or -o - to write canonical JSONL with the result",
            path=path,
        )
    new, report = planner(events, path)
    if out.output_dir is not None:
        out = replace(out, output=os.path.join(out.output_dir, output_name(path)))
    result: dict[str, Any] = {
        **report,
        "path": path,
        "format": fmt,
        "changed": bool(new),
        "appended": 0,
        "skipped": 0,
        "written": None,
        "tornLine": False,
    }
    if out.dry_run or out.check:
        return result
    target = out.output
    if target is not None and target != STDIN and path != STDIN and _same_file(path, target):
        raise UsageError(
            "-o names the input itself; write to another file (compactctl never rewrites a "
            "transcript), or omit -o to append to a canonical transcript in place",
            path=path,
        )
    if out.materialize:
        view = replay(events + new, tier=out.tier)
        lines = materialized_lines(view, out.as_format)
        result["written"] = target or STDIN
        write_output(target or STDIN, lines)
        return result
    if target is not None or path == STDIN:
        dest = target or STDIN
        write_output(dest, dump_events(events + new))
        result["written"] = dest
        result["appended"] = len(new)
        return result
    if new:
        done = append_events(path, new, lock_timeout=out.lock_timeout, torn_wait=out.torn_wait)
        result.update(
            appended=done.written, skipped=done.skipped, written=path, tornLine=done.torn_line
        )
        result["changed"] = done.written > 0
    return result


def output_name(path: str) -> str:
    """The file name an input gets under ``-o DIR/``: its own name, ``.gz`` dropped, always
    ending in ``.jsonl`` (``-`` is ``stdin.jsonl``).

    >>> output_name("/a/rollout-1.jsonl.gz"), output_name("t.traj"), output_name("-")
    ('rollout-1.jsonl', 't.jsonl', 'stdin.jsonl')
    """
    if path == STDIN:
        return "stdin.jsonl"
    name = os.path.basename(path)
    if name.endswith(".gz"):
        name = name[:-3]
    if not name.endswith(".jsonl"):
        name = os.path.splitext(name)[0] + ".jsonl"
    return name


def _is_gzip(path: str) -> bool:
    """True when the file starts with the gzip magic bytes (checked before any planning, so
    no model call is spent on a file that cannot be appended to)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(2) == b"\x1f\x8b"
    except OSError:
        return False


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def materialized_lines(view: list[Message], as_format: str) -> Iterator[bytes]:
    """The effective context as JSONL: canonical messages, or OpenAI Chat Completions ones.

    With ``openai``, tool results and tool calls left unpaired by the *input* (replay never
    splits a tool block, but a transcript may already hold an orphan) are left out, since
    the Chat Completions API rejects the whole request for one; ``inspect`` reports them
    as findings.

    Raises:
        UsageError: an unknown ``as_format``.
    """
    if as_format == "canonical":
        return dump_events(view)
    if as_format == "openai":
        return (dumps(msg) + b"\n" for msg in openai_messages(view))
    raise UsageError(f"unknown --as {as_format!r}; use canonical or openai")


def openai_messages(view: list[Message]) -> list[dict[str, Any]]:
    """The effective context as OpenAI Chat Completions messages that the API accepts.

    Each ``tool`` message must answer a ``tool_calls`` id of an earlier assistant message,
    and each such id must be answered, or the API rejects the request (HTTP 400). A tool
    result with no earlier call is left out; a call with no result is taken out of its
    assistant message (the message stays, ``tool_calls`` dropped if none remain).

    >>> view = [Message({"role": "tool", "toolCallId": "x", "content": "orphan"}),
    ...         Message({"role": "assistant", "content": "ok", "toolCalls": [
    ...             {"id": "c1", "name": "a", "arguments": {}},
    ...             {"id": "c2", "name": "b", "arguments": {}}]}),
    ...         Message({"role": "tool", "toolCallId": "c1", "content": "done"})]
    >>> [(m["role"], [c["id"] for c in m.get("tool_calls", [])]) for m in openai_messages(view)]
    [('assistant', ['c1']), ('tool', [])]
    """
    called: set[str] = set()
    answered: set[str] = set()
    for m in view:
        if m.role == "assistant":
            called.update(c["id"] for c in m.tool_calls if isinstance(c.get("id"), str))
        elif m.role == "tool":
            cid = m.tool_call_id
            if cid is not None and cid in called:
                answered.add(cid)
    out: list[dict[str, Any]] = []
    for m in view:
        if m.role == "tool" and m.tool_call_id not in answered:
            continue
        msg = to_openai(m.data)
        calls = msg.get("tool_calls")
        if calls is not None:
            kept = [c for c in calls if c.get("id") in answered]
            if kept:
                msg["tool_calls"] = kept
            else:
                del msg["tool_calls"]
                if msg.get("content") is None:
                    msg["content"] = ""
        out.append(msg)
    return out


def to_openai(data: Mapping[str, Any]) -> dict[str, Any]:
    """A canonical message as an OpenAI Chat Completions message.

    >>> to_openai({"role": "assistant", "content": "", "toolCalls": [
    ...     {"id": "c1", "name": "bash", "arguments": {"command": "ls"}}]})["tool_calls"][0]
    {'id': 'c1', 'type': 'function', 'function': {'name': 'bash', 'arguments': '{"command":"ls"}'}}
    """
    role = data.get("role")
    content = data.get("content")
    if isinstance(content, list):
        parts = []
        for p in content:
            if not isinstance(p, dict):
                continue
            if p.get("type") == "text":
                parts.append({"type": "text", "text": p.get("text", "")})
            elif p.get("type") == "image" and isinstance(p.get("data"), str):
                url = f"data:{p.get('mediaType', 'image/png')};base64,{p['data']}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
        content = parts
    msg: dict[str, Any] = {"role": role, "content": content}
    calls = data.get("toolCalls")
    if role == "assistant" and isinstance(calls, list) and calls:
        msg["tool_calls"] = [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {
                    "name": c.get("name"),
                    "arguments": c["arguments"]
                    if isinstance(c.get("arguments"), str)
                    else orjson.dumps(c.get("arguments", {})).decode(),
                },
            }
            for c in calls
            if isinstance(c, dict)
        ]
        if not content:
            msg["content"] = None
    if role == "tool":
        msg["tool_call_id"] = data.get("toolCallId")
        if data.get("toolName"):
            msg["name"] = data["toolName"]
    return msg


def _open_store(db: str | None) -> Any:
    """The SQLite store, or ``None`` when disabled (``db == ""``)."""
    if db == "":
        return None
    from compactctl.app.store import Store, resolve_db_path

    return Store.open(resolve_db_path(db))


def record_run(
    store: Any, result: Mapping[str, Any], command: str, *, rules: list[str] | None = None
) -> None:
    """Write the history row of a run that changed a transcript (issue 6: every command that
    changes a transcript writes one)."""
    if store is None or not result.get("changed"):
        return
    import time as _time

    from compactctl.app.store import HistoryRow

    summary = result.get("summary")
    store.add_history(
        HistoryRow(
            session_key=str(result.get("sessionKey") or result["path"]),
            path=str(result["path"]),
            command=command,
            messages_removed=int(summary.get("replaces", 0)) if isinstance(summary, dict) else 0,
            dedup_groups=int(result.get("groups", 0) or 0),
            rules_applied=list(rules or []),
            tokens_before=int(result.get("tokensBefore", 0) or 0),
            tokens_after=int(result.get("promptEstimate", result.get("tokensAfter", 0)) or 0),
            duration_ms=int(result.get("durationMs", 0) or 0),
            outcome="applied",
            error=None,
            created_at=_time.time(),
        )
    )


def compact_path(path: str, options: Any, out: OutputOptions) -> dict[str, Any]:
    """``compact`` on one transcript: plan (micro, summary), write, record in the store.

    Args:
        path: a transcript or ``-``.
        options: :class:`compactctl.layers.summary.CompactOptions`.
        out: where to write.

    Raises:
        SummarizerError: summarization failed (counted toward the 24-hour breaker); nothing
            was written.
        UsageError, InputError, WriteError, LockTimeout: as :func:`transform_path`.
    """
    import time as _time

    from compactctl.layers.summary import plan_compact

    store = None if (out.dry_run or out.check) else _open_store(out.db)
    try:

        def breaker(key: str) -> bool:
            return bool(store is not None and store.breaker_open(key, _time.time()))

        def planner(events: list[Event], p: str) -> tuple[list[Event], dict[str, Any]]:
            offline = None
            if (out.dry_run or out.check) and options.model not in (None, "extractive"):
                # a dry run never calls (nor pays) a model: the built-in summarizer stands
                # in, so the report shows what would be replaced and about what it saves
                from compactctl.summarize.extractive import ExtractiveSummarizer

                offline = ExtractiveSummarizer()
            plan = plan_compact(events, options, path=p, breaker_open=breaker, summarizer=offline)
            if offline is not None:
                plan.report["modelNotCalled"] = options.model
            if plan.summary_failed is not None:
                if store is not None:
                    count = store.record_failure(plan.report["sessionKey"], p, _time.time())
                    plan.summary_failed.message += f" (consecutive failures: {count})"
                raise plan.summary_failed
            return plan.events, plan.report

        preload_encoding(path, options.encoding)
        result = transform_path(path, planner, out)
        if store is not None and result["changed"] and result.get("summary"):
            store.record_success(result["sessionKey"], path, result["messages"], _time.time())
        record_run(store, result, "compact")
        return result
    finally:
        if store is not None:
            store.close()


PRELOAD_MIN_BYTES = 2**20
"""Files of at least this many bytes (1 MiB) load their tiktoken encoding before they are
read (:func:`preload_encoding`)."""


def preload_encoding(path: str, encoding: str | None, min_bytes: int = PRELOAD_MIN_BYTES) -> bool:
    """Load the encoding a large transcript will be counted with before it is read.

    Building an encoding briefly holds a Python copy of its ranks (about 13 MB for
    cl100k_base, 26 MB for o200k_base) next to tiktoken's own tables; loaded before the
    session's events exist, that transient no longer adds to the session's peak RSS
    (measured on the 11 MB bench session, o200k_base: ``rules`` 130 -> 101 MB). Smaller
    files skip it, so a session that turns out to need no count never pays the load
    (0.1-0.2 s). ``encoding`` is the command's ``--encoding`` (``"estimate"`` for
    ``--estimate``) or ``None`` for the session's model, read from a ``session`` event on
    the first line; stdin, gzip, foreign formats and a first line that is no session event
    load nothing here (the encoding then loads on the first count, as before).

    Returns:
        whether an encoding was loaded. Never raises: an unavailable encoding is reported by
        the first count, with the command's usual message.
    """
    if encoding == "estimate" or path == STDIN:
        return False
    try:
        if os.path.getsize(path) < min_bytes:
            return False
        if encoding is None:
            with open(path, "rb") as fh:
                first = _first_line_block(fh.read).removeprefix(BOM).lstrip()
            data = orjson.loads(first.split(b"\n", 1)[0])
            if not isinstance(data, dict) or data.get("type") != "session":
                return False
            model = data.get("model")
            from compactctl.tokens import encoding_for_model

            encoding = encoding_for_model(model if isinstance(model, str) else None)
        TokenCounter(encoding).load()
    except (OSError, ValueError):  # orjson.JSONDecodeError is a ValueError
        return False
    return True


def _layer_path(
    path: str,
    out: OutputOptions,
    command: str,
    plan: Callable[[list[Event], TokenCounter], tuple[Event | None, dict[str, Any]]],
    encoding: str | None,
) -> dict[str, Any]:
    import time as _time

    from compactctl.model import SessionEvent
    from compactctl.tokens import encoding_for_model

    store = None if (out.dry_run or out.check) else _open_store(out.db)
    try:

        def planner(events: list[Event], p: str) -> tuple[list[Event], dict[str, Any]]:
            started = _time.monotonic()
            session = next((e for e in events if isinstance(e, SessionEvent)), None)
            model = session.model if session else None
            counter = TokenCounter(encoding or encoding_for_model(model))
            event, report = plan(events, counter)
            report["sessionKey"] = str(session.data.get("sessionId") or p) if session else p
            report["tokenizer"] = counter.encoding_name
            report["durationMs"] = int((_time.monotonic() - started) * 1000)
            return ([event] if event is not None else []), report

        preload_encoding(path, encoding)
        result = transform_path(path, planner, out)
        record_run(
            store,
            result,
            command,
            rules=sorted(result.get("rules", {})) if command == "rules" else None,
        )
        return result
    finally:
        if store is not None:
            store.close()


def rules_path(
    path: str, options: Any, out: OutputOptions, encoding: str | None = None
) -> dict[str, Any]:
    """``rules`` on one transcript (:class:`compactctl.layers.rules.RulesOptions`)."""
    from compactctl.layers.rules import plan_rules
    from compactctl.timeutil import now_rfc3339

    def plan(events: list[Event], counter: TokenCounter) -> tuple[Event | None, dict[str, Any]]:
        event, report = plan_rules(events, options, timestamp=now_rfc3339(), counter=counter)
        return event, report

    return _layer_path(path, out, "rules", plan, encoding)


def dedup_path(
    path: str, options: Any, out: OutputOptions, encoding: str | None = None
) -> dict[str, Any]:
    """``dedup`` on one transcript (:class:`compactctl.layers.dedup.DedupOptions`)."""
    from compactctl.layers.dedup import plan_dedup
    from compactctl.timeutil import now_rfc3339

    def plan(events: list[Event], counter: TokenCounter) -> tuple[Event | None, dict[str, Any]]:
        return plan_dedup(events, options, timestamp=now_rfc3339(), counter=counter)

    return _layer_path(path, out, "dedup", plan, encoding)


def tiers_path(
    path: str,
    out: OutputOptions,
    *,
    tier: str = "auto",
    encoding: str | None = None,
    context_window: int | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """``tiers`` on one transcript: a superseding SummaryEvent with L0/L1/L2, stored in SQLite.

    Raises:
        SummaryFormatError: a model rewrite was invalid (nothing appended).
        UsageError, InputError, WriteError, LockTimeout: as :func:`transform_path`.
    """
    import time as _time

    from compactctl.layers.tiers import plan_tiers
    from compactctl.model import SessionEvent
    from compactctl.timeutil import now_rfc3339
    from compactctl.tokens import context_window_for, encoding_for_model

    store = None if (out.dry_run or out.check) else _open_store(out.db)
    try:

        def planner(events: list[Event], p: str) -> tuple[list[Event], dict[str, Any]]:
            started = _time.monotonic()
            session = next((e for e in events if isinstance(e, SessionEvent)), None)
            smodel = session.model if session else None
            counter = TokenCounter(encoding or encoding_for_model(smodel))
            window = (
                context_window
                or (session.context_window if session else None)
                or context_window_for(smodel)
            )
            summarizer = None
            if model:
                from compactctl.layers.summary import CompactOptions, make_summarizer

                summarizer = make_summarizer(CompactOptions(model=model), smodel)
            event, report = plan_tiers(
                events,
                counter=counter,
                timestamp=now_rfc3339(),
                tier=tier,
                context_window=window,
                summarizer=summarizer,
            )
            report["sessionKey"] = str(session.data.get("sessionId") or p) if session else p
            report["tokenizer"] = counter.encoding_name
            report["durationMs"] = int((_time.monotonic() - started) * 1000)
            report["messages"] = sum(1 for e in events if isinstance(e, Message))
            if event is not None:
                from compactctl.app.inspector import prompt_tokens

                report["replaces"] = len(event.replaces)
                report["tokensBefore"] = prompt_tokens(replay(events), counter)
                report["promptEstimate"] = prompt_tokens(replay([*events, event]), counter)
                report["_tierTexts"] = event.tiers
            return ([event] if event is not None else []), report

        result = transform_path(path, planner, out)
        texts = result.pop("_tierTexts", None)
        if store is not None and result["changed"] and texts:
            store.save_tiers(
                result["sessionKey"],
                path,
                result["summary"],
                texts,
                result["messages"],
                int(result.get("replaces", 0)),
                int(result.get("tokensBefore", 0)),
                int(result.get("promptEstimate", 0)),
                _time.time(),
            )
        record_run(store, result, "tiers")
        return result
    finally:
        if store is not None:
            store.close()
