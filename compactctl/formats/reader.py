"""Read any supported transcript as canonical events: sniff JSON lines vs one JSON document,
detect the format from the first records, and run the importer of :mod:`compactctl.formats`.

The one place a file's format is decided. :class:`compactctl.session.Session` calls
:func:`read_transcript` on a stream it opened; :func:`load` opens a path itself.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO, TypeVar

import orjson

from compactctl.errors import InputError, NotATranscript, UsageError
from compactctl.io.files import READ_ERRORS, open_input, read_error
from compactctl.io.jsonl import (
    BLOCK,
    BOM,
    HARMLESS_PROBLEMS,
    assign_turns,
    read_blocks,
    read_bytes,
)
from compactctl.model import (
    BadLine,
    CompactEvent,
    Event,
    Message,
    SummaryEvent,
    acyclic,
    event_from_dict,
)

__all__ = [
    "check_format",
    "first_line_block",
    "load",
    "read_input",
    "read_transcript",
    "to_canonical_events",
    "warn_skipped_lines",
]


def load(path: str, fmt: str | None = None, *, warn: bool = True) -> tuple[str, list[Event]]:
    """Read a whole session into memory as canonical events: ``(format name, events)``.

    The format is detected from the first records (``fmt`` overrides): canonical JSONL is
    read as is (raw bytes kept); a foreign line format (Claude Code, Codex, OpenAI chat, ...)
    or whole JSON document (OpenHands, SWE-agent ``.traj``) goes through its importer in
    :mod:`compactctl.formats`. Lines that are not JSON objects are kept as ``BadLine``
    events (for a foreign file, after the imported events; see :func:`to_canonical_events`
    for the checks of a foreign file, ``warn`` included).

    Memory: the session's events, one session at a time (docs/design.md section 7). JSON lines
    are read in blocks of :data:`~compactctl.io.jsonl.BLOCK` bytes, so the file is never held
    as one buffer beside its events; a whole-document format is read whole.

    Raises:
        InputError: the file cannot be read, or its format is unknown (the message lists the
            known formats and says to pass ``--format``), or a foreign file mixes formats or
            holds a line that is not a JSON object (:func:`to_canonical_events`).
        UsageError: ``fmt`` is not a known format.
    """
    check_format(fmt)
    with open_input(path) as stream:
        return read_transcript(stream, path, fmt, warn=warn)


def read_transcript(
    stream: BinaryIO,
    path: str,
    fmt: str | None = None,
    on_first_block: Callable[[bytes], None] | None = None,
    *,
    warn: bool = True,
) -> tuple[str, list[Event]]:
    """:func:`load` on a stream already open: ``(format name, canonical events)``.

    ``on_first_block`` is called with the first bytes read (through the end of the first
    non-blank line) before the rest is read; :class:`~compactctl.session.Session` uses it to
    load the session's tiktoken encoding before the events exist. The cyclic garbage
    collector is paused meanwhile (:func:`~compactctl.model.acyclic`).

    Raises:
        InputError: the stream cannot be read, or its format is unknown.
        UsageError: ``fmt`` is a whole-document format given for JSON lines.
    """
    with acyclic():  # events hold no cycles: no collection in the middle of the read
        try:
            doc, events = read_input(
                stream, fmt, lambda blocks: list(read_blocks(blocks)), on_first_block
            )
        except READ_ERRORS as exc:
            raise read_error(exc, path) from None
        read = to_canonical_events(path, fmt, doc, events, warn=warn)
        # a foreign format's source records go before the collector runs again, not after
        # its first collection walked them
        del doc, events
    return read


_T = TypeVar("_T")


def check_format(fmt: str | None) -> None:
    """Raises: UsageError: ``fmt`` is not ``None`` nor a known format."""
    from compactctl.formats import FORMATS, known_formats

    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown --format {fmt!r}; known: {', '.join(known_formats())}")


def read_input(
    stream: BinaryIO,
    fmt: str | None,
    read_lines: Callable[[Iterator[bytes]], _T],
    on_first_block: Callable[[bytes], None] | None = None,
) -> tuple[Any, _T | list[Event] | None]:
    """The content of a transcript stream, the first half of :func:`read_transcript`.

    ``(document, None)`` for a whole JSON document, ``(None, events)`` for one that looks
    like a document but does not parse, else ``(None, read_lines(blocks))`` over the
    stream's blocks (JSON lines, streamed; blocks of :data:`~compactctl.io.jsonl.BLOCK`
    bytes). ``read_lines`` decides what a JSON lines file becomes: :func:`read_transcript`
    makes events of it; ``inspect`` counts the lines as they come
    (:func:`compactctl.app.inspect_fast.inspect_lines`). Pass the result to
    :func:`to_canonical_events` unless ``read_lines`` already finished the job.

    Raises:
        OSError, EOFError: from the stream.
    """
    read = getattr(stream, "read1", None) or stream.read
    first = first_line_block(read)
    if on_first_block is not None:
        on_first_block(first)
    if _is_text_transcript(first, fmt):  # Aider's markdown history: read it all
        data = first + stream.read()
        del first
        return TextDocument(data.removeprefix(BOM).decode("utf-8", "replace")), None
    if _may_be_document(first, fmt):  # a whole JSON document: read it all
        data = first + stream.read()
        del first
        try:
            return orjson.loads(data[3:] if data.startswith(BOM) else data), None
        except orjson.JSONDecodeError:
            return None, read_bytes(data)
    rest = iter(lambda: read(BLOCK), b"")
    return None, read_lines(itertools.chain([first], rest))  # the file is never one buffer


def to_canonical_events(
    path: str, fmt: str | None, doc: Any, events: list[Event] | None, *, warn: bool = True
) -> tuple[str, list[Event]]:
    """The second half of :func:`read_transcript`: ``(format name, canonical events)`` of
    what :func:`read_input` returned, a JSON document (``doc``, ``events`` ``None``) or the
    events read from JSON lines (imported when the format is foreign).

    A foreign JSON lines file is checked whole, not only its first records: a record of
    another format is refused when the format was detected (:func:`_refuse_mixed`), and
    lines that are not JSON objects are refused or reported (:func:`_check_bad_lines`;
    ``warn``: give the report as a :class:`~compactctl.errors.CompactWarning`, off for
    ``inspect``, which lists them as findings).

    A forced ``fmt`` that reads nothing from a JSON lines file is refused
    (:func:`_refuse_unread`), and so is a file with no JSON object line, whatever ``fmt``.

    Raises:
        NotATranscript: the format is unknown or ambiguous, no line is a JSON object, or a
            forced ``fmt`` reads nothing from the file. InputError: the file mixes formats,
            or a line of a foreign file is not a JSON object (see :func:`_check_bad_lines`).
            UsageError: ``fmt`` is a whole-document format given for JSON lines.
    """
    from compactctl.formats import FORMATS, examine, examine_document, known_formats

    if isinstance(doc, TextDocument):
        text_name = fmt or "aider"
        text_importer = FORMATS[text_name].text_to_canonical
        if text_importer is None:
            raise UsageError(f"--format {text_name} does not read a markdown text transcript")
        return text_name, _imported(text_importer(doc.text), [])
    if events is None:
        found = None if fmt else examine_document(doc)
        name = fmt or (found.name if found else None)
        importer = FORMATS[name].document_to_canonical if name else None
        if name and importer is None and isinstance(doc, list):
            line_importer = FORMATS[name].to_canonical
            if line_importer is not None:
                pairs = [(i, r) for i, r in enumerate(doc, 1) if isinstance(r, dict)]
                if fmt is None:
                    _refuse_mixed(path, name, pairs, "item")
                _refuse_many_conversations(path, name, pairs, "item")
                return name, _imported(line_importer(pairs), [])
        if name is None or importer is None:
            if found is not None:
                raise NotATranscript(found.message(known_formats()), path=path)
            raise NotATranscript(_unknown_format_message(known_formats()), path=path)
        return name, _imported(importer(doc), [])
    head50 = [e.data for e in itertools.islice(_records(events), 50)]
    if not head50:
        _refuse_if_not_json_lines(path, events)
    if fmt == "canonical":
        _refuse_unread(path, fmt, events, events)
        return fmt, events
    found = examine(head50) if head50 and fmt is None else None
    name = fmt or (found.name if found else "canonical")
    if name is None and len(head50) == 1:
        single = examine_document(head50[0])
        if single.name is not None and FORMATS[single.name].document_to_canonical is not None:
            importer = FORMATS[single.name].document_to_canonical
            assert importer is not None
            return single.name, _imported(importer(head50[0]), [])
    if name is None:
        assert found is not None
        raise NotATranscript(found.message(known_formats()), path=path)
    if name == "canonical":
        return name, events
    line_importer = FORMATS[name].to_canonical
    if line_importer is None:
        raise UsageError(f"--format {name} is a whole-document format, not JSON lines")
    if fmt is None:
        _refuse_mixed(path, name, ((e.line or 0, e.data) for e in _records(events)), "line")
    _refuse_many_conversations(path, name, ((e.line or 0, e.data) for e in _records(events)))
    _refuse_many_sessions(path, name, ((e.line or 0, e.data) for e in _records(events)))
    bad = [e for e in events if isinstance(e, BadLine)]
    imported = _imported(line_importer((e.line or 0, e.data) for e in _records(events)), bad)
    if fmt is not None:
        _refuse_unread(path, fmt, events, imported)
    if bad:
        _check_bad_lines(path, name, bad, refuse=fmt is None, warn=warn)
    return name, imported


def _refuse_unread(path: str, fmt: str, events: list[Event], read: list[Event]) -> None:
    """Refuse a JSON lines file that a forced ``--format`` reads nothing from: none of its
    records is evidence of that format (each one its scorer rates ``None`` or
    :data:`~compactctl.formats.detection.FITS`: a record the reader keeps as a content-less
    ``foreign`` event, or drops) and nothing of a conversation came out of the reader (no
    message, summary or compact event in ``read``). Such a file would be reported as a
    session of 0 messages and copied unchanged by ``-o``, exit 0: silently wrong (a fresh-user
    trial, ``inspect --format codex-rollout`` on a canonical file: ``0 messages ...
    events: foreign 68``). A file with no record at all (empty, or blank lines) is not
    refused here: there is nothing in it for any format to read.

    Args:
        events: the lines as read (``BadLine`` for those that are not JSON objects).
        read: the events the format's reader made of them (``events`` for canonical).

    Raises:
        NotATranscript: names the format, how many records it reads none of, what the file
            looks like by detection (:func:`compactctl.formats.detection.examine`), and
            to drop ``--format`` or pass the right one.
    """
    from compactctl.formats.detection import SCORERS, STRONG, WEAK, examine

    if any(isinstance(e, (Message, SummaryEvent, CompactEvent)) for e in read):
        return
    scorer = SCORERS.get(fmt)
    if scorer is None or any(scorer(e.data) in (STRONG, WEAK) for e in _records(events)):
        return  # the first record it knows ends the search: no list of the file's records
    records = [e.data for e in _records(events)]
    if not records:
        return
    found = examine(records)
    if found.name is not None:
        looks = (
            f"format detection says it is {found.name}: drop --format (or pass --format "
            f"{found.name})"
        )
    else:
        looks = (
            f"format detection knows no format it fits (it looks like {found.shape}): pass "
            "the format it is (compactctl convert --list-formats), or drop --format"
        )
    many = len(records) != 1
    raise NotATranscript(
        f"--format {fmt} reads nothing from this file: none of its {len(records)} "
        f"record{'s' if many else ''} is one {fmt} reads, so it would be read as a session "
        f"of 0 messages; {looks}",
        path=path,
    )


def _refuse_many_conversations(
    path: str, name: str, records: Iterable[tuple[int, Any]], where: str = "line"
) -> None:
    """Refuse an OpenAI chat file with more than one whole conversation
    (:func:`compactctl.formats.openai_chat.conversation_lines`), whatever ``--format``
    says: its conversations would be read as one session.

    Raises:
        InputError: names the first two such lines and what the file looks like.
    """
    if name != "openai-chat":
        return
    from compactctl.formats.openai_chat import conversation_lines

    lines = conversation_lines(records)
    if len(lines) < 2:
        return
    raise InputError(
        f"{where}s {lines[0]} and {lines[1]} each hold a whole conversation "
        '({"messages": [...]}): the file looks like a request log or a fine-tuning set, '
        "one conversation per line, not one session; compactctl reads one conversation "
        "per file (split the file, one conversation per file)",
        path=path,
    )


def _refuse_many_sessions(path: str, name: str, records: Iterable[tuple[int, Any]]) -> None:
    """Refuse a Claude Code file that holds a second conversation (two session files
    concatenated, :func:`compactctl.formats.claude_code.sessions`), whatever ``--format``
    says: its records would be read as abandoned branches of the first.

    Raises:
        InputError: names the line where the second conversation starts, both session
            ids, why it is another conversation (a root, or a dangling parent and no link
            to the earlier session), and how to split the file.
    """
    if name != "claude-code":
        return
    from compactctl.formats.claude_code import sessions

    second = sessions(r for r in records if isinstance(r[1], dict))[1]
    if second is None:
        return
    start, root, first, other, parent = second
    why = (
        "a root record, no parent"
        if parent is None
        else f"its first record's parent {parent} is not in the file, and none of its "
        "records chains onto the earlier session's"
    )
    raise InputError(
        f"line {root} starts another conversation (session {other}: {why}) after session "
        f"{first}: the file looks like two Claude Code session "
        "files joined, and Claude Code keeps one session per file (a resumed session's "
        f"records chain onto the earlier ones). Split it, one session per file: the "
        f"second session's records start at line {start} (head -n {start - 1} FILE > "
        f"first.jsonl; tail -n +{start} FILE > second.jsonl)",
        path=path,
    )


def _check_bad_lines(path: str, name: str, bad: list[BadLine], *, refuse: bool, warn: bool) -> None:
    """What the lines of a foreign JSON lines file that are not JSON objects mean
    (docs/formats.md section 8).

    - blank lines: ignored;
    - a torn last line (still being written, or a writer crashed) and a complete line that
      opens like a JSON object but does not parse (a write cut off by a crash, the resume
      goes on on the next line): skipped, and reported with their line numbers
      (:func:`warn_skipped_lines`, when ``warn``; ``inspect`` lists them as findings);
    - any other line (text, a JSON array or string, bytes that are not UTF-8 and do not
      open like an object): the file is not JSON lines of this format, refused when
      ``refuse`` (the format was detected); with ``--format`` they are skipped and reported
      like cut-off lines.

    The lines stay in the events (``BadLine``, after the imported events: :func:`_imported`)
    for ``inspect``; a conversion never writes them, blank ones included
    (:func:`compactctl.app.jobs.written_events`).

    Raises:
        InputError: ``refuse`` and a line that is neither; names it and how it starts.
    """
    cut: list[BadLine] = []
    for e in bad:
        if e.problem == "blank":
            continue
        body = (e.raw or b"").removeprefix(BOM).lstrip(b" \t")
        if e.problem == "torn" or (e.problem != "not-object" and body.startswith(b"{")):
            cut.append(e)
        elif refuse:
            raise InputError(
                f"line {e.line} is not a JSON object ({_problem(e)}; it starts "
                f"{_opening(e.raw)}) in a file whose other lines are {name} records; "
                "every line of a JSON lines transcript is one JSON object "
                "(docs/formats.md section 8)",
                path=path,
            )
        else:
            cut.append(e)
    if warn:
        warn_skipped_lines(path, cut, stacklevel=3)


def warn_skipped_lines(path: str, bad: Iterable[Event], *, stacklevel: int = 2) -> None:
    """The one warning for the lines of a transcript that hold no event and are skipped
    (a :class:`~compactctl.errors.CompactWarning`, printed on stderr by the CLI): the file,
    how many, and the first three with what is wrong (malformed JSON, a torn last line, ...).
    Blank lines are not named (ignored: docs/formats.md section 8). Nothing when none.

    Used for a foreign file by the reader (:func:`_check_bad_lines`) and for a canonical
    one by ``eval`` (:mod:`compactctl.evaluate.lines`), which replays its lines.
    """
    skipped = [e for e in bad if isinstance(e, BadLine) and e.problem != "blank"]
    if not skipped:
        return
    import warnings

    from compactctl.errors import CompactWarning

    shown = ", ".join(f"line {e.line} ({_problem(e)})" for e in skipped[:3])
    more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
    many = len(skipped) > 1
    warnings.warn(
        CompactWarning(
            f"{path}: {len(skipped)} line{'s' if many else ''} skipped, not read as part of "
            f"the conversation: {shown}{more}; inspect lists {'them' if many else 'it'}"
        ),
        stacklevel=stacklevel + 1,
    )


def _refuse_mixed(
    path: str, name: str, records: Iterable[tuple[int, dict[str, Any]]], where: str
) -> None:
    """Refuse a file detected as ``name`` (from its first records) that holds a record of
    another format further on, or among the strays detection tolerates
    (:func:`compactctl.formats.detection.first_foreign_record`): its reader would keep that
    record as a content-less ``foreign`` event, or drop it (docs/formats.md, "Detection by
    evidence"). ``where``: what a position is (``line``, or ``item`` of a JSON array).

    Raises:
        InputError: names the first such record, the format it looks like and its shape.
    """
    from compactctl.formats.detection import first_foreign_record, record_shape

    found = first_foreign_record(name, records)
    if found is None:
        return
    at, other, record = found
    raise InputError(
        f"mixed transcript formats: the first records are {name}, but {where} {at} looks "
        f"like {other} ({record_shape(record)}), a record {name} never writes; compactctl "
        "reads one format per file. Pass --format NAME to read it as one of them anyway",
        path=path,
    )


def _problem(bad: BadLine) -> str:
    """What is wrong with a bad line, in a few words (not the parser's message).

    >>> _problem(BadLine(b"[1]", 2, "not-object", "a JSON list, not an object"))
    'a JSON list, not an object'
    >>> _problem(BadLine(b"{", 3, "malformed", "malformed JSON: unexpected end of data"))
    'malformed JSON'
    >>> _problem(BadLine(b'{"a', 9, "torn", "last line has no newline (torn write)"))
    'torn: the last line has no newline'
    """
    if bad.problem == "torn":
        return "torn: the last line has no newline"
    return "malformed JSON" if bad.problem == "malformed" else bad.detail or bad.problem


def _refuse_if_not_json_lines(path: str, events: list[Event]) -> None:
    """Refuse a file none of whose lines is a JSON object, unless its only bad lines are
    blank or a torn last one that may be the start of a JSON object line (a transcript
    whose first event is still being written: it opens with ``{`` and holds no NUL byte and
    no CR; a file of NUL bytes or with CR-only line endings has no ``\\n`` at all, and was
    read as one torn line).

    Raises:
        InputError: a complete line is malformed, not UTF-8 or not an object (a binary
            file, text that is not JSON lines), or the torn last line cannot begin a JSON
            object line; names the first such line and quotes how it starts.
    """
    bad = next(
        (e for e in events if isinstance(e, BadLine) and e.problem not in HARMLESS_PROBLEMS),
        None,
    )
    why = bad.problem if bad is not None else None
    if bad is None:
        bad = next((e for e in events if isinstance(e, BadLine) and e.problem == "torn"), None)
        why = _not_an_object_start(bad.raw) if bad is not None and bad.raw else None
    if bad is not None and why is not None:
        raise NotATranscript(
            f"not a JSON lines transcript: no line is a JSON object (line {bad.line}: "
            f"{why}); line {bad.line} starts {_opening(bad.raw)}; compactctl reads canonical "
            "JSONL and the formats listed by `compactctl convert --list-formats`",
            path=path,
        )


def _opening(raw: bytes | None, size: int = 40) -> str:
    """What a line looks like: its first ``size`` characters, quoted (control bytes escaped),
    secrets redacted (:func:`compactctl.summarize.redact.redact`, on the line's first 1,024
    bytes so that a secret cut at ``size`` is still recognised): the message goes to stderr,
    ``--json``, ``--report`` pages and the store's run log.

    >>> _opening(b"# Notes on aider"), _opening(b"<html><body>" * 5)
    ("'# Notes on aider'", "'<html><body><html><body><html><body><htm...'")
    >>> _opening(b"OPENAI_API_KEY=sk-proj-" + b"a1B2" * 10)
    "'OPENAI_API_KEY=[REDACTED:openai-key]'"
    """
    from compactctl.summarize.redact import redact  # only a refusal needs it

    text = redact((raw or b"")[:1024].decode("utf-8", "replace").rstrip("\r\n"))
    return repr(text[:size] + ("..." if len(text) > size else ""))


def _not_an_object_start(torn: bytes) -> str | None:
    """Why a last line without ``\\n`` cannot be a JSON object line still being written,
    or ``None`` when it can.

    >>> _not_an_object_start(b'{"type":"sess'), _not_an_object_start(b"\\x00\\x00")
    (None, 'torn, NUL bytes and no newline')
    >>> _not_an_object_start(b'{"a":1}\\r{"b":2}\\r')
    'torn, CR-only line endings (JSON lines end in LF)'
    """
    if b"\0" in torn:
        return "torn, NUL bytes and no newline"
    if b"\r" in torn.rstrip(b"\r"):
        return "torn, CR-only line endings (JSON lines end in LF)"
    if not torn.removeprefix(BOM).lstrip(b" \t").startswith(b"{"):
        return "torn, no newline and not the start of a JSON object"
    return None


def _records(events: list[Event]) -> Iterator[Event]:
    """The events that are JSON objects (not bad lines), lazily."""
    return (e for e in events if not isinstance(e, BadLine))


_NON_SPACE = re.compile(rb"[^ \t\n\r\x0b\x0c]")
"""The first byte that ``bytes.lstrip()`` would keep."""


def first_line_block(read: Callable[[int], bytes]) -> bytes:
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


class TextDocument:
    """A transcript that is text, not JSON (Aider's ``.aider.chat.history.md``), read whole.

    Attributes:
        text: the file decoded as UTF-8 (invalid bytes replaced, a BOM dropped).
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _is_text_transcript(first: bytes, fmt: str | None) -> bool:
    """Whether a stream opening with ``first`` is Aider's markdown history: ``--format
    aider``, or (detecting) its first non-blank line is Aider's run header
    (:func:`compactctl.formats.aider.looks_like`)."""
    if fmt is not None:
        return fmt == "aider"
    from compactctl.formats.aider import HEADER

    return first.removeprefix(BOM).lstrip().startswith(HEADER.encode())


def _may_be_document(first: bytes, fmt: str | None) -> bool:
    """Whether a file opening with ``first`` (see :func:`first_line_block`) may be one JSON
    document (OpenHands, SWE-agent ``.traj``, a pretty-printed message list) rather than JSON
    lines: it opens with ``[``, or with ``{`` on a first line that does not parse alone
    (pretty-printed JSON). Whatever ``--format`` says, except ``canonical`` (always lines):
    ``--format openai-chat`` on a JSON document reads the document (issue 17)."""
    if fmt == "canonical":
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
