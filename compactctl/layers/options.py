"""The options of every layer: one frozen dataclass per layer, the only place a default lives.

:class:`RulesOptions` (Layer 1), :class:`DedupOptions` (Layer 2), :class:`MicroParams` and
:class:`CompactOptions` (Layer 3: micro compaction and summarization), :class:`TiersOptions`
(Layer 4). Each layer module re-exports its class (``compactctl.layers.dedup.DedupOptions``).

The command line fills them with :func:`compactctl.app.options.resolve`: a flag, else the
environment variable ``COMPACTCTL_<KEY>``, else the config file's ``<key>``, else the default
written here. A field's key is its name, unless its metadata names another one
(:func:`setting`); only the keys of :data:`compactctl.app.config.KNOWN_KEYS` are read from the
environment and the config file, so a field like :attr:`DedupOptions.lsh_min_items` is a
library option only. The command line's ``--help`` quotes these defaults, which is why this
module imports nothing but :mod:`compactctl.errors`: ``cli.py`` imports it at start-up.

Sources of the numbers (docs/design.md section 9): MoonHub's compactor (dedup threshold 0.6
on word 3-grams), Coding Code's context service (micro compaction at 25% of the window,
outputs of at least 120 chars, summarization at 90% of the model's maximum), NeoCode's
compact protocol (``keep_recent`` 10 messages, ``full_replace``, ``max_summary_chars`` 1200,
``input_token_threshold``, reactive compaction).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compactctl.errors import UsageError

if TYPE_CHECKING:
    from compactctl.layers.text_rules import Rule

__all__ = [
    "DEFAULT_PIN_PATTERNS",
    "SECTIONS_MAX_CHARS",
    "TASK_STATE_MAX_CHARS",
    "CompactOptions",
    "DedupOptions",
    "MicroParams",
    "RulesOptions",
    "TiersOptions",
    "UndoOptions",
    "setting",
]


def setting(default: Any, *, key: str | None, extends: bool = False) -> Any:
    """A dataclass field whose config key differs from its name.

    Args:
        default: the field's default.
        key: the config key and environment suffix (``COMPACTCTL_<KEY>``), or ``None`` for
            a field no config file or environment variable sets.
        extends: a configured value is added to the default (a tuple) instead of replacing
            it.

    >>> from dataclasses import fields
    >>> [f.metadata["config"] for f in fields(CompactOptions) if "config" in f.metadata]
    ['summary_format', 'pin_patterns']
    """
    return field(default=default, metadata={"config": key, "extends": extends})


# --- Layer 1: rules ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RulesOptions:
    """Options of the rules layer.

    Attributes:
        only: rule names to consider (``None``: all).
        skip: rule names never applied.
        roles: message roles the rules touch (pinned and summary messages never).
        by_rule: compute the report's per-rule savings (``byRule``), which applies the rules
            one at a time; ``False`` leaves ``byRule`` empty, for a run that shows no report
            (``rules -q``). The event is the same either way.
    """

    only: tuple[str, ...] | None = None
    skip: tuple[str, ...] = ()
    roles: frozenset[str] = field(
        default_factory=lambda: frozenset({"user", "assistant", "tool", "system"})
    )
    # how much the report says, not what is appended: left out of an output's fingerprint
    by_rule: bool = field(default=True, metadata={"fingerprint": False})

    def chosen(self) -> list[Rule]:
        """The rules in play, current versions, canonical order.

        Raises:
            KeyError: an unknown name in ``only`` or ``skip``.
        """
        from compactctl.layers.text_rules import RULES, get_rule

        for name in (*(self.only or ()), *self.skip):
            get_rule(name)  # raises KeyError naming the known rules
        return [
            r
            for r in RULES.values()
            if (self.only is None or r.name in self.only) and r.name not in self.skip
        ]


# --- Layer 2: dedup ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DedupOptions:
    """Options of the dedup layer.

    Attributes:
        threshold: Jaccard similarity of word 3-gram shingles at or above which two messages
            are duplicates (MoonHub's compactor: 0.6).
        scope: ``tool`` (tool outputs), ``assistant`` (assistant texts without tool calls)
            or ``all`` (both).
        min_chars: messages shorter than this (normalized chars) are ignored; 200, as the
            samples' duplicate ledger (``duplicateToolOutputs.minBytes``), and longer than
            any pointer, so a pointer never costs more than the text it replaces.
        lsh_min_items: candidate count from which MinHash LSH is used instead of all pairs.

    Raises:
        UsageError: an unknown scope, or a threshold outside (0, 1].
    """

    threshold: float = 0.6
    scope: str = "all"
    min_chars: int = 200
    lsh_min_items: int = 300

    def __post_init__(self) -> None:
        if self.scope not in {"tool", "assistant", "all"}:
            raise UsageError(f"--scope must be tool, assistant or all, not {self.scope!r}")
        if not 0.0 < self.threshold <= 1.0:
            raise UsageError(f"--threshold must be in (0, 1], not {self.threshold}")


# --- Layer 3: micro compaction and summarization -----------------------------------------------


@dataclass(frozen=True)
class MicroParams:
    """Parameters of micro compaction (all sizes in chars).

    Attributes:
        keep_turns: turns before the current one left intact (Coding Code's context service
            elides turns before ``currentTurnId - 1``, so 1).
        min_chars: outputs shorter than this are never elided (Coding Code's context
            service: 120). Not a config key: ``min_chars`` is dedup's.
        head_ratio, tail_ratio: share of the text kept at the start and the end.
        head_max, tail_max: caps on the kept head and tail.
        keep_lines, keep_chars, line_chars: bounds on the lines kept from the elided middle
            (errors and tracebacks, ``file:line`` references, test results): at most
            ``keep_lines`` lines and ``keep_chars`` chars, each line cut at ``line_chars``.
            40 lines of a compiler's or type checker's 80-120 chars fit 3,000 chars (about
            750 tokens): an elided output stays under about 4,000 chars (head 600 + tail 300
            + kept lines + markers), still a tenth of the 40k-char outputs micro compaction
            mostly meets. Not config keys.
        preserve: tool names whose outputs are never elided (config ``preserve``).
    """

    keep_turns: int = 1
    min_chars: int = setting(120, key=None)
    head_ratio: float = 0.2
    tail_ratio: float = 0.1
    head_max: int = 600
    tail_max: int = 300
    keep_lines: int = setting(40, key=None)
    keep_chars: int = setting(3000, key=None)
    line_chars: int = setting(240, key=None)
    preserve: tuple[str, ...] = ()

    def replay_params(self, image_rule: str = "anthropic") -> dict[str, Any]:
        """The ``params`` recorded in the CompactEvent (what replay needs).

        Version 2 (this one) keeps the salient lines of the elided middle and replaces old
        images by placeholders whose token counts follow ``image_rule`` (the session
        provider's, :func:`compactctl.media.media_rule_for`); version 1 events (head and
        tail only, no images) still replay as they were written.
        """
        return {
            "version": 2,
            "minChars": self.min_chars,
            "headRatio": self.head_ratio,
            "tailRatio": self.tail_ratio,
            "headMax": self.head_max,
            "tailMax": self.tail_max,
            "keepLines": self.keep_lines,
            "keepChars": self.keep_chars,
            "lineChars": self.line_chars,
            "imageRule": image_rule,
        }


DEFAULT_PIN_PATTERNS: tuple[str, ...] = (
    r"<user_instructions>",
    r"(?m)^#+ *(?:AGENTS|CLAUDE|GEMINI)\.md\b",
    r"Contents of \S*(?:AGENTS|CLAUDE|GEMINI)\.md",
    r"(?m)^--- Context from: ",
    r"(?m)^#+ *\.cursorrules\b",
)
"""Regexes marking injected instruction files as pinned: Codex's ``<user_instructions>``,
AGENTS.md, CLAUDE.md and GEMINI.md headings or ``Contents of`` blocks, Gemini CLI's
``--- Context from: FILE ---`` blocks, a ``.cursorrules`` heading. An instruction file read
through a tool is kept verbatim by the summary instead (issue 15 point 9)."""

SECTIONS_MAX_CHARS = 12000
"""Default budget of a ``sections`` summary in chars: about the 3000 tokens of tier L2
(MoonHub's compactor) at 4 chars per token."""

TASK_STATE_MAX_CHARS = 1200
"""Default budget of a task-state display summary in chars (NeoCode's compact protocol:
``max_summary_chars``)."""


@dataclass(frozen=True)
class CompactOptions:
    """Options of ``compact`` (token counts in tokens, sizes in chars, ratios 0..1).

    Attributes:
        force: run micro compaction and summarization whatever the triggers say (manual).
        reactive: the caller got a context-length error from its model: compact now and
            record ``triggerMode: "reactive"`` (NeoCode's compact protocol).
        micro_only: run micro compaction alone.
        micro_enabled: run micro compaction at all.
        micro: micro compaction parameters.
        micro_trigger: micro runs when the prompt estimate passes this share of the context
            window (Coding Code's context service: 0.25).
        summary_trigger: summarization runs past this share of the model's max input tokens
            (Coding Code's context service: 0.9).
        input_token_threshold: an absolute trigger in tokens (NeoCode's compact protocol
            ``auto_compact``, 100000 there), used alongside the ratio.
        strategy: ``keep_recent`` or ``full_replace`` (NeoCode's compact protocol).
        keep_recent: messages kept verbatim by keep_recent (NeoCode's compact protocol: 10).
        keep_recent_tokens: the kept tail's budget in tokens (issue 15 point 5): the newest
            ``keep_recent`` messages, fewer when they are over this many tokens, never a
            tool block split and never less than the newest block; a kept tool output over
            half of it is micro-compacted. ``None``: messages alone count. 8,000 is twice
            the default summary budget (``max_summary_tokens``), so that summary and tail
            together stay near 12,000 tokens, 6% of a 200k-token window.
        format: ``sections`` or ``task-state`` (config key ``summary_format``).
        max_summary_chars: summary budget in chars; ``None`` = :data:`SECTIONS_MAX_CHARS`
            for sections, :data:`TASK_STATE_MAX_CHARS` for the task-state display summary.
        max_summary_tokens: budget of the whole summary in tokens, task-state JSON included
            (issue 15 point 4: about 4,000 tokens, the L2 tier of MoonHub's compactor with
            room for the task state); the ledger is compressed before anything is cut.
        model: ``None`` or ``"extractive"`` for the built-in summarizer, ``"session"`` for
            the model the transcript records, or a litellm model name.
        instructions: the user's focus, added to the prompt.
        pin_patterns: regexes; user/system messages matching one are never summarized (the
            config key ``pin_patterns`` adds to :data:`DEFAULT_PIN_PATTERNS`).
        redact: redact secrets from the prompt sent to a model and from the summary text.
        min_saving: a compaction saving less than this share of tokens appends nothing.
        context_window: overrides the session's and litellm's context window, in tokens.
        encoding: tiktoken encoding (``None``: by model; ``"estimate"``: chars-based).
        timeout, num_retries, completion_kwargs: passed to the litellm summarizer (seconds,
            retries, extra keyword arguments).
        emit_events: print compact_start / compact_done / compact_error JSON lines on stderr.

    Raises:
        UsageError: an unknown strategy or format, a negative ``keep_recent``, or a
            ``keep_recent_tokens`` below 1.
    """

    force: bool = False
    reactive: bool = False
    micro_only: bool = False
    micro_enabled: bool = True
    micro: MicroParams = field(default_factory=MicroParams)
    micro_trigger: float = 0.25
    summary_trigger: float = 0.9
    input_token_threshold: int | None = None
    strategy: str = "keep_recent"
    keep_recent: int = 10
    keep_recent_tokens: int | None = 8000
    format: str = setting("sections", key="summary_format")
    max_summary_chars: int | None = None
    max_summary_tokens: int = 4000
    model: str | None = None
    instructions: str = ""
    pin_patterns: tuple[str, ...] = setting(DEFAULT_PIN_PATTERNS, key="pin_patterns", extends=True)
    redact: bool = True
    min_saving: float = 0.05
    context_window: int | None = None
    encoding: str | None = None
    timeout: float = 120.0
    num_retries: int = 2
    completion_kwargs: Mapping[str, Any] = field(default_factory=dict)
    emit_events: bool = False

    def __post_init__(self) -> None:
        if self.strategy not in {"keep_recent", "full_replace"}:
            raise UsageError(f"unknown strategy {self.strategy!r}; use keep_recent or full_replace")
        if self.format not in {"sections", "task-state"}:
            raise UsageError(f"unknown format {self.format!r}; use sections or task-state")
        if self.keep_recent < 0:
            raise UsageError(
                f"--keep-recent (keep_recent) must be 0 or more, not {self.keep_recent}"
            )
        if self.keep_recent_tokens is not None and self.keep_recent_tokens < 1:
            raise UsageError(
                "--keep-recent-tokens (keep_recent_tokens) must be 1 or more, "
                f"not {self.keep_recent_tokens}"
            )
        if self.max_summary_tokens < 1:
            raise UsageError(f"max_summary_tokens must be 1 or more, not {self.max_summary_tokens}")

    @property
    def summary_budget(self) -> int:
        """The summary budget in chars for the chosen format."""
        if self.max_summary_chars is not None:
            return self.max_summary_chars
        return SECTIONS_MAX_CHARS if self.format == "sections" else TASK_STATE_MAX_CHARS


# --- Layer 4: tiers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TiersOptions:
    """Options of the tiers layer.

    Attributes:
        tier: ``auto`` (:func:`~compactctl.layers.tiers.select_tier`), ``L0``, ``L1`` or
            ``L2``: the tier replay shows.
        model: rewrite L1 and L0 with this litellm model (validated), or ``None`` for the
            deterministic derivation (:func:`~compactctl.layers.tiers.derive_tiers`); config
            key ``tiers_model``.
        redact: redact secrets from the tier texts (and from what a model rewrite is sent),
            as ``compact`` does; config key ``redact``.
    """

    tier: str = "auto"
    model: str | None = setting(None, key="tiers_model")
    redact: bool = True


# --- undo -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UndoOptions:
    """Options of ``compactctl undo`` (:class:`~compactctl.layers.undo.UndoLayer`).

    Attributes:
        event: the uuid of the compact or summary event to take back; ``None``: the newest
            compaction run (the compact and summary events one run appended, docs/design.md
            section 3, "RevertEvent").
    """

    event: str | None = setting(None, key=None)
