"""Test doubles with queued answers, in the style of the ``llm`` test model: enqueue what the
next calls answer, run the code, then look at the requests it made.

- :class:`FakeSummarizer` implements :class:`compactctl.summarize.Summarizer`: the code under
  test gets it instead of the extractive or the litellm summarizer.
- :class:`FakeModel` replaces ``litellm.completion`` for one test (``monkeypatch``): the real
  litellm call path runs, answered with ``mock_response`` (no network), so the litellm
  summarizer and the eval judge are tested as they run.

An answer is a text, or an exception instance, which the call raises. When the queue is empty
the ``default`` answer is used; without one the call fails the test.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import pytest

from compactctl.summarize import SummaryRequest, SummaryResult

Answer = str | SummaryResult | BaseException
"""What a fake answers: a text (or, for :class:`FakeSummarizer`, a whole result), or an
exception instance to raise."""


class _Queue:
    """Answers in order, then ``default`` for ever (``None``: no more answers)."""

    def __init__(self, answers: tuple[Any, ...], default: Any) -> None:
        self.answers: deque[Any] = deque(answers)
        self.default = default

    def next(self, who: str) -> Any:
        if self.answers:
            return self.answers.popleft()
        if self.default is None:
            raise AssertionError(f"{who}: no answer queued")
        return self.default


class FakeSummarizer:
    """A :class:`~compactctl.summarize.Summarizer` answering from a queue.

    ``FakeSummarizer("text 1", SummarizerError("no"))`` answers the first request with
    ``"text 1"`` (as a :class:`SummaryResult` of the request's format, ``model`` = ``name``)
    and raises on the second; ``FakeSummarizer(default=SummarizerError("no"))`` always fails.
    The text is returned as given, not validated (the code under test validates it).

    Attributes:
        name: the summarizer's name (the ``model`` of its results).
        requests: every :class:`SummaryRequest` it got, in order.
    """

    def __init__(self, *answers: Answer, default: Answer | None = None, name: str = "fake"):
        self.name = name
        self.requests: list[SummaryRequest] = []
        self._queue = _Queue(answers, default)

    def enqueue(self, *answers: Answer) -> FakeSummarizer:
        """Queue answers after those already queued; returns ``self``."""
        self._queue.answers.extend(answers)
        return self

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Record ``request``; answer with the next queued answer (raise it if an exception)."""
        self.requests.append(request)
        answer = self._queue.next(f"FakeSummarizer {self.name!r}")
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, SummaryResult):
            return answer
        return SummaryResult(text=answer, format=request.format, task_state=None, model=self.name)


class FakeModel:
    """``litellm.completion`` answering from a queue, for the duration of one test.

    Each call is recorded, then passed to the real ``litellm.completion`` with
    ``mock_response`` set to the next answer (an exception instance is raised by litellm as
    a provider's error would be). Installing a second fake in one test wraps the real
    function again, not the first fake.

    Attributes:
        calls: the keyword arguments of every call, in order.
    """

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, *answers: Answer, default: Answer | None = None
    ) -> None:
        import litellm

        self.calls: list[dict[str, Any]] = []
        self._queue = _Queue(answers, default)
        real = getattr(litellm.completion, "real", litellm.completion)

        def completion(**kwargs: Any) -> Any:
            self.calls.append(kwargs)
            answer = self._queue.next("FakeModel")
            return real(**{**kwargs, "mock_response": answer})

        completion.real = real  # type: ignore[attr-defined]
        monkeypatch.setattr(litellm, "completion", completion)

    def enqueue(self, *answers: Answer) -> FakeModel:
        """Queue answers after those already queued; returns ``self``."""
        self._queue.answers.extend(answers)
        return self

    @property
    def prompts(self) -> list[list[dict[str, Any]]]:
        """The ``messages`` of every call, in order."""
        return [call["messages"] for call in self.calls]

    @property
    def models(self) -> list[str]:
        """The ``model`` of every call, in order."""
        return [call["model"] for call in self.calls]


def judge_grades(**scores: int) -> str:
    """A judge model's answer: every dimension of ``eval --judge`` graded 3, except those
    given (``judge_grades(accuracy=5)``)."""
    from compactctl.evaluate.judge import DIMENSIONS

    return json.dumps({"scores": {d: scores.get(d, 3) for d in DIMENSIONS}, "rationale": "r"})
