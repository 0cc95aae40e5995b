"""The rule registry: each rule, its versions, and the canonical order (:data:`RULES`).

An old version of a rule stays registered so that an old CompactEvent replays identically.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from compactctl.layers.text_rules.ansi import strip_ansi
from compactctl.layers.text_rules.bullets import merge_short_bullets, merge_similar_bullets
from compactctl.layers.text_rules.cjk import normalize_cjk_punct
from compactctl.layers.text_rules.emoji import strip_emoji
from compactctl.layers.text_rules.lines import (
    collapse_whitespace,
    remove_decorative_lines,
    remove_dup_lines,
)
from compactctl.layers.text_rules.markdown import remove_empty_sections, tables_to_key_value

__all__ = ["RULES", "RULE_VERSIONS", "Rule", "get_rule"]


@dataclass(frozen=True, slots=True)
class Rule:
    """One deterministic text rule.

    :ivar name: stable identifier recorded in CompactEvent params (e.g. ``"emoji"``).
    :ivar version: release of the rule's behaviour; an old version stays replayable.
    :ivar description: one line for people (``--help``, reports).
    :ivar fn: the pure function ``str -> str``; idempotent; never raises on any ``str``.
    :ivar safe_for_code: True when the rule cannot change the meaning of file contents or
        code (ANSI removal, trailing blanks and blank-line runs); only these run on code.

    >>> RULES["whitespace"]("x  \\n")
    'x\\n'
    """

    name: str
    version: int
    description: str
    fn: Callable[[str], str]
    safe_for_code: bool = False

    def __call__(self, text: str) -> str:
        """Apply the rule to raw text (no code protection; see :func:`apply_rules`)."""
        return self.fn(text)


_RULES_V1: tuple[Rule, ...] = (
    Rule("ansi", 1, "Remove ANSI escapes; resolve \\r redraws.", strip_ansi, True),
    Rule("emoji", 1, "Remove emoji, ZWJ sequences, skin tones, flags.", strip_emoji),
    Rule("cjk_punct", 1, "Full-width CJK punctuation to ASCII.", normalize_cjk_punct),
    Rule("decorative", 1, "Remove lines of only - * = _ ~.", remove_decorative_lines),
    Rule("tables", 1, "Markdown tables to 'header: cell; ...' lines.", tables_to_key_value),
    Rule("short_bullets", 1, "Merge runs of 3+ short bullets.", merge_short_bullets),
    Rule("similar_bullets", 1, "Merge adjacent similar bullets.", merge_similar_bullets),
    Rule("dup_lines", 1, "Remove repeated non-trivial lines.", remove_dup_lines),
    Rule("empty_sections", 1, "Remove headings with empty sections.", remove_empty_sections),
    Rule("whitespace", 1, "Trailing blanks, blank-line runs.", collapse_whitespace, True),
)

#: Every released version of every rule: ``RULE_VERSIONS[name][version]``. Add a new version
#: beside the old one (never edit a released one) so old CompactEvents replay identically.
RULE_VERSIONS: Mapping[str, Mapping[int, Rule]] = {rule.name: {1: rule} for rule in _RULES_V1}

#: The current version of each rule, in canonical application order.
RULES: Mapping[str, Rule] = {
    name: versions[max(versions)] for name, versions in RULE_VERSIONS.items()
}


def get_rule(name: str, version: int | None = None) -> Rule:
    """The rule ``name`` at ``version`` (the current one when ``version`` is None).

    :raises KeyError: for an unknown rule name or a version that was never released; the
        message lists what exists.

    >>> get_rule("tables", 1).name
    'tables'
    """
    versions = RULE_VERSIONS.get(name)
    if versions is None:
        raise KeyError(f"unknown rule {name!r}; known rules: {', '.join(RULE_VERSIONS)}")
    if version is None:
        version = max(versions)
    rule = versions.get(version)
    if rule is None:
        released = ", ".join(str(v) for v in sorted(versions))
        raise KeyError(f"rule {name!r} has no version {version!r}; released: {released}")
    return rule
