"""Session: one transcript, opened once.

A :class:`Session` holds what every layer reads: the transcript's path, the identity of the
bytes read (:class:`~compactctl.io.files.FileIdentity`), its format, its canonical events,
and its metadata (:class:`SessionMeta`: model, session key, context window, encoding), with
one token counter and the effective context cached. Appends go through
:meth:`Session.append`, the one way a layer's events reach the file.

This module is the one place where the session key, the context window and the token
encoding of a transcript are decided (:func:`session_key`, :func:`context_window`,
:func:`encoding_name`).

Memory: the session's events (a layer that needs the whole session, such as dedup or the
summarizer, needs them anyway; docs/design.md section 7). Opening reads the file once, in
blocks, and loads a large session's tiktoken encoding before its events exist (see
:data:`PRELOAD_MIN_BYTES`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import orjson

from compactctl.errors import NotAppendable, UsageError
from compactctl.io.files import (
    STDIN,
    AppendResult,
    FileIdentity,
    IdentityReader,
    append_events,
    open_input,
)
from compactctl.io.jsonl import BOM
from compactctl.media import media_rule_for
from compactctl.model import Event, Message, SessionEvent
from compactctl.replay import View, replay
from compactctl.tokens import PromptSizes, TokenCounter, context_window_for, encoding_for_model

__all__ = [
    "CLAUDE_LONG_WINDOW",
    "CLAUDE_WINDOW",
    "DEFAULT_CONTEXT_WINDOW",
    "PRELOAD_MIN_BYTES",
    "Session",
    "SessionMeta",
    "context_window",
    "encoding_name",
    "session_key",
]

PRELOAD_MIN_BYTES = 2**20
"""Files of at least this many bytes (1 MiB) load their tiktoken encoding as soon as the
first line is read, before the events are built.

Building an encoding briefly holds a Python copy of its ranks (about 13 MB for cl100k_base,
26 MB for o200k_base) next to tiktoken's own tables; loaded before the session's events
exist, that transient no longer adds to the session's peak RSS (measured on the 11 MB bench
session, o200k_base: ``rules`` 130 -> 101 MB). Smaller files skip it, so a session that
turns out to need no count never pays the load (0.1-0.2 s)."""


def session_key(session: SessionEvent | None, path: str) -> str:
    """The key a session is known by in reports and the store: the ``sessionId`` of its
    ``session`` event, else its path (``-`` for stdin).

    >>> session_key(None, "a.jsonl")
    'a.jsonl'
    """
    if session is None:
        return path
    return str(session.data.get("sessionId") or path)


DEFAULT_CONTEXT_WINDOW = 128_000
"""The window, in tokens, of a session whose model has none known (no ``--context-window``,
no ``contextWindow`` recorded, not in litellm's model table, not a Claude model): 128k, the
smallest window of the current coding models (gpt-4o, gpt-4.1-mini's peers, most open-weight
models served today; Claude has 200k, gpt-5 272k, Gemini 1M), so triggers fire early rather
than never. A :class:`~compactctl.errors.CompactWarning` says it was assumed."""

CLAUDE_WINDOW = 200_000
"""The standard context window of every Claude model (Anthropic's models overview), in
tokens: a Claude model litellm's table does not list gets it."""

CLAUDE_LONG_WINDOW = 1_000_000
"""The 1M-token context window of Claude models that offer it (Anthropic's context windows
guide; Claude Code's ``[1m]`` models): a Claude session whose recorded prompt
(``peakPromptTokens``) passed :data:`CLAUDE_WINDOW`, or whose model name ends in ``[1m]``,
ran with it."""

_DATE_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


def context_window(
    override: int | None,
    session: SessionEvent | None,
    model: str | None,
    path: str = "",
    *,
    warn: bool = True,
) -> int:
    """The context window of a session, in tokens, from the first of:

    1. ``override`` (``--context-window`` or its config key);
    2. the ``contextWindow`` the session event records;
    3. litellm's model table (:func:`compactctl.tokens.context_window_for`) for the model,
       without a ``[1m]`` suffix, then without a date suffix (``-20250805``);
    4. a Claude model the table does not list: :data:`CLAUDE_WINDOW`;
    5. otherwise :data:`DEFAULT_CONTEXT_WINDOW`, with a
       :class:`~compactctl.errors.CompactWarning` naming ``path`` (the transcript), which
       the CLI says once per model and run (its ``once`` key), for the first such file;
       not when ``warn`` is false: the callers pass whether the session holds a message,
       since the window of an empty input measures nothing (an empty stdin has its own
       warning, :func:`compactctl.io.files.open_input`).

    For a Claude model (3 and 4), :data:`CLAUDE_LONG_WINDOW` when the model name ends in
    ``[1m]`` or the session's recorded peak prompt (``peakPromptTokens``) is larger than the
    window found: a prompt that large could only be sent to the 1M window.

    >>> context_window(8000, None, None)
    8000
    >>> context_window(None, None, "claude-opus-4-1-20250805")
    200000
    >>> context_window(None, SessionEvent({"peakPromptTokens": 230000}), "claude-sonnet-4-5")
    1000000
    """
    if override:
        return override
    recorded = session.context_window if session else None
    if recorded:
        return recorded
    name = (model or "").strip()
    long = name.lower().endswith("[1m]")
    if long:
        name = name[:-4]
    window = context_window_for(name) or context_window_for(_DATE_SUFFIX.sub("", name))
    if name.rsplit("/", 1)[-1].lower().startswith(("claude", "anthropic.claude")):
        window = window or CLAUDE_WINDOW
        peak = session.peak_prompt_tokens if session else None
        if long or (peak is not None and peak > window):
            window = max(window, CLAUDE_LONG_WINDOW)
        return window
    if window or not warn:
        return window or DEFAULT_CONTEXT_WINDOW
    import warnings

    from compactctl.errors import CompactWarning

    what = f"model {name!r} has no known context window" if name else "no model is recorded"
    note = CompactWarning(
        f"{path + ': ' if path else ''}{what}: assuming a context window of "
        f"{DEFAULT_CONTEXT_WINDOW:,} tokens (pass --context-window N to set it)"
    )
    note.once = f"context window of {name!r}"
    warnings.warn(note, stacklevel=2)
    return DEFAULT_CONTEXT_WINDOW


def session_model(session: SessionEvent | None, message_models: Iterable[object]) -> str | None:
    """The session's model: the ``session`` event's ``model``, else the first non-empty string
    among ``message_models`` (each message's ``model`` field, in log order: Gemini CLI and
    opencode record the model on each answer, not on the session), else ``None``.

    The one place the model is decided: :attr:`Session.meta` and the streaming inspector
    (:class:`compactctl.app.inspector.InspectAccumulator`) both call it.

    >>> session_model(None, [None, "", "gemini-2.5-pro", "gpt-4o"])
    'gemini-2.5-pro'
    """
    if session is not None and session.model:
        return session.model
    return next((m for m in message_models if isinstance(m, str) and m), None)


def encoding_name(override: str | None, model: str | None) -> str:
    """The tiktoken encoding a session is counted with: ``override`` (``--encoding``, or
    ``"estimate"`` for the chars-based estimate), else the encoding of the session's model
    (:func:`compactctl.tokens.encoding_for_model`).

    >>> encoding_name("estimate", "gpt-4o"), encoding_name(None, "gpt-4o")
    ('estimate', 'o200k_base')
    """
    return override or encoding_for_model(model)


@dataclass(frozen=True)
class SessionMeta:
    """What a transcript says about itself, decided once per session.

    Attributes:
        model: the model the session event records, or ``None``.
        key: :func:`session_key`.
        context_window: :func:`context_window`, in tokens.
        encoding: :func:`encoding_name` (a tiktoken encoding name or ``"estimate"``).
    """

    model: str | None
    key: str
    context_window: int
    encoding: str


class Session:
    """One transcript opened once: path, identity, format, events, metadata, sizes.

    Build one with :meth:`open` (a path or ``-``) or :meth:`from_events` (events already in
    memory, for the library and tests). Layers read :attr:`events`, :attr:`meta`,
    :attr:`counter` and :meth:`effective`; nothing here changes the events.

    Attributes:
        path: the transcript path, ``-`` for stdin.
        format: the format it was read as (``canonical``, ``claude-code``, ...).
        events: its canonical events in file order (foreign formats: imported).
        identity: the bytes read (device, inode, size, sha256), ``None`` for stdin and for
            sessions built from events.
    """

    def __init__(
        self,
        path: str,
        fmt: str,
        events: list[Event],
        identity: FileIdentity | None = None,
        *,
        encoding: str | None = None,
        context_window: int | None = None,
    ) -> None:
        self.path = path
        self.format = fmt
        self.events = events
        self.identity = identity
        self._encoding = encoding
        self._context_window = context_window
        self._effective: View | None = None
        self._totals: tuple[int, int] | None = None  # the prompt totals of _effective
        # an extended session's context is replayed from its base's: (base, new events)
        self._base: tuple[Session, Sequence[Event]] | None = None

    @classmethod
    def open(
        cls,
        path: str,
        fmt: str | None = None,
        *,
        encoding: str | None = None,
        context_window: int | None = None,
        preload: bool = True,
        refuse_compressed: bool = False,
    ) -> Session:
        """Read a transcript (``-``: stdin; gzip by magic bytes) in one pass over one open.

        Args:
            path: the file, or ``-``.
            fmt: its format (``None``: detected from the first records).
            encoding: the ``--encoding`` override (``"estimate"``: chars-based counts).
            context_window: the ``--context-window`` override, in tokens.
            preload: load the tiktoken encoding of a file of :data:`PRELOAD_MIN_BYTES` or
                more as soon as its first line is read (when the override or the first
                line's ``session`` event names it); never raises for it.
            refuse_compressed: refuse a gzip-compressed file before reading it (a job that
                would append to it in place: compactctl never appends to a compressed file).

        Raises:
            InputError: the file cannot be read, or its format is unknown, or it is
                compressed and ``refuse_compressed`` is set.
            UsageError: ``fmt`` is unknown, or a whole-document format given for JSON lines.
        """
        from compactctl.formats.reader import check_format, read_transcript

        check_format(fmt)
        identity: list[IdentityReader] = []
        with open_input(path, identity=identity) as stream:
            if refuse_compressed and identity and identity[0].compressed:
                raise NotAppendable(
                    "is gzip-compressed; compactctl does not append to a compressed transcript "
                    "(nothing was written). Pass -o FILE (or -o DIR/ for many files) to write "
                    "the result",
                    path=path,
                )

            def first_block(first: bytes) -> None:
                if preload and path != STDIN and identity:
                    _preload(first, encoding, identity[0].file_size)

            name, events = read_transcript(stream, path, fmt, first_block)
        done = identity[0].finished() if identity else None
        return cls(path, name, events, done, encoding=encoding, context_window=context_window)

    @classmethod
    def from_events(
        cls,
        events: Iterable[Event],
        path: str = STDIN,
        *,
        fmt: str = "canonical",
        encoding: str | None = None,
        context_window: int | None = None,
        counter: TokenCounter | None = None,
    ) -> Session:
        """A session over events already in memory (no file identity).

        ``counter``: a token counter to use (its encoding is the session's then).

        >>> s = Session.from_events([], "a.jsonl", encoding="estimate")
        >>> s.meta.key, s.meta.encoding, s.messages
        ('a.jsonl', 'estimate', 0)
        """
        if counter is not None:
            encoding = counter.encoding_name
        session = cls(
            path, fmt, list(events), None, encoding=encoding, context_window=context_window
        )
        if counter is not None:
            if counter.media_rule is None:
                counter.media_rule = media_rule_for(session.meta.model)
            session.__dict__["counter"] = counter
        return session

    def extended(self, events: Sequence[Event]) -> Session:
        """This session with ``events`` planned after its log (not written): same path,
        format, identity and overrides; the token counter and the prompt sizes
        (:attr:`sizes`) are shared.

        ``events`` are compact and summary events (what layers plan), never messages: the
        new session's effective context is replayed from this one's plus ``events``
        (replay applies events in file order, so that is the replay of the whole log), not
        from the whole log again, and its unchanged messages are this context's own
        objects, sized once.
        """
        nxt = self.with_events([*self.events, *events])
        nxt._base = (self, list(events))
        return nxt

    def with_events(self, events: list[Event]) -> Session:
        """This session over ``events`` instead of its log (same path, format, identity and
        overrides; the token counter and the prompt sizes are shared; its effective context is
        replayed from ``events``): what a layer plans over when the log's reverted compactions
        are left out (:func:`compactctl.layers.undo.plan_live`)."""
        nxt = Session(
            self.path,
            self.format,
            events,
            self.identity,
            encoding=self._encoding,
            context_window=self._context_window,
        )
        nxt.__dict__["counter"] = self.counter
        nxt.__dict__["sizes"] = self.sizes
        return nxt

    @cached_property
    def session_event(self) -> SessionEvent | None:
        """The first ``session`` event, or ``None``."""
        return next((e for e in self.events if isinstance(e, SessionEvent)), None)

    @cached_property
    def meta(self) -> SessionMeta:
        """The session's :class:`SessionMeta`, decided on first use."""
        event = self.session_event
        model = session_model(
            event, (e.data.get("model") for e in self.events if isinstance(e, Message))
        )
        return SessionMeta(
            model=model,
            key=session_key(event, self.path),
            context_window=context_window(
                self._context_window,
                event,
                model,
                self.path,
                warn=any(isinstance(e, Message) for e in self.events),
            ),
            encoding=encoding_name(self._encoding, model),
        )

    @cached_property
    def counter(self) -> TokenCounter:
        """The session's one token counter (its cache is shared by every layer), counting
        images by the rule of the session model's provider (:func:`media_rule_for`)."""
        counter = TokenCounter(self.meta.encoding)
        counter.media_rule = media_rule_for(self.meta.model)
        return counter

    @cached_property
    def sizes(self) -> PromptSizes:
        """The prompt sizes of this session's contexts (:class:`~compactctl.tokens.PromptSizes`
        over :attr:`counter`): each message is sized once, by every layer that plans on the
        session or on a session extended from it."""
        return PromptSizes(self.counter)

    def prompt_estimate(self) -> int:
        """The prompt estimate of the effective context, in tokens (:attr:`sizes`)."""
        return self.prompt_totals()[0]

    def prompt_totals(self) -> tuple[int, int]:
        """``(tokens, chars)`` of the effective context (:meth:`PromptSizes.totals
        <compactctl.tokens.PromptSizes.totals>`), summed once per session: its context
        never changes, and ``compact --layers`` asks for each session's size twice (as one
        layer's after and the next one's before) besides the layers' own sizing.

        Raises:
            ValueError: the counter's encoding is unavailable.
        """
        if self._totals is None:
            self._totals = self.sizes.totals(self._view())
        return self._totals

    @cached_property
    def messages(self) -> int:
        """The number of ``message`` events in the log (replaced ones included)."""
        return sum(1 for e in self.events if isinstance(e, Message))

    def effective(self) -> View:
        """The effective context of the log as it is (replay of :attr:`events`), cached.

        Returns a new list each time (the messages are shared and never mutated), so a
        caller may reorder or extend it.
        """
        return list(self._view())

    def _view(self) -> View:
        if self._effective is None:
            if self._base is not None:
                base, new = self._base
                self._effective = replay([*base._view(), *new])
            else:
                self._effective = replay(self.events)
        return self._effective

    def append(
        self, events: Sequence[Event], *, lock_timeout: float, torn_wait: float
    ) -> AppendResult:
        """Append new events to the transcript (:func:`compactctl.io.files.append_events`:
        under the lock, only if the file is still the one read (:attr:`identity`), skipping
        events already there, never into a line still being written, one write, fsync).

        Raises:
            LockTimeout, FileChanged, WriteError, UsageError: as ``append_events``.
        """
        return append_events(
            self.path,
            events,
            lock_timeout=lock_timeout,
            torn_wait=torn_wait,
            identity=self.identity,
        )


def _preload(first: bytes, encoding: str | None, size: int) -> None:
    """Load the encoding a large transcript will be counted with (:data:`PRELOAD_MIN_BYTES`).

    ``encoding`` is the override (``"estimate"`` loads nothing) or ``None``: the encoding
    of the model named by a ``session`` event on the first line; a first line that is no
    session event, or a foreign format's first record, loads nothing here (the encoding
    then loads on the first count). Never raises: an unavailable encoding is reported by
    the first count, with the command's usual message.
    """
    if encoding == "estimate" or size < PRELOAD_MIN_BYTES:
        return
    with contextlib.suppress(ValueError, UsageError):  # orjson.JSONDecodeError: a ValueError
        if encoding is None:
            data = orjson.loads(first.removeprefix(BOM).lstrip().split(b"\n", 1)[0])
            if not isinstance(data, dict) or data.get("type") != "session":
                return
            model = data.get("model")
            encoding = encoding_for_model(model if isinstance(model, str) else None)
        TokenCounter(encoding).load()
