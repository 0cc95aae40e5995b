"""The built-in extractive summarizer: offline, deterministic, free (docs/design.md section 5).

:class:`ExtractiveSummarizer` writes no new prose: it copies facts out of the transcript with
regular expressions and a few token rules, and lays them out in either summary format of
:mod:`compactctl.summarize.summary_format`. Same request, same bytes out: no clock, no
randomness, no model, no network.

What it collects, in one pass over the messages:

- every user message (shortened: the opening ~200 characters and the last sentence; any
  sentence stating a constraint, "do not ...", "must ...", "keep ...", 不要, 必须, 保留 ...,
  is kept in full and also listed as a user constraint, without its label; one that refers
  back, "Without the flag ...", with what the sentence before it names);
- the ledger, copied in full and never sampled away:
  files read, edited, written, created or deleted, from tool-call arguments (``path``,
  ``file_path``, ``filePath``, ``filename`` ...), from shell commands (``cat x``,
  ``sed -n .. x``, ``grep p x``, ``> x``, ``pytest x`` ...) and from ``apply_patch``
  headers (``*** Update File: x``); every shell command (``command``/``cmd`` arguments) with
  its outcome (``Exit code: N``, ``exit status N``, JSON ``exit_code``, ``isError``, pytest's
  ``N failed, M passed``); every error: failed tool results (``E   Exc: ...`` lines,
  ``FAILED tests/...``, final exception lines of tracebacks, ``error:`` lines), and
  ``ERROR``/``FATAL`` log lines in other outputs, with the next thing the assistant said;
- decisions the assistant stated ("Decision:", "instead of", "because", "rather than",
  "so that", "I'll", 决定, 因为, 而不是 ...), ranked: explicit > reasoned > stated intent;
- pending tasks: open items of the newest plan (``update_plan``/``TodoWrite``/todo tools),
  unchecked ``- [ ]`` items of the newest status list, sentences such as "not now",
  "later", "still need to", "TODO", 待办, 还需要, 不是现在, and a user message left
  unanswered; done items (completed plan steps, ``- [x]``) remove matching pending ones;
- key identifiers (ticket ids like ``ABC-123``, failing test names, snake_case, CamelCase,
  SCREAMING_CASE and backticked spans) from user messages and errors, ranked: tickets,
  then failing tests, then by frequency;
- the current work (the last request, the last assistant message and its tool calls) and
  the next step the assistant stated ("Next step: ...", "Next, I will ...", 下一步).

Budget (``request.max_chars``, in characters): the text is rendered at decreasing levels of
detail until it fits; the ledger (file paths, commands, error lines, user constraints and
pending tasks) is never shortened, and wins over the budget when it alone is longer (a
warning says so). Repeats are folded: a command run N times is one line ``×N``, a failure
seen again is one entry, a constraint restated (even inside a longer sentence) is listed
once. See :mod:`~compactctl.summarize.extractive.render`.

Prior state: ``request.prior`` (an earlier summary, from any summarizer) is parsed back into
facts and merged, prior first; see :mod:`~compactctl.summarize.extractive.prior`.

The messages kept after the span (``request.later``) are read only to settle the span's
failures (a failure a kept run fixes is resolved later, not unresolved); nothing else of
them goes into the summary, whose reader has them whole.

Messages carrying ``summaryOf`` (an earlier summary in the view) are skipped, never read as
conversation (docs/design.md section 3).

All of it is heuristic; see the summary's ``<analysis>`` block for the counts it is based on.
Memory: it reads the whole span (a summarizer needs the whole session, docs/style.md habit 1), and
holds only the extracted facts besides.

The package, in the order of a request:

- :mod:`~compactctl.summarize.extractive.prose`: text helpers (sentences, one-line forms,
  comparison keys);
- :mod:`~compactctl.summarize.extractive.intent`: constraints, deferrals, decisions, next
  steps;
- :mod:`~compactctl.summarize.extractive.tools`: tool calls, shell commands, file paths;
- :mod:`~compactctl.summarize.extractive.failures`: exit codes, pytest counts, error lines;
- :mod:`~compactctl.summarize.extractive.ledger`: the facts of a span;
- :mod:`~compactctl.summarize.extractive.extract`: the one pass that fills them;
- :mod:`~compactctl.summarize.extractive.prior`: an earlier summary read back and merged;
- :mod:`~compactctl.summarize.extractive.render`: both formats, within the budget.
"""

from __future__ import annotations

from compactctl.summarize import SummaryRequest, SummaryResult
from compactctl.summarize.extractive import intent, tools
from compactctl.summarize.extractive.failures import ERROR_LINES_PER_RESULT
from compactctl.summarize.extractive.prose import LEDGER_LINE_MAX, dedupe, norm, one_line
from compactctl.summarize.summary_format import parse_task_state, validate_sections

# The extractor, the ledger, the prior reader and the renderer are imported when a summary
# is made (:meth:`ExtractiveSummarizer._summarize`) or one of their names is asked for
# (:func:`__getattr__`): ``eval`` reads its probes with ``failures``, ``intent``, ``prose``
# and ``tools`` alone, and need not import the rest (about 30 ms).

__all__ = [
    "ERROR_LINES_PER_RESULT",
    "LEDGER_LINE_MAX",
    "MODEL_NAME",
    "ExtractiveSummarizer",
]

#: The ``model`` recorded in a SummaryEvent written by this summarizer (docs/design.md
#: section 3).
MODEL_NAME = "extractive"


class ExtractiveSummarizer:
    """The built-in summarizer: offline, deterministic, free (docs/design.md section 5).

    Implements :class:`~compactctl.summarize.Summarizer`. It keeps no state between
    calls; one instance may serve any number of requests, from any thread.

    >>> request = SummaryRequest(messages=[
    ...     {"role": "user", "turnId": 1, "content": "Fix tests/test_a.py. Do not add deps."}],
    ...     prior=None, format="sections", max_chars=4000)
    >>> result = ExtractiveSummarizer().summarize(request)
    >>> "Constraint: Do not add deps." in result.text, result.model
    (True, 'extractive')
    """

    name = MODEL_NAME

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request.messages`` in ``request.format`` within ``request.max_chars``.

        Returns a :class:`SummaryResult` whose text validates with its format's validator.
        For ``sections`` the text may exceed ``max_chars`` only when the ledger alone does
        (a warning says so); for ``task-state`` the display summary stays within
        ``max_chars`` unless its five headings alone do not fit.

        Raises:
            SummaryFormatError: never for valid input; raised if the result failed its own
                validation (a bug), so that nothing invalid is appended.
        """
        try:
            return self._summarize(request)
        finally:
            _clear_caches()

    def _summarize(self, request: SummaryRequest) -> SummaryResult:
        from compactctl.summarize.extractive.extract import Extractor
        from compactctl.summarize.extractive.prior import facts_from_prior, merge
        from compactctl.summarize.extractive.render import (
            render_as_sections,
            render_as_task_state,
        )

        facts = Extractor(
            request.messages, request.first_request, request.latest_request, request.later
        ).run()
        if request.prior is not None:
            facts = merge(facts_from_prior(request.prior), facts)
            if request.first_request.strip():
                facts.primary = [request.first_request.strip()]
            if request.latest_request is not None:
                facts.latest_label, facts.latest_request = request.latest_request
        pinned = [one_line(c) for c in request.pinned_constraints if c.strip()]
        facts.constraints = dedupe(pinned + _not_restated(facts.constraints, pinned), similar=True)
        if request.format == "task-state":
            text, state, warnings = render_as_task_state(facts, request)
            parse_task_state(text)
            return SummaryResult(
                text=text,
                format="task-state",
                task_state=state,
                model=MODEL_NAME,
                warnings=warnings,
            )
        text, warnings = render_as_sections(facts, request)
        validate_sections(text)
        return SummaryResult(
            text=text, format="sections", task_state=None, model=MODEL_NAME, warnings=warnings
        )


def _not_restated(constraints: list[str], pinned: list[str]) -> list[str]:
    """``constraints`` without those that state the rule of a pinned constraint listed with
    what it refers to ("RULE (re: ...)"): the form an earlier summary may hold, the rule
    joined with the sentence before it ("Next, add a `--since-days` option. RULE"), which
    lists a task as a constraint (see
    :func:`~compactctl.summarize.extractive.intent.constraint_sentences`).

    >>> _not_restated(["Add a `-x` flag. Without the flag nothing changes.", "Do not add deps."],
    ...               ["Without the flag nothing changes. (re: `-x`)"])
    ['Do not add deps.']
    """
    rules = [norm(p.split(" (re: ", 1)[0]) for p in pinned if " (re: " in p]
    rules = [r for r in rules if r]
    return [c for c in constraints if not any(r in norm(c) for r in rules)]


def _clear_caches() -> None:
    """Empty the caches keyed by transcript text (commands, user messages): they serve one
    request, and must not keep a long run's texts alive (a command can be a large patch).
    Clearing while another thread summarizes costs that thread time, never a wrong result."""
    tools.clear_caches()
    intent.clear_caches()
