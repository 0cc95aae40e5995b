"""The Summarizer protocol of Layer 3: one request in, one validated summary out.

A summarizer turns a span of canonical messages (docs/design.md section 3), plus the previous
summary as *prior state*, into summary text in one of the two formats of
:mod:`compactctl.summarize.summary_format`. Two implementations exist: the built-in, offline
:class:`compactctl.summarize.extractive.ExtractiveSummarizer` (the default when no model is
configured), and a litellm-backed one that calls a model. The orchestration (which messages,
triggers, retries, the SummaryEvent) lives elsewhere; a summarizer only writes text.

Contract of :meth:`Summarizer.summarize`:

- the returned ``text`` validates with its format's validator
  (:func:`~compactctl.summarize.summary_format.validate_sections` or
  :func:`~compactctl.summarize.summary_format.parse_task_state`);
- the earlier summary is passed as ``request.prior`` and merged as state; it is never
  summarized as if it were conversation (docs/design.md section 5, "summary of a summary");
- failures raise :class:`~compactctl.errors.SummarizerError` (an invalid answer raises its
  subclass :class:`~compactctl.summarize.summary_format.SummaryFormatError`); nothing is
  appended then.

This module imports nothing heavy; implementations are imported from their own modules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from compactctl.errors import UsageError
from compactctl.summarize.summary_format import (
    DEFAULT_MAX_SUMMARY_CHARS,
    SummaryFormatError,
    TaskState,
    validate_task_state,
)

__all__ = ["FORMATS", "SummaryFormat", "SummaryRequest", "SummaryResult", "Summarizer"]

#: The two summary formats (docs/design.md section 5).
SummaryFormat = Literal["sections", "task-state"]
FORMATS: tuple[str, ...] = ("sections", "task-state")


@dataclass(frozen=True)
class SummaryResult:
    """One summary, as it goes into a SummaryEvent (docs/design.md section 3).

    Attributes:
        text: the ``summaryText``: for ``sections`` the ``<analysis>``/``<summary>`` text,
            for ``task-state`` the JSON answer ``{"task_state": ..., "display_summary": ...}``.
        format: ``"sections"`` or ``"task-state"``.
        task_state: the eight task-state fields (format ``task-state``), else ``None``.
        model: ``"extractive"`` for the built-in summarizer, else the litellm model name.
        warnings: human-readable notes for the run report, e.g. that the ledger alone was
            longer than the budget. Empty when there is nothing to say.
    """

    text: str
    format: str
    task_state: TaskState | None
    model: str
    warnings: tuple[str, ...] = ()

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> SummaryResult:
        """Rebuild the prior state from a SummaryEvent dict (``summaryText``, ``format``,
        ``taskState``, ``model``). An event without ``format`` is taken as ``sections``; a
        ``taskState`` that does not validate is dropped.

        >>> SummaryResult.from_event({"summaryText": "t", "model": "extractive"}).format
        'sections'
        """
        state = event.get("taskState")
        task_state: TaskState | None = None
        if isinstance(state, Mapping):
            try:
                task_state = validate_task_state(state)
            except SummaryFormatError:
                task_state = None  # a damaged stored state: summarizers re-read ``text``
        return cls(
            text=str(event.get("summaryText", "")),
            format=str(event.get("format") or "sections"),
            task_state=task_state,
            model=str(event.get("model") or ""),
        )


@dataclass(frozen=True)
class SummaryRequest:
    """What to summarize and how.

    Attributes:
        messages: the canonical message dicts to summarize, in file order: ``role``,
            ``content`` (a string or a list of parts), ``toolCalls``
            (``[{id, name, arguments}]``), ``toolCallId``, ``toolName``, ``isError``,
            ``turnId``, ``uuid`` (docs/design.md section 3). Non-message events are ignored.
        prior: the earlier summary of the same session (prior state), or ``None``.
        format: ``"sections"`` (Coding Code's context service) or ``"task-state"``
            (NeoCode's compact protocol).
        max_chars: the budget of the summary text, in characters. For ``task-state`` it
            bounds the display summary (``max_summary_chars`` of NeoCode's compact protocol,
            default 1200); for ``sections`` the whole text.
        instructions: the user's own focus for this summary ("" for none).
        pinned_constraints: user constraints carried into every summary, verbatim.
        first_request: the session's first request as the user typed it ("" when unknown):
            it is pinned, so it is not among ``messages``, yet every summary states it.
        max_tokens: the budget of the whole summary text in tokens, task-state JSON included
            (``None``: only ``max_chars``), issue 15 point 4.
        latest_request: the session's newest request the user typed, ``(turn label, text)``
            such as ``("T7", "...")``, when the caller knows it (it may be in the kept tail,
            after ``messages``), else ``None``.
        later: the messages kept after ``messages`` (the kept tail), in file order, in the
            shape of ``messages``; read, never summarized: they say what became of the span
            (a failure of the span that a later run of the same command passed is not
            unresolved; the agent that resumes sees those messages). Empty when nothing is
            kept after the span or the caller does not say.

    Raises:
        UsageError: an unknown format or a budget below 1 (a configuration mistake).
    """

    messages: Sequence[Mapping[str, Any]]
    prior: SummaryResult | None = None
    format: SummaryFormat = "sections"
    max_chars: int = DEFAULT_MAX_SUMMARY_CHARS
    instructions: str = ""
    pinned_constraints: Sequence[str] = ()
    first_request: str = ""
    latest_request: tuple[str, str] | None = None
    max_tokens: int | None = None
    later: Sequence[Mapping[str, Any]] = ()

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise UsageError(
                f"unknown summary format {self.format!r}; expected one of " + ", ".join(FORMATS)
            )
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UsageError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if self.max_chars < 1:
            raise UsageError(f"max_chars must be at least 1, got {self.max_chars}")


@runtime_checkable
class Summarizer(Protocol):
    """Anything that writes a summary for a :class:`SummaryRequest`.

    Attributes:
        name: the value recorded as the SummaryEvent's ``model`` (``"extractive"``, or a
            litellm model name such as ``"openai/gpt-4o-mini"``).
    """

    name: str

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request.messages`` in ``request.format``, merging ``request.prior``.

        Returns a result whose ``text`` validates with its format's validator.

        Raises:
            SummarizerError: the summary could not be produced or did not validate.
        """
        ...
