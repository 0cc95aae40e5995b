"""Claude Code session files (``~/.claude/projects/<project>/<sessionId>.jsonl``) -> canonical.

Source: docs/formats.md section 1. Input is ``(line_number, record)`` pairs of one session file;
output is canonical event dicts (docs/design.md section 3), each with ``sourceLine``.

The file is a tree, not a list, so the whole session is held in memory (one dict per line,
as parsed by the caller) while the current branch is found; events are then yielded.

Mapping:

- ``session`` first: ``sessionId``, ``model`` (first assistant ``message.model``), ``cwd``,
  ``version``, ``gitBranch`` of the first record that has them; ``peakPromptTokens``, the
  largest prompt an assistant record's ``usage`` reports on the branch (the context window
  decision reads it: a Claude session past 200k tokens ran with the 1M window).
- The current branch: the leaf is the ``leafUuid`` of the last ``last-prompt`` record; if
  conversation records were written after that ``last-prompt`` and descend from its leaf (a
  turn still running), the newest of them; without a usable ``last-prompt``, the newest
  non-sidechain ``user``/``assistant``/``system`` record. Only records of the file's own
  sessions count (:func:`sessions`: the first session and the sessions resumed in the same
  file; a stray record of another format is never on the branch; a second conversation,
  two files concatenated, is refused by the reader). From the leaf we follow
  ``parentUuid`` to the root; a ``compact_boundary`` (``parentUuid: null``) continues through
  ``logicalParentUuid``, so messages before a compaction are kept and replaced by a summary.
- Dangling parents (a ``parentUuid`` naming a record that was never written): the walk
  continues with the conversation record just before the orphan in file order (the lines
  in between were dropped), and the orphan's event gets ``danglingParentUuid`` (unless the
  orphan is a later line of an assistant response already merged into an earlier event).
- ``assistant`` lines are merged by ``message.id`` (see :class:`ClaudeBuilder`); lines with
  ``isApiErrorMessage`` are synthetic (never sent to the model): ``foreign``.
- ``user`` prompts start turns; ``isMeta`` or tag-wrapped injected text (``<system-reminder>``,
  ``<command-name>``, ...) are ``user`` messages with ``isMeta: true`` in the current turn;
  ``tool_result`` blocks are ``tool`` messages; images become image parts.
- ``system`` ``compact_boundary`` + the ``isCompactSummary`` user line: one ``summary`` event
  (``model: "claude-code"``, ``triggerMode`` from ``compactMetadata.trigger``, ``stats.preTokens``)
  replacing every message before it on the branch (and the previous summary), except the
  messages its ``compactMetadata.preservedMessages`` lists (Claude Code keeps them after the
  summary: :func:`compactctl.formats._claude.preserved_uuids`).
- Everything else is ``foreign`` (``sourceType`` = the record type): metadata records
  (``file-history-snapshot``, ``last-prompt``, ``queue-operation``, title ``summary``, ...),
  ``attachment`` and ``progress`` records on the branch, other ``system`` subtypes
  (``microcompact_boundary`` included), unknown types. Records of abandoned branches are
  ``foreign`` with ``sourceType: "branch"`` and sidechain (subagent) records ``foreign`` with
  ``sourceType: "sidechain"``; both carry ``recordType``. Foreign events sit at their
  position in the file. A subagent's own file (every conversation record ``isSidechain``,
  :func:`is_subagent_file`) is read as its own conversation: its first prompt is the task the
  parent agent gave it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from compactctl.formats._claude import ClaudeBuilder
from compactctl.formats._common import JSON, Uuids, foreign, merge_by_line, stable_uuid

SOURCE = "claude-code"
CONVERSATION_TYPES = frozenset({"user", "assistant", "system", "attachment", "progress"})
LEAF_TYPES = frozenset({"user", "assistant", "system"})


def _leaf(
    records: list[tuple[int, JSON]],
    by_uuid: dict[str, int],
    order: list[int],
) -> int | None:
    """Index of the leaf record of the current branch (see the module docstring)."""
    newest = next((i for i in reversed(order) if records[i][1].get("type") in LEAF_TYPES), None)
    prompt_at = None
    leaf_uuid = None
    for i in range(len(records) - 1, -1, -1):
        rec = records[i][1]
        if rec.get("type") == "last-prompt" and isinstance(rec.get("leafUuid"), str):
            prompt_at, leaf_uuid = i, rec["leafUuid"]
            break
    if leaf_uuid is None or leaf_uuid not in by_uuid:
        return newest
    leaf = by_uuid[leaf_uuid]
    if newest is None or prompt_at is None or newest < prompt_at:
        return leaf
    # records written after the last-prompt: use the newest one if it extends the leaf
    cur: int | None = newest
    seen: set[int] = set()
    while cur is not None and cur not in seen:
        if cur == leaf:
            return newest
        seen.add(cur)
        parent = records[cur][1].get("parentUuid")
        cur = by_uuid.get(parent) if isinstance(parent, str) else None
    return leaf


def is_subagent_file(records: list[tuple[int, JSON]]) -> bool:
    """Whether the file is a subagent's own transcript (``agent-<id>.jsonl``, or
    ``<session>/subagents/agent-<id>.jsonl``): every conversation record is ``isSidechain``.
    Such a file is read as its own conversation (issue 17: it used to give 0 messages).

    >>> is_subagent_file([(1, {"type": "user", "isSidechain": True, "uuid": "u"})])
    True
    """
    conversation = [r for _, r in records if r.get("type") in CONVERSATION_TYPES]
    return bool(conversation) and all(r.get("isSidechain") for r in conversation)


class Second(NamedTuple):
    """Where a second conversation starts in a Claude Code file (:func:`sessions`)."""

    start: int
    """The first line of its records: the root's line, or the line of the records just
    before it that belong to it (its ``sessionId``, or metadata without one, e.g. the
    ``file-history-snapshot`` a session file opens with)."""
    root: int
    """The line of its first conversation record."""
    first: str
    """The ``sessionId`` of the file's conversation (the first one)."""
    other: str
    """The ``sessionId`` of the second conversation."""
    parent: str | None
    """``None`` when its first record is a root (``parentUuid`` null); else the uuid that
    record names as its parent, a record that is not in the file."""


def sessions(records: Iterable[tuple[int, JSON]]) -> tuple[set[str], Second | None]:
    """The session ids of the file's conversation and where a second conversation starts.

    A resumed or continued session keeps writing to its file, and its records carry the new
    session's ``sessionId`` while they chain (``parentUuid``) onto the earlier session's
    records (siteboon/claudecodeui issue 1022, "records written before the resume keep the
    original session's id, and records written after carry the new id"); all these ids are
    the file's. A session id not seen yet starts another conversation, two session files
    concatenated (``cat a.jsonl b.jsonl``), when its first non-sidechain conversation record

    - is a root (``parentUuid`` null, not a ``compact_boundary``, which continues through
      ``logicalParentUuid``), or
    - names a parent that is not in the file (a dangling parent: the second file's root was
      cut off, or its first records were dropped) and none of that session's records chains
      onto a record of the file's earlier sessions: a resume chains onto them, a
      concatenated file never does (its uuids are its own). Within one session a dangling
      parent counts as a link (dropped records, docs/formats.md section 1).

    Claude Code keeps one session per file, named by its id (docs/formats.md section 1). In
    a subagent's own file (:func:`is_subagent_file`) sidechain records count too.

    Returns:
        ``(ids, second)``: the session ids of the file's conversation (empty when no
        conversation record has a ``sessionId``), and where another conversation starts
        (:class:`Second`), else ``None``.

    >>> rec = {"type": "user", "sessionId": "s1", "uuid": "a", "parentUuid": None}
    >>> later = dict(rec, sessionId="s2", uuid="b", parentUuid="a")
    >>> sessions([(1, rec), (2, later)])[1] is None
    True
    >>> queued = {"type": "queue-operation", "sessionId": "s2"}
    >>> sessions([(1, rec), (2, queued), (3, dict(later, parentUuid=None))])[1]
    Second(start=2, root=3, first='s1', other='s2', parent=None)
    >>> sessions([(1, rec), (2, dict(later, parentUuid="gone"))])[1]
    Second(start=2, root=2, first='s1', other='s2', parent='gone')
    """
    records = list(records)
    subagent = is_subagent_file(records)
    ids: dict[str, None] = {}
    for at, (line, rec) in enumerate(records):
        sid = rec.get("sessionId")
        if (
            not isinstance(sid, str)
            or sid in ids
            or rec.get("type") not in CONVERSATION_TYPES
            or (rec.get("isSidechain") and not subagent)
        ):
            continue
        root = rec.get("parentUuid") is None and rec.get("subtype") != "compact_boundary"
        if ids and (root or _unlinked(records, at, sid, set(ids))):
            start = at
            while start > 0 and _belongs_to(records[start - 1][1], sid):
                start -= 1
            parent = None if root else _parent(rec)
            return set(ids), Second(records[start][0], line, next(iter(ids)), sid, parent)
        ids[sid] = None
    return set(ids), None


def _parent(record: JSON) -> str | None:
    """The uuid a conversation record chains onto: ``parentUuid``, or a
    ``compact_boundary``'s ``logicalParentUuid``; ``None`` for a root."""
    parent = record.get("parentUuid")
    if parent is None and record.get("subtype") == "compact_boundary":
        parent = record.get("logicalParentUuid")
    return parent if isinstance(parent, str) else None


def _unlinked(records: list[tuple[int, JSON]], at: int, sid: str, earlier: set[str]) -> bool:
    """Whether session ``sid``, whose first conversation record is ``records[at]``, starts
    with a dangling parent and has no record chaining onto a record of the ``earlier``
    sessions (:func:`sessions`). A parent that is any record of the file is a link."""
    parent = _parent(records[at][1])
    if parent is None or any(r.get("uuid") == parent for _, r in records):
        return False
    theirs = {
        r["uuid"]
        for _, r in records
        if r.get("sessionId") in earlier and isinstance(r.get("uuid"), str)
    }
    return not any(r.get("sessionId") == sid and _parent(r) in theirs for _, r in records[at + 1 :])


def _belongs_to(record: JSON, sid: str) -> bool:
    """Whether a record just before a conversation's root goes with that session: it
    names it, or it is metadata that names no session."""
    own = record.get("sessionId")
    return own == sid or (own is None and record.get("type") not in CONVERSATION_TYPES)


def current_branch(records: list[tuple[int, JSON]]) -> tuple[list[int], dict[int, str]]:
    """Indexes (into ``records``) of the current branch, root first, and dangling parents.

    Only conversation records of the file's own sessions (:func:`sessions`; every record
    when none names one) are on it: a stray record of another session or another format
    (a ``claude -p`` stream-json line has ``session_id``, no ``sessionId``) is never the
    leaf nor a parent, and is kept as a ``branch`` foreign event (the review of the readers,
    2026-12: such a line appended to a session without ``last-prompt`` was taken as the
    leaf, and the session read as its one message).

    Returns ``(path, dangling)`` where ``dangling`` maps the index of a record whose parent
    was missing to that parent's uuid.
    """
    by_uuid: dict[str, int] = {}
    order: list[int] = []
    subagent = is_subagent_file(records)
    own = sessions(records)[0]
    for i, (_, rec) in enumerate(records):
        uid = rec.get("uuid")
        if (
            rec.get("type") in CONVERSATION_TYPES
            and isinstance(uid, str)
            and (subagent or not rec.get("isSidechain"))
            and (not own or rec.get("sessionId") in own)
        ):
            by_uuid.setdefault(uid, i)
            order.append(i)
    position: dict[int, int] | None = None  # idx -> its place in order, for dangling parents
    leaf = _leaf(records, by_uuid, order)
    path: list[int] = []
    dangling: dict[int, str] = {}
    seen: set[int] = set()
    cur = leaf
    while cur is not None and cur not in seen:
        seen.add(cur)
        path.append(cur)
        rec = records[cur][1]
        parent = _parent(rec)
        if parent is None:
            break
        nxt = by_uuid.get(parent)
        if nxt is None:
            dangling[cur] = parent
            if position is None:
                position = {idx: pos for pos, idx in enumerate(order)}
            pos = position[cur] - 1
            while pos >= 0 and order[pos] in seen:
                pos -= 1
            nxt = order[pos] if pos >= 0 else None
        cur = nxt
    path.reverse()
    return _with_fanned_results(records, path), dangling


def _result_ids(record: JSON) -> list[str]:
    """The ``tool_use_id`` of each ``tool_result`` block of a user record that holds only
    tool results (else ``[]``)."""
    if record.get("type") != "user":
        return []
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list) or not content:
        return []
    ids = [
        b.get("tool_use_id")
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    if len(ids) != len(content) or not all(isinstance(i, str) for i in ids):
        return []
    return [str(i) for i in ids]


def _call_ids(record: JSON) -> list[str]:
    if record.get("type") != "assistant":
        return []
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [
        str(b["id"])
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str)
    ]


def _message_id(record: JSON) -> str | None:
    if record.get("type") != "assistant":
        return None
    message = record.get("message")
    mid = message.get("id") if isinstance(message, dict) else None
    return mid if isinstance(mid, str) else None


def _with_fanned_results(records: list[tuple[int, JSON]], path: list[int]) -> list[int]:
    """The branch with the parallel tool calls and results that hang off it.

    Claude Code writes parallel calls as a chain of assistant lines (one per ``tool_use``,
    all with the ``message.id`` of the one API answer), but each result line's ``parentUuid``
    is the line of *its own* call, so the branch the leaf names passes through one result
    only and the other calls and results sit on side branches (seen in Claude Code 2.1.328,
    ``fixtures/real/`` and the live test: results in either order). Off the branch, in file
    order, a record belongs to it when its parent is on it (or was added) and it is

    - an assistant line with the ``message.id`` of an assistant line on the branch (another
      part of the same answer), or
    - a user line of tool results only, answering calls on the branch that have no result
      there.

    The branch is in file order (a record is written after its parent), and so is the result.
    The branch's answers, calls and results are collected once, when the first record off
    the branch hangs off it (a session whose records are all on the branch skips it).
    """
    on_path = set(path)
    linked = {records[i][1].get("uuid") for i in path}
    extra: list[int] = []
    first = path[0] if path else 0
    branch: tuple[set[str], set[str], set[str]] | None = None
    for i in range(first, len(records)):
        rec = records[i][1]
        if i in on_path or rec.get("parentUuid") not in linked:
            continue
        if branch is None:
            branch = _branch_ids(records, path)
        answers, calls, answered = branch
        ids = _result_ids(rec)
        if _message_id(rec) in answers:
            calls.update(_call_ids(rec))
        elif not (ids and all(r in calls and r not in answered for r in ids)):
            continue
        extra.append(i)
        answered.update(ids)
        linked.add(rec.get("uuid"))
    return sorted(path + extra) if extra else path


def _branch_ids(
    records: list[tuple[int, JSON]], path: list[int]
) -> tuple[set[str], set[str], set[str]]:
    """``(answers, calls, answered)`` of the branch ``path``: the ``message.id`` of its
    assistant lines, the ids of their ``tool_use`` blocks, and the ``tool_use_id`` of its
    user lines of tool results only (:func:`_message_id`, :func:`_call_ids`,
    :func:`_result_ids`), in one pass."""
    answers: set[str] = set()
    calls: set[str] = set()
    answered: set[str] = set()
    for i in path:
        rec = records[i][1]
        kind = rec.get("type")
        if kind == "assistant":
            mid = _message_id(rec)
            if mid is not None:
                answers.add(mid)
            calls.update(_call_ids(rec))
        elif kind == "user":
            answered.update(_result_ids(rec))
    return answers, calls, answered


def _session(records: list[tuple[int, JSON]], path: list[int]) -> JSON | None:
    session_id = None
    line = None
    first: JSON = {}
    for ln, rec in records:
        if isinstance(rec.get("sessionId"), str):
            session_id = rec["sessionId"]
            line = ln
            first = rec
            break
    model = None
    for i in path:
        message = records[i][1].get("message")
        if records[i][1].get("type") == "assistant" and isinstance(message, dict):
            model = message.get("model")
            if isinstance(model, str) and model != "<synthetic>":
                break
            model = None
    if session_id is None and model is None:
        return None
    peak = 0
    for i in path:
        rec = records[i][1]
        if rec.get("type") == "assistant":  # _prompt_tokens is 0 for any other record
            peak = max(peak, _prompt_tokens(rec))
    timestamp = next(
        (r["timestamp"] for _, r in records if isinstance(r.get("timestamp"), str)), None
    )
    event: JSON = {
        "type": "session",
        "uuid": stable_uuid(SOURCE, "session", session_id or ""),
        "sessionId": session_id,
        "model": model,
        "source": SOURCE,
    }
    for key in ("cwd", "version", "gitBranch"):
        if isinstance(first.get(key), str):
            event[key] = first[key]
    if peak:
        event["peakPromptTokens"] = peak
    if timestamp is not None:
        event["timestamp"] = timestamp
    if line is not None:
        event["sourceLine"] = line
    return {k: v for k, v in event.items() if v is not None}


def _prompt_tokens(record: JSON) -> int:
    """The prompt size an ``assistant`` record's ``message.usage`` reports, in tokens:
    ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens`` (the Messages
    API counts these three apart; together they are the whole prompt), 0 without usage."""
    if record.get("type") != "assistant":
        return 0
    message = record.get("message")
    usage = message.get("usage") if isinstance(message, dict) else None
    if not isinstance(usage, dict):
        return 0
    total = 0
    for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        n = usage.get(key)
        if isinstance(n, int) and n > 0:
            total += n
    return total


def to_canonical(records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    """Convert one Claude Code session file to canonical events (see the module docstring).

    Args:
        records: ``(line_number, parsed_record)`` pairs in file order; non-dict records and
            malformed lines are the caller's business (skip them before calling).

    Yields:
        The ``session`` event, then messages, summaries and ``foreign`` events, each with
        ``sourceLine``. Memory: the whole session (the parent tree needs it).
    """
    recs = [(ln, r) for ln, r in records if isinstance(r, dict)]
    path, dangling = current_branch(recs)
    uuids = Uuids()
    session = _session(recs, path)
    if session is not None:
        session["uuid"] = uuids.take(session["uuid"])
        yield session
    builder = ClaudeBuilder(SOURCE, uuids)
    on_path = set(path)
    for idx in path:
        line, rec = recs[idx]
        kind = rec.get("type")
        if kind == "assistant":
            if rec.get("isApiErrorMessage"):
                builder.add_foreign(rec, line, "assistant", reason="apiError")
            else:
                builder.assistant(rec, line)
        elif kind == "user":
            builder.user(rec, line)
        elif kind == "system" and rec.get("subtype") == "compact_boundary":
            builder.boundary(rec, line)
        else:
            builder.add_foreign(rec, line, str(kind))
    conversation = builder.finish()
    dangling_at = {recs[i][0]: parent for i, parent in dangling.items()}
    for event in conversation:
        at = event.get("sourceLine")
        if isinstance(at, int) and at in dangling_at:
            event["danglingParentUuid"] = dangling_at.pop(at)
    aside: list[JSON] = []
    for i, (line, rec) in enumerate(recs):
        if i in on_path:
            continue
        kind = str(rec.get("type", "untyped"))
        uid = rec.get("uuid")
        uid = uuids.take(uid if isinstance(uid, str) else stable_uuid(SOURCE, line), line)
        ts = rec.get("timestamp")
        if not isinstance(ts, str):
            snap = rec.get("snapshot")
            ts = snap.get("timestamp") if isinstance(snap, dict) else None
        if kind in CONVERSATION_TYPES and isinstance(rec.get("uuid"), str):
            source_type = "sidechain" if rec.get("isSidechain") else "branch"
            aside.append(
                foreign(source_type, uid, line, ts, recordType=kind, agentId=rec.get("agentId"))
            )
        else:
            aside.append(foreign(kind, uid, line, ts, subtype=rec.get("subtype")))
    yield from merge_by_line(conversation, aside)
