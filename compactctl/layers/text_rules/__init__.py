r"""Layer 1: the deterministic text rules, as pure ``str -> str`` functions.

The rules come from the Layer 1 table of MoonHub's compactor ("9 个确定性规则": CJK
punctuation, whitespace, duplicate lines, empty sections, tables, emoji, similar bullets, short
bullets, decorative lines); compactctl adds a tenth, ``ansi``, for terminal output captured in
tool results.

Each rule is a :class:`Rule`: a name, a version, a one-line description and a pure function. A
rule function on its own sees raw text and knows nothing about code; :func:`apply_rules` is the
entry point that keeps code safe:

* **Protected spans.** Fenced code blocks (a line of three or more backticks or tildes, any
  indentation, optional ``>`` quote markers, an info string; closed by a fence line of the same
  character at least as long; an unterminated fence runs to the end of the text) and inline code
  spans (a backtick run closed by a run of the same length on the same line, as in CommonMark)
  are replaced by placeholders before any rule runs and put back afterwards, byte for byte.
  A fenced block becomes one placeholder line, so line rules still see the whole prose: a heading
  followed by a code block is not an empty section, and a code block ends a table or a bullet run.
  A placeholder is ``S`` + seven ASCII digits + ``S``, where ``S`` is a private-use character
  that does not occur in the text (so it cannot collide with it) and that no rule changes.
* **Canonical order** (the order of :data:`RULES`): character rules first (``ansi``, ``emoji``,
  ``cjk_punct``), so that line rules compare clean lines; then ``decorative`` and ``tables``;
  then the bullet merges (``short_bullets``, ``similar_bullets``), so that ``dup_lines`` also
  sees the merged bullets (a repeated ``- a; b; c`` group goes in the same pass); then
  ``empty_sections``, after every rule that can empty a section; ``whitespace`` last, to tidy
  the blank lines the others leave behind. Line rules ignore trailing blanks, so running
  ``whitespace`` last does not hide a duplicate or a bullet run.
* **Idempotence.** Every rule is idempotent on its own. Rules can still enable one another (a
  line that becomes a duplicate only once its emoji are gone), so :func:`apply_rules` repeats the
  chain until the text stops changing (at most :data:`MAX_PASSES` chains; in practice the second
  confirms the first). If the result would parse differently (a rule created a fence line or
  changed where inline code starts and ends, e.g. an emoji removed just before a backtick run),
  the text is returned unchanged rather than risk touching code.

Lengths are in characters (code points). Inside :func:`apply_rules` an inline code span counts as
its placeholder, nine characters, for the length thresholds of ``dup_lines`` and ``short_bullets``.

The package, one module per rule family: :mod:`~compactctl.layers.text_rules.ansi`,
:mod:`~compactctl.layers.text_rules.emoji`, :mod:`~compactctl.layers.text_rules.cjk`,
:mod:`~compactctl.layers.text_rules.lines` (whitespace, duplicate and decorative lines, and
the line helpers), :mod:`~compactctl.layers.text_rules.markdown` (empty sections, tables),
:mod:`~compactctl.layers.text_rules.bullets`; then
:mod:`~compactctl.layers.text_rules.registry` (:class:`Rule`, :data:`RULES`),
:mod:`~compactctl.layers.text_rules.protect` (protected spans and masking),
:mod:`~compactctl.layers.text_rules.apply` (:func:`apply_rules`) and
:mod:`~compactctl.layers.text_rules.selection` (:func:`select_rules`). Every public name is
importable from this package.
"""

from __future__ import annotations

from compactctl.layers.text_rules.ansi import strip_ansi
from compactctl.layers.text_rules.apply import (
    APPLY_RULES_VERSION,
    MAX_PASSES,
    apply_rules,
    apply_rules_stepwise,
)
from compactctl.layers.text_rules.bullets import (
    SHORT_BULLET_MAX_CHARS,
    SHORT_BULLET_MIN_RUN,
    SIMILAR_BULLETS_THRESHOLD,
    merge_short_bullets,
    merge_similar_bullets,
)
from compactctl.layers.text_rules.cjk import normalize_cjk_punct
from compactctl.layers.text_rules.emoji import strip_emoji
from compactctl.layers.text_rules.lines import (
    DUP_LINE_MIN_CHARS,
    collapse_whitespace,
    remove_decorative_lines,
    remove_dup_lines,
)
from compactctl.layers.text_rules.markdown import remove_empty_sections, tables_to_key_value
from compactctl.layers.text_rules.protect import protected_spans
from compactctl.layers.text_rules.registry import RULE_VERSIONS, RULES, Rule, get_rule
from compactctl.layers.text_rules.selection import looks_like_code, select_rules

__all__ = [
    "APPLY_RULES_VERSION",
    "DUP_LINE_MIN_CHARS",
    "MAX_PASSES",
    "RULES",
    "RULE_VERSIONS",
    "SHORT_BULLET_MAX_CHARS",
    "SHORT_BULLET_MIN_RUN",
    "SIMILAR_BULLETS_THRESHOLD",
    "Rule",
    "apply_rules",
    "apply_rules_stepwise",
    "collapse_whitespace",
    "get_rule",
    "looks_like_code",
    "merge_short_bullets",
    "merge_similar_bullets",
    "normalize_cjk_punct",
    "protected_spans",
    "remove_decorative_lines",
    "remove_dup_lines",
    "remove_empty_sections",
    "select_rules",
    "strip_ansi",
    "strip_emoji",
    "tables_to_key_value",
]
