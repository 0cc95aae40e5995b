"""``eval --judge MODEL``: probe questions answered from the compacted context, graded 0-5.

The method and its scale are those of Factory's published probe-based evaluation of
context compression (issue 16 quotes its artifact-trail scores), so results compare: after
a compaction, the agent is asked questions of four types, and a judge model grades each
answer from 0 to 5 on six dimensions.

Question types (:data:`QUESTION_TYPES`), each built from the probes of the original
messages (:mod:`compactctl.evaluate.probes`), which are also the judge's reference:

- ``recall``: the original request, and the errors met along the way;
- ``artifact``: the files read or changed, and the commands run;
- ``continuation``: what is still open, and what to do next;
- ``decision``: what was decided, and the constraints the next steps must respect.

Dimensions (:data:`DIMENSIONS`, JSON keys in camelCase): accuracy, context awareness,
artifact trail, completeness, continuity, instruction following.

Calls: for each question, one to the answering model (``--answer-model``, default the judge
model) with the effective context rendered as text
(:func:`compactctl.summarize.litellm.render_transcript`: tool outputs clipped to their head
and tail) and fitted to its input window (:func:`fit_context`: the middle goes, the first
request or summary and the newest messages stay), and the question; then one to the judge
with the question, the reference facts and the answer. Eight calls per file, each through
the summarizer's call path (:meth:`compactctl.summarize.litellm.LiteLLMSummarizer.complete`:
litellm's retries, its errors mapped to exit codes). Everything sent is redacted first
(:func:`compactctl.summarize.redact.redact`), unless ``redact`` is off. litellm is imported
on the first call only; tests answer through ``mock_response``, never the network.

A judge that fails does not fail the file (:func:`judge_entry`): its entry keeps the probe
results and gives the judge's error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compactctl.errors import SummarizerError, UsageError
from compactctl.evaluate.probes import Probe
from compactctl.model import Message

if TYPE_CHECKING:
    from compactctl.summarize.litellm import LiteLLMSummarizer

__all__ = [
    "DIMENSIONS",
    "QUESTION_TYPES",
    "JudgeError",
    "JudgeOptions",
    "JudgeReport",
    "fit_context",
    "judge_entry",
    "judge_session",
    "judge_table",
    "questions",
]

QUESTION_TYPES: dict[str, tuple[str, tuple[str, ...]]] = {
    "recall": (
        "What did the user originally ask for, and which errors did we run into along the "
        "way? Quote error messages and ticket ids exactly.",
        ("first_request", "error", "identifier"),
    ),
    "artifact": (
        "Which files have we read, created or changed, and which commands did we run? "
        "Give exact paths and command lines.",
        ("file_path", "command"),
    ),
    "continuation": (
        "What is still open, and what should we do next? List the pending tasks and the "
        "latest request.",
        ("latest_request", "pending_task"),
    ),
    "decision": (
        "Which decisions did we make, and which constraints did the user set that the next "
        "steps must respect?",
        ("decision", "user_constraint"),
    ),
}
"""Each question type: the question asked, and the probe kinds that are its reference."""

DIMENSIONS: dict[str, str] = {
    "accuracy": "the facts in the answer are correct (paths, commands, errors, names)",
    "contextAwareness": "the answer reflects the state of the session as it is now",
    "artifactTrail": "the files and commands touched are named, exactly",
    "completeness": "nothing in the reference that answers the question is missing",
    "continuity": "an agent could continue the work from this answer alone",
    "instructionFollowing": "the user's constraints and requests are respected",
}
"""The six dimensions a judge grades 0-5 (Factory's), camelCase as the JSON report names
them, with the one-line rubric the judge is given."""

REFERENCE_ITEMS = 40
"""At most this many reference facts of each question go to the judge (first ones first)."""


class JudgeError(SummarizerError):
    """The answering or the judging model failed, or the judge's answer has no valid
    scores (exit code 3)."""


@dataclass(frozen=True)
class JudgeOptions:
    """Options of ``--judge``.

    Attributes:
        model: the judge, a litellm model name (``openai/gpt-4o-mini``, ...).
        answer_model: the model that answers from the compacted context (``None``: the
            judge model).
        redact: redact secrets from everything sent (on by default).
        timeout: seconds per request. num_retries: litellm's retries with backoff.
        completion_kwargs: extra keyword arguments for ``litellm.completion`` (``api_base``;
            tests pass ``mock_response``).
        max_input_tokens: the answering model's input window in tokens (``None``: litellm's
            model table, as for ``--model``; :meth:`~compactctl.summarize.litellm.
            LiteLLMSummarizer.prompt_budget`).
    """

    model: str
    answer_model: str | None = None
    redact: bool = True
    timeout: float = 120.0
    num_retries: int = 2
    completion_kwargs: Mapping[str, Any] = field(default_factory=dict)
    max_input_tokens: int | None = None


@dataclass
class JudgeReport:
    """The judge's grades of one file.

    Attributes:
        model, answer_model: the judge and the answering model.
        graded: per question ``{"type", "question", "answer", "scores": {DIMENSION: 0-5},
            "rationale"}``.
        context_omitted: messages of the effective context left out of the answering
            prompt to fit the answering model's window (:func:`fit_context`; 0: none).
    """

    model: str
    answer_model: str
    graded: list[dict[str, Any]]
    context_omitted: int = 0

    def scores(self) -> dict[str, float]:
        """The mean grade of each dimension over the questions (2 decimals)."""
        return {
            d: round(sum(q["scores"][d] for q in self.graded) / len(self.graded), 2)
            for d in DIMENSIONS
        }

    def to_json(self) -> dict[str, Any]:
        """``{"model", "answerModel", "scores": {DIMENSION: mean}, "overall", "byType":
        {TYPE: {DIMENSION: grade}}, "contextOmitted", "questions": [...]}``."""
        scores = self.scores()
        return {
            "model": self.model,
            "answerModel": self.answer_model,
            "scores": scores,
            "overall": round(sum(scores.values()) / len(scores), 2),
            "byType": {q["type"]: q["scores"] for q in self.graded},
            "contextOmitted": self.context_omitted,
            "questions": self.graded,
        }


def questions(probes: Sequence[Probe]) -> list[tuple[str, str, list[str]]]:
    """``(type, question, reference facts)`` for each of :data:`QUESTION_TYPES`, the
    reference being the texts of the probes of its kinds (at most :data:`REFERENCE_ITEMS`).

    >>> qs = questions([Probe("file_path", "src/a.py", 3, 1)])
    >>> [(t, ref) for t, _, ref in qs]
    [('recall', []), ('artifact', ['file_path: src/a.py']), ('continuation', []), ('decision', [])]
    """
    out = []
    for qtype, (question, kinds) in QUESTION_TYPES.items():
        ref = [f"{p.kind}: {p.text}" for p in probes if p.kind in kinds][:REFERENCE_ITEMS]
        out.append((qtype, question, ref))
    return out


def _model(
    name: str, options: JudgeOptions, window: int | None = None, option: str = "--judge"
) -> LiteLLMSummarizer:
    """A model to call: the summarizer's client (its :meth:`~compactctl.summarize.litellm.
    LiteLLMSummarizer.complete` is the one call path: redaction as sent, retries, errors).
    ``option``: the option that named it (``--judge``, ``--answer-model``), which its
    configuration errors name (a missing key: which one)."""
    from compactctl.summarize.litellm import LiteLLMSummarizer

    same = ("timeout", "num_retries", "completion_kwargs", "redact")  # the same call options
    kwargs = {k: getattr(options, k) for k in same}
    return LiteLLMSummarizer(name, max_input_tokens=window, option=option, **kwargs)


def _call(model: LiteLLMSummarizer, messages: list[dict[str, str]]) -> str:
    """One call of ``model``; its failures as :class:`JudgeError` (``--judge`` named).

    Raises:
        ContextTooLong: the model's context-length error (the caller fits the context again).
        UsageError: a configuration problem (authentication, unknown model, missing key).
        JudgeError: any other failure, or an empty answer.
    """
    from compactctl.summarize.litellm import ContextTooLong

    try:
        return model.complete(messages)
    except ContextTooLong:
        raise
    except SummarizerError as exc:
        raise JudgeError(f"--judge {exc.message}") from exc


_ANSWER_SYSTEM = (
    "You are an AI coding agent continuing a session. Everything you know about it is the "
    "context below (earlier parts may have been replaced by a summary). Answer the user's "
    "question from that context only, precisely and briefly; say what you do not know."
)

_JUDGE_SYSTEM = (
    "You grade how well an AI agent remembers its own session after its context was "
    "compacted. You get a question, the reference facts taken from the full original "
    "session, and the agent's answer. Grade the answer from 0 (absent or wrong) to 5 "
    "(complete and exact) on each dimension:\n"
    + "\n".join(f"- {d}: {rubric}" for d, rubric in DIMENSIONS.items())
    + '\nAnswer with one JSON object and nothing else: {"scores": {'
    + ", ".join(f'"{d}": N' for d in DIMENSIONS)
    + '}, "rationale": "one sentence"}.'
)


def parse_grades(answer: str) -> tuple[dict[str, int], str]:
    """The judge's ``(scores, rationale)``: each of :data:`DIMENSIONS` an integer 0-5.

    The first JSON object of the answer is read (:meth:`json.JSONDecoder.raw_decode` from
    the first ``{``, else from the next ``{`` when that one starts no valid JSON): text
    around it, such as prose, a Markdown fence or a later ``{0..5}``, is ignored. Scores may
    be at the top level or under ``"scores"``; a fraction is rounded to the nearest grade
    (2.6 is 3). A number outside 0..5 is refused, not clamped: the judge did not follow the
    scale, so its grades cannot be read as 0-5 grades (9 is no 5).

    >>> parse_grades('```json\\n{"scores": {"accuracy": 4, "contextAwareness": 3, '
    ...              '"artifactTrail": 5, "completeness": 2.6, "continuity": 1, '
    ...              '"instructionFollowing": 0}, "rationale": "ok"}\\n```')
    ({'accuracy': 4, 'contextAwareness': 3, 'artifactTrail': 5, 'completeness': 3, \
'continuity': 1, 'instructionFollowing': 0}, 'ok')
    >>> parse_grades('{"accuracy": 9, "contextAwareness": 3, "artifactTrail": 5, '
    ...              '"completeness": 2, "continuity": 1, "instructionFollowing": 0}')
    Traceback (most recent call last):
    ...
    compactctl.evaluate.judge.JudgeError: the judge graded accuracy 9, outside the scale 0-5: \
'{"accuracy": 9, "contextAwareness": 3, "artifactTrail": 5, "completeness": 2, "continuity": \
1, "instructionFollowing": 0}'

    Raises:
        JudgeError: no JSON object; a dimension missing, not a number, or outside 0..5 (the
            message names the dimension and the value).
    """
    doc = _first_object(answer)
    if doc is None:
        raise JudgeError(f"the judge answered no JSON object: {answer[:200]!r}")
    scores = doc.get("scores", doc)
    grades: dict[str, int] = {}
    for dim in DIMENSIONS:
        snake = re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), dim)
        value = scores.get(dim, scores.get(snake)) if isinstance(scores, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise JudgeError(f"the judge gave no number for {dim}: {answer[:200]!r}")
        if not 0 <= value <= 5:
            raise JudgeError(
                f"the judge graded {dim} {value}, outside the scale 0-5: {answer[:200]!r}"
            )
        grades[dim] = round(value)
    rationale = doc.get("rationale")
    return grades, rationale if isinstance(rationale, str) else ""


def _first_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (``None``: none).

    >>> _first_object('Grades: {"a": {"b": 1}} (scale: {0..5})')
    {'a': {'b': 1}}
    """
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start >= 0:
        try:
            doc, _ = decoder.raw_decode(text, start)
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            return doc
        start = text.find("{", start + 1)
    return None


def _outside_secrets(probes: Sequence[Probe], originals: Iterable[Message]) -> list[Probe]:
    """The probes that hold no part of a secret, for the judge's reference facts.

    A probe found in its source message (in a text eval checks,
    :func:`~compactctl.evaluate.check.message_strings`: the content's text with its parts
    joined by ``\n``, the tool calls' names and argument strings; or in any string of its
    JSON, :func:`~compactctl.text.string_leaves`) but in none of those texts of the message
    redacted (:func:`~compactctl.summarize.redact.redact_messages`) overlapped a secret (a
    word of a password, a line of a key's body): it is left out of what is sent. A probe
    found in neither (a rendering of its source, such as a list-form command joined), or
    whose source is not among ``originals``, is kept: what is sent is redacted as a whole
    (:meth:`~compactctl.summarize.litellm.LiteLLMSummarizer.complete`)."""
    from compactctl.evaluate.check import message_strings
    from compactctl.summarize.redact import redact_messages
    from compactctl.text import string_leaves

    sources = {m.uuid: m for m in originals if m.uuid}
    texts: dict[str, tuple[list[str], list[str]]] = {}
    out = []
    for p in probes:
        source = sources.get(p.source) if p.source is not None else None
        if source is None or p.source is None:
            out.append(p)
            continue
        if p.source not in texts:
            redacted = Message(redact_messages([source.data])[0])
            texts[p.source] = (
                [*message_strings(source), *string_leaves(source.data)],
                [*message_strings(redacted), *string_leaves(redacted.data)],
            )
        plain, safe = texts[p.source]
        if any(p.text in s for s in safe) or not any(p.text in s for s in plain):
            out.append(p)
    return out


ANSWER_TOKENS = 2048
"""Tokens of the answering model's window set aside for its answer
(:data:`compactctl.summarize.litellm.MIN_ANSWER_TOKENS`, the summarizer's room)."""


def fit_context(
    messages: Sequence[Mapping[str, Any]], model: LiteLLMSummarizer, limit: int
) -> tuple[str, int]:
    """The effective context as text in at most ``limit`` tokens (``model.counter``), and
    how many of its messages were left out.

    The text is :func:`~compactctl.summarize.litellm.render_transcript`'s (tool outputs
    clipped to their head and tail). When it is longer than ``limit``, the middle goes: the
    head is kept (the messages up to the first user message, which is the summary of a
    compacted context or the first request of an uncompacted one; at most half of
    ``limit``, a longer block cut to its first part by
    :meth:`~compactctl.summarize.litellm.LiteLLMSummarizer.split_block`), then the newest
    messages that fit (the latest request, the open work; the newest block cut to its last
    part when it alone is too long), with a line in their place saying how many messages
    were left out. The probe questions ask for the first request, what is open and the
    latest request, which these ends hold; the facts of the messages left out count as
    forgotten, as they would be for an agent whose window is this small.
    """
    rendered = [block for block, _ in _transcript_blocks(messages)]
    sizes = [model.counter.count(b) + 1 for b in rendered]  # + the blank line between
    if sum(sizes) <= limit:
        return "\n\n".join(rendered), 0
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), 0)
    marker_tokens = 32
    head: list[str] = []
    used = 0
    for block, n in zip(rendered[: first_user + 1], sizes, strict=False):
        if used + n > limit // 2:
            if limit // 2 - used >= 64:
                head.append(model.split_block(block, limit // 2 - used)[0])
                used += model.counter.count(head[-1]) + 1
            break
        head.append(block)
        used += n
    tail: list[str] = []
    room = limit - used - marker_tokens
    for i in range(len(rendered) - 1, len(head) - 1, -1):
        if sizes[i] > room:
            if not tail and room >= 64:
                tail.append(model.split_block(rendered[i], room)[-1])
            break
        tail.append(rendered[i])
        room -= sizes[i]
    omitted = len(rendered) - len(head) - len(tail)
    marker = [
        f"[... {omitted} messages left out here to fit the answering model's input window: "
        "the oldest after the first request or summary ...]"
    ]
    return "\n\n".join([*head, *marker[: omitted > 0], *reversed(tail)]), omitted


def _transcript_blocks(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, bool]]:
    from compactctl.summarize.litellm import transcript_blocks

    return transcript_blocks(messages)


def judge_session(
    view: Iterable[Message],
    probes: Sequence[Probe],
    options: JudgeOptions,
    originals: Iterable[Message] = (),
) -> JudgeReport:
    """Ask the probe questions of one session and grade the answers (see the module).

    The effective context is fitted to the answering model's input window
    (:func:`fit_context`: :meth:`~compactctl.summarize.litellm.LiteLLMSummarizer.
    prompt_budget` less :data:`ANSWER_TOKENS` and the question); when the model still says
    it is too long (the count is tiktoken's, an approximation for other providers), the
    context is fitted again to half the tokens it had, once.

    Args:
        view: the effective context the answering model is given.
        probes: the probes of the original messages (the reference).
        options: models and call options.
        originals: the original messages the probes come from; with ``redact``, a probe
            that overlaps a secret in its message is not sent (:func:`_outside_secrets`).

    Raises:
        UsageError: authentication or an unknown model.
        JudgeError: a failed call, or a judge answer without valid scores.
    """
    from compactctl.summarize.litellm import ContextTooLong

    messages: list[Any] = [m.data for m in view]
    if options.redact:
        from compactctl.summarize.redact import redact_messages

        messages = redact_messages(messages)  # whole, before render_transcript clips them
        probes = _outside_secrets(probes, originals)
    answerer = _model(
        options.answer_model or options.model,
        options,
        options.max_input_tokens,
        "--answer-model" if options.answer_model else "--judge",
    )
    judge = _model(options.model, options)
    asked = [f"CONTEXT:\n\n\nQUESTION: {q}" for q, _ in QUESTION_TYPES.values()]
    fixed = max(answerer.counter.count(_ANSWER_SYSTEM + q) for q in asked) + 16
    limit = answerer.prompt_budget(ANSWER_TOKENS) - fixed
    if limit < 256:
        raise JudgeError(
            f"--judge: the input window of {answerer.name} leaves {limit} tokens for the "
            "context; use a model with a larger window"
        )
    context, omitted = fit_context(messages, answerer, limit)
    graded = []
    for qtype, question, reference in questions(probes):
        for attempt in (1, 2):
            prompt = [
                {"role": "system", "content": _ANSWER_SYSTEM},
                {"role": "user", "content": f"CONTEXT:\n{context}\n\nQUESTION: {question}"},
            ]
            try:
                answer = _call(answerer, prompt)
                break
            except ContextTooLong as exc:
                if attempt == 2:
                    raise JudgeError(f"--judge {exc.message}") from exc
                limit = min(limit, answerer.counter.count(context)) // 2
                context, omitted = fit_context(messages, answerer, limit)
        facts = "\n".join(f"- {r}" for r in reference) or "- (none of this kind in the session)"
        graded_by = f"QUESTION: {question}\n\nREFERENCE FACTS:\n{facts}\n\nANSWER:\n{answer}"
        verdict = _call(
            judge,
            [{"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": graded_by}],
        )
        scores, rationale = parse_grades(verdict)
        graded.append({"type": qtype, "question": question, "answer": answer,
                       "scores": scores, "rationale": rationale})  # fmt: skip
    return JudgeReport(options.model, answerer.name, graded, omitted)


def judge_entry(
    view: Iterable[Message],
    probes: Sequence[Probe],
    options: JudgeOptions,
    originals: Iterable[Message] = (),
) -> dict[str, Any]:
    """The ``judge`` of a file's ``eval --json`` entry: :meth:`JudgeReport.to_json` of
    :func:`judge_session`; when the judge fails, ``{"model", "answerModel", "error":
    {"code", "exitCode", "message"}}`` (:func:`compactctl.app.report.error_entry`: exit 3
    for a failed call or answer, 2 for a configuration problem), so that the file's probe
    results stand and the run's exit code still says what failed."""
    try:
        return judge_session(view, probes, options, originals).to_json()
    except (JudgeError, UsageError) as exc:
        from compactctl.app.report import error_entry

        answerer = options.answer_model or options.model
        return {"model": options.model, "answerModel": answerer, "error": error_entry(exc)}


def judge_table(judge: Mapping[str, Any]) -> str:
    """The judge's grades for people: one row per question type, one column per dimension,
    then the mean; or the judge's error (:func:`judge_entry`)."""
    from compactctl.app.render import table

    if "error" in judge:
        return (
            f"  judge {judge['model']} (answers: {judge['answerModel']}) failed: "
            f"{judge['error']['message']}\n  (the probe results above stand)\n"
        )
    dims = list(DIMENSIONS)
    rows: list[list[Any]] = [
        [qtype, *(float(scores[d]) for d in dims)] for qtype, scores in judge["byType"].items()
    ]
    rows.append(["mean", *(float(judge["scores"][d]) for d in dims)])
    head = f"  judge {judge['model']} (answers: {judge['answerModel']}), 0-5, overall "
    omitted = judge.get("contextOmitted")
    note = (
        f"  ({omitted} messages of the context left out to fit the answering model's window)\n"
        if omitted
        else ""
    )
    return head + f"{judge['overall']:.2f}\n" + note + table(["question", *dims], rows)
