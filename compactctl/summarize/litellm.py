"""A summarizer that calls any model litellm supports (``--model``). Imports litellm lazily.

The prompt asks for the chosen format (the ten sections of Coding Code's context service, or
the task-state JSON of NeoCode's compact protocol), gives the earlier summary as *prior state*
(never as conversation), the user's focus (``--instructions``) and the user constraints to
carry. The answer is validated with the format's validator; an invalid answer is an error and
nothing is appended. A display summary over ``max_chars`` is cut at a bullet boundary.

litellm is imported on the first call only (it takes seconds), with
``LITELLM_LOCAL_MODEL_COST_MAP=True`` unless the user set it, so the import does not fetch
the model cost map from the network.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from compactctl.errors import SummarizerError, UsageError
from compactctl.model import message_text
from compactctl.summarize import SummaryRequest, SummaryResult
from compactctl.summarize.redact import redact, redact_request
from compactctl.summarize.summary_format import (
    DISPLAY_SECTIONS,
    SECTIONS,
    TASK_STATE_FIELDS,
    parse_task_state,
    render_task_state,
    truncate_at_bullet,
    validate_sections,
)

__all__ = ["ContextTooLong", "LiteLLMSummarizer", "build_prompt", "render_transcript"]

TOOL_OUTPUT_CHARS = 2000
"""A tool output in the prompt keeps its first and last ``TOOL_OUTPUT_CHARS // 2`` chars."""


class ContextTooLong(SummarizerError):
    """The model said the prompt is longer than its context window (litellm
    ``ContextWindowExceededError``); the caller may retry in chunks (reactive compaction)."""


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} chars omitted ...]\n{text[-half:]}"


def render_transcript(messages: Sequence[Mapping[str, Any]]) -> str:
    """The span as plain text for the prompt: one block per message, tool calls inline.

    Tool outputs are clipped to ``TOOL_OUTPUT_CHARS`` (head and tail kept); user and
    assistant text is kept whole.
    """
    out: list[str] = []
    for m in messages:
        role = str(m.get("role", "?"))
        turn = m.get("turnId")
        prefix = f"[turn {turn}] " if isinstance(turn, int) else ""
        text = message_text(m.get("content"))
        if role == "tool":
            name = m.get("toolName") or "tool"
            flag = " (error)" if m.get("isError") else ""
            out.append(f"{prefix}TOOL RESULT {name}{flag}:\n{_clip(text, TOOL_OUTPUT_CHARS)}")
            continue
        block = f"{prefix}{role.upper()}: {text}".rstrip()
        calls = m.get("toolCalls")
        if isinstance(calls, list):
            for c in calls:
                if isinstance(c, dict):
                    args = c.get("arguments")
                    rendered = args if isinstance(args, str) else orjson.dumps(args).decode()
                    block += f"\n  -> call {c.get('name')} {rendered}"
        out.append(block)
    return "\n\n".join(out)


_SECTIONS_SPEC = (
    "Answer with an <analysis> block (your reasoning, brief) followed by a <summary> block "
    "that has exactly these ten Markdown sections, in this order, each a heading `### Name` "
    "followed by `- ` bullets:\n"
    + "\n".join(f"### {s}" for s in SECTIONS)
    + "\nKeep every file path, command (with its exit status) and error line verbatim. "
    "Under All User Messages, list every user message (shortened). Write `- none` in a "
    "section with nothing to say."
)

_TASK_STATE_SPEC = (
    "Answer with ONE JSON object and nothing else: "
    '{"task_state": {...}, "display_summary": "..."}. task_state has exactly the keys '
    + ", ".join(TASK_STATE_FIELDS)
    + " (goal and next_step are strings, the others lists of strings) and no other key; it "
    "is the complete durable task state after this compaction, not a patch. "
    "display_summary starts with the line [compact_summary], then the sections "
    + ", ".join(f"{s}:" for s in DISPLAY_SECTIONS)
    + " each followed by at least one `- ` bullet."
)


def build_prompt(request: SummaryRequest) -> list[dict[str, str]]:
    """The chat messages sent to the model for ``request`` (system + one user message)."""
    spec = _SECTIONS_SPEC if request.format == "sections" else _TASK_STATE_SPEC
    system = (
        "You compact the transcript of an AI coding agent's session so the agent can continue "
        "the work from your summary alone. Keep what the work needs: the user's requests and "
        "constraints, files touched, commands run, errors and their fixes, decisions and "
        "why, open tasks, the current work and the next step. Drop tool output details, "
        "repeated background and resolved dead ends.\n\n" + spec
    )
    parts: list[str] = []
    if request.prior is not None:
        parts.append(
            "PRIOR STATE (the summary of everything before the span below; merge it, do not "
            "treat it as conversation):\n" + request.prior.text
        )
    if request.pinned_constraints:
        parts.append(
            "USER CONSTRAINTS (carry each into the summary verbatim):\n"
            + "\n".join(f"- {c}" for c in request.pinned_constraints)
        )
    if request.instructions:
        parts.append("FOCUS FROM THE USER:\n" + request.instructions)
    parts.append(f"Keep the summary under {request.max_chars} characters.")
    parts.append("TRANSCRIPT SPAN TO SUMMARIZE:\n" + render_transcript(request.messages))
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


class LiteLLMSummarizer:
    """Summarize with a model through ``litellm.completion``.

    Args:
        model: a litellm model name, e.g. ``"openai/gpt-4o-mini"``.
        timeout: seconds per request.
        num_retries: litellm's retries with backoff on transient errors (timeouts, 429, 5xx).
        completion_kwargs: extra keyword arguments for ``litellm.completion`` (``api_base``,
            ``temperature``; tests pass ``mock_response``).
        redact: redact secrets (:mod:`compactctl.summarize.redact`) from every text of the
            request before the prompt is built (before tool outputs are clipped), then from
            the prompt as sent.

    Raises (from :meth:`summarize`):
        ContextTooLong: the model's context-length error.
        SummarizerError: any other failure (timeout, rate limit, server error, empty or
            invalid answer); the message names the model and the cause.
    """

    def __init__(
        self,
        model: str,
        *,
        timeout: float = 120.0,
        num_retries: int = 2,
        completion_kwargs: Mapping[str, Any] | None = None,
        redact: bool = True,
    ) -> None:
        self.name = model
        self.redact = redact
        self.timeout = timeout
        self.num_retries = num_retries
        self.completion_kwargs = dict(completion_kwargs or {})

    def _complete(self, messages: list[dict[str, str]]) -> str:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        litellm.suppress_debug_info = True  # its "Give Feedback" banner goes to stdout

        kwargs: dict[str, Any] = {"temperature": 0, **self.completion_kwargs}
        try:
            response = litellm.completion(
                model=self.name,
                messages=messages,
                timeout=self.timeout,
                num_retries=self.num_retries,
                **kwargs,
            )
        except litellm.exceptions.ContextWindowExceededError as exc:
            raise ContextTooLong(f"model {self.name}: prompt too long: {_short(exc)}") from exc
        except (litellm.exceptions.AuthenticationError, litellm.exceptions.NotFoundError) as exc:
            # configuration, not a transient failure: exit 2, not counted by the breaker
            raise UsageError(
                f"model {self.name}: {type(exc).__name__}: {_short(exc)}. Check the model "
                "name and the provider's API key variable (e.g. OPENAI_API_KEY)"
            ) from exc
        except Exception as exc:  # litellm maps provider errors onto its own exception types
            if _looks_like_config(exc):
                raise UsageError(
                    f"model {self.name}: {_short(exc)}. Set the provider's API key variable "
                    "(e.g. OPENAI_API_KEY) or pass --model with a provider prefix"
                ) from exc
            raise SummarizerError(
                f"model {self.name} failed: {type(exc).__name__}: {_short(exc)}"
            ) from exc
        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            content = None
        if not isinstance(content, str) or not content.strip():
            raise SummarizerError(f"model {self.name} returned an empty answer")
        return content

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Call the model once and validate its answer (see the class docstring)."""
        if self.redact:
            # each text before the prompt clips tool outputs (a key's BEGIN line would be
            # cut off from its body), then the prompt as sent
            request = redact_request(request)
        prompt = build_prompt(request)
        if self.redact:
            prompt = [{**m, "content": redact(m["content"])} for m in prompt]
        answer = self._complete(prompt)
        try:
            if request.format == "sections":
                text = _extract_sections(answer)
                validate_sections(text)
                text = truncate_at_bullet(text, request.max_chars)
                return SummaryResult(text=text, format="sections", task_state=None, model=self.name)
            parsed = parse_task_state(answer)
            display = truncate_at_bullet(parsed.display_summary, request.max_chars)
            text = render_task_state(parsed.task_state, display)
            return SummaryResult(
                text=text, format="task-state", task_state=parsed.task_state, model=self.name
            )
        except SummarizerError as exc:
            raise SummarizerError(
                f"model {self.name} answered an invalid {request.format} summary: {exc}"
            ) from exc


def _extract_sections(answer: str) -> str:
    """The ``<analysis>`` + ``<summary>`` part of an answer (text around them dropped)."""
    start = answer.find("<analysis>")
    if start < 0:
        start = answer.find("<summary>")
    end = answer.rfind("</summary>")
    if start >= 0 and end > start:
        return answer[start : end + len("</summary>")]
    return answer.strip()


def _looks_like_config(exc: BaseException) -> bool:
    """A missing key or unknown provider (litellm raises plain exceptions for some)."""
    text = str(exc).lower()
    return any(
        s in text
        for s in ("api_key", "api key", "missing credentials", "llm provider not provided")
    )


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
