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
and tail) and the question; then one to the judge with the question, the reference facts and
the answer. Eight calls per file. Everything sent is redacted first
(:func:`compactctl.summarize.redact.redact`), unless ``redact`` is off. litellm is imported
on the first call only; tests answer through ``mock_response``, never the network.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from compactctl.errors import SummarizerError, UsageError
from compactctl.evaluate.check import string_leaves
from compactctl.evaluate.probes import Probe
from compactctl.model import Message, without_surrogates

__all__ = [
    "DIMENSIONS",
    "QUESTION_TYPES",
    "JudgeError",
    "JudgeOptions",
    "JudgeReport",
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
    """

    model: str
    answer_model: str | None = None
    redact: bool = True
    timeout: float = 120.0
    num_retries: int = 2
    completion_kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class JudgeReport:
    """The judge's grades of one file.

    Attributes:
        model, answer_model: the judge and the answering model.
        graded: per question ``{"type", "question", "answer", "scores": {DIMENSION: 0-5},
            "rationale"}``.
    """

    model: str
    answer_model: str
    graded: list[dict[str, Any]]

    def scores(self) -> dict[str, float]:
        """The mean grade of each dimension over the questions (2 decimals)."""
        return {
            d: round(sum(q["scores"][d] for q in self.graded) / len(self.graded), 2)
            for d in DIMENSIONS
        }

    def to_json(self) -> dict[str, Any]:
        """``{"model", "answerModel", "scores": {DIMENSION: mean}, "overall", "byType":
        {TYPE: {DIMENSION: grade}}, "questions": [...]}``."""
        scores = self.scores()
        return {
            "model": self.model,
            "answerModel": self.answer_model,
            "scores": scores,
            "overall": round(sum(scores.values()) / len(scores), 2),
            "byType": {q["type"]: q["scores"] for q in self.graded},
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


def _complete(model: str, messages: list[dict[str, str]], options: JudgeOptions) -> str:
    """One ``litellm.completion`` call; the answer's text.

    Raises:
        UsageError: authentication or an unknown model (a configuration problem).
        JudgeError: any other failure, or an empty answer.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # its "Give Feedback" banner goes to stdout
    messages, _ = without_surrogates(messages)  # else UTF-8 encoding fails before sending
    kwargs: dict[str, Any] = {"temperature": 0, **options.completion_kwargs}
    try:
        response = litellm.completion(
            model=model,
            messages=messages,
            timeout=options.timeout,
            num_retries=options.num_retries,
            **kwargs,
        )
        content = response.choices[0].message.content
    except (litellm.exceptions.AuthenticationError, litellm.exceptions.NotFoundError) as exc:
        raise UsageError(
            f"--judge model {model}: {type(exc).__name__}. Check the model name and the "
            "provider's API key variable (e.g. OPENAI_API_KEY)"
        ) from exc
    except Exception as exc:  # litellm maps provider errors onto its own types
        raise JudgeError(f"--judge model {model} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(content, str) or not content.strip():
        raise JudgeError(f"--judge model {model} returned an empty answer")
    return content


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

_OBJECT_RE = re.compile(r"\{.*\}", re.DOTALL)


def parse_grades(answer: str) -> tuple[dict[str, int], str]:
    """The judge's ``(scores, rationale)``: each of :data:`DIMENSIONS` an integer 0-5.

    The first ``{...}`` of the answer is read (text around it, such as a Markdown fence,
    is ignored); scores may be at the top level or under ``"scores"``; numbers are rounded
    and clamped to 0..5.

    >>> parse_grades('```json\\n{"scores": {"accuracy": 4, "contextAwareness": 3, '
    ...              '"artifactTrail": 5, "completeness": 2.6, "continuity": 9, '
    ...              '"instructionFollowing": 0}, "rationale": "ok"}\\n```')
    ({'accuracy': 4, 'contextAwareness': 3, 'artifactTrail': 5, 'completeness': 3, \
'continuity': 5, 'instructionFollowing': 0}, 'ok')

    Raises:
        JudgeError: no JSON object, or a dimension missing or not a number.
    """
    match = _OBJECT_RE.search(answer)
    try:
        doc = orjson.loads(match.group(0)) if match else None
    except orjson.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict):
        raise JudgeError(f"the judge answered no JSON object: {answer[:200]!r}")
    scores = doc.get("scores", doc)
    grades: dict[str, int] = {}
    for dim in DIMENSIONS:
        snake = re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), dim)
        value = scores.get(dim, scores.get(snake)) if isinstance(scores, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise JudgeError(f"the judge gave no number for {dim}: {answer[:200]!r}")
        grades[dim] = max(0, min(5, round(value)))
    rationale = doc.get("rationale")
    return grades, rationale if isinstance(rationale, str) else ""


def _prepare(text: str, options: JudgeOptions) -> str:
    if not options.redact:
        return text
    from compactctl.summarize.redact import redact

    return redact(text)


def _outside_secrets(probes: Sequence[Probe], originals: Iterable[Message]) -> list[Probe]:
    """The probes that hold no part of a secret: a probe is a substring of its source
    message, so one that is not a substring of that message redacted overlapped a secret
    (a word of a password, a line of a key's body) and is left out of what is sent. A
    probe whose source is not among ``originals`` is kept (its text is redacted later)."""
    from compactctl.summarize.redact import redact_messages

    sources = {m.uuid: m.data for m in originals if m.uuid}
    safe: dict[str, list[str]] = {}
    out = []
    for p in probes:
        if p.source is None or p.source not in sources:
            out.append(p)
            continue
        if p.source not in safe:
            safe[p.source] = list(string_leaves(redact_messages([sources[p.source]])[0]))
        if any(p.text in s for s in safe[p.source]):
            out.append(p)
    return out


def judge_session(
    view: Iterable[Message],
    probes: Sequence[Probe],
    options: JudgeOptions,
    originals: Iterable[Message] = (),
) -> JudgeReport:
    """Ask the probe questions of one session and grade the answers (see the module).

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
    from compactctl.summarize.litellm import render_transcript

    messages: list[Any] = [m.data for m in view]
    if options.redact:
        from compactctl.summarize.redact import redact_messages

        messages = redact_messages(messages)  # whole, before render_transcript clips them
    context = _prepare(render_transcript(messages), options)
    if options.redact:
        probes = _outside_secrets(probes, originals)
    answerer = options.answer_model or options.model
    graded = []
    for qtype, question, reference in questions(probes):
        answer = _complete(
            answerer,
            [
                {"role": "system", "content": _ANSWER_SYSTEM},
                {"role": "user", "content": f"CONTEXT:\n{context}\n\nQUESTION: {question}"},
            ],
            options,
        )
        facts = "\n".join(f"- {r}" for r in reference) or "- (none of this kind in the session)"
        prompt = f"QUESTION: {question}\n\nREFERENCE FACTS:\n{facts}\n\nANSWER:\n{answer}"
        verdict = _complete(
            options.model,
            [
                {"role": "system", "content": _JUDGE_SYSTEM},
                {"role": "user", "content": _prepare(prompt, options)},
            ],
            options,
        )
        scores, rationale = parse_grades(verdict)
        graded.append({"type": qtype, "question": question, "answer": answer,
                       "scores": scores, "rationale": rationale})  # fmt: skip
    return JudgeReport(options.model, answerer, graded)


def judge_table(judge: Mapping[str, Any]) -> str:
    """The judge's grades for people: one row per question type, one column per dimension,
    then the mean."""
    from compactctl.app.render import table

    dims = list(DIMENSIONS)
    rows: list[list[Any]] = [
        [qtype, *(float(scores[d]) for d in dims)] for qtype, scores in judge["byType"].items()
    ]
    rows.append(["mean", *(float(judge["scores"][d]) for d in dims)])
    head = f"  judge {judge['model']} (answers: {judge['answerModel']}), 0-5, overall "
    return head + f"{judge['overall']:.2f}\n" + table(["question", *dims], rows)
