"""Applying rules to the prose of a text, never to its code: :func:`apply_rules`.

The protected spans are masked (:mod:`~compactctl.layers.text_rules.protect`), the rules
run on the rest as one text (line rules see across code blocks), the chain repeats until
the text stops changing (at most :data:`MAX_PASSES`), and the spans are put back byte for
byte. If the result would parse into other code spans, the text is returned unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from compactctl.layers.text_rules.protect import Masked, mask, masked_pieces
from compactctl.layers.text_rules.registry import Rule

__all__ = ["APPLY_RULES_VERSION", "MAX_PASSES", "apply_rules", "apply_rules_stepwise"]

#: Version of :func:`apply_rules` itself (masking, fixpoint, fallback). Record it next to the
#: rule versions; bump it when a change would make an old CompactEvent replay differently.
APPLY_RULES_VERSION = 1
#: :func:`apply_rules` repeats the rule chain at most this many times.
MAX_PASSES = 4


def apply_rules(text: str, rules: Sequence[Rule]) -> str:
    r"""Apply ``rules`` in the given order to the prose of ``text``, never to its code.

    Fenced code blocks and inline code spans are masked by placeholders, the rules run on the
    rest (as one text, so line rules see across code blocks), and the spans are put back byte
    for byte. The chain repeats until the text stops changing (at most :data:`MAX_PASSES`), so
    ``apply_rules(apply_rules(t, rs), rs) == apply_rules(t, rs)``. If the result would parse
    into different code spans than the ones put back, ``text`` is returned unchanged.
    An inline span is never changed; it disappears only with a whole line a rule removes (a
    duplicate line, an empty heading) or under a ``\r`` redraw that covers it completely, as on a
    terminal. A fenced block never changes or disappears. Pure; linear in ``len(text)`` for the
    shipped rules.

    :param text: any string; lines are split on ``\n`` only.
    :param rules: rules to apply, usually :func:`select_rules` or ``RULES.values()``.
    :raises ValueError: only if ``text`` contains every private-use character.

    >>> from compactctl.layers.text_rules import RULES
    >>> apply_rules('Done ✅\n```\nkeep ✅   \n```\n', list(RULES.values()))
    'Done\n```\nkeep ✅   \n```\n'
    """
    if not rules or not text:
        return text
    return _apply_masked(text, mask(text), rules, None)[0]


_Final = tuple[list[str], str, tuple[str, Masked] | None]
"""What :func:`_unmasked` returned for a masked text: ``(originals, sentinel, outcome)``."""


def _apply_masked(
    text: str,
    masked: Masked,
    rules: Sequence[Rule],
    memo: dict[tuple[object, str], str] | None,
    finals: dict[str, _Final] | None = None,
) -> tuple[str, Masked]:
    """:func:`apply_rules` on ``text`` whose :func:`mask` is ``masked``: ``(result, its mask)``.

    The mask of the result comes free with the final check, so a caller applying more rules to
    the result need not mask it again. ``memo`` maps ``(rule.fn, input)`` to ``rule.fn(input)``
    across calls on the same text (the rules are pure; it holds each intermediate text until
    the caller drops it); ``None``: no memo. ``finals`` does the same for the final check
    (:func:`_unmasked`), keyed by the rules' output.
    """
    source, originals, sentinel = masked
    current = source
    for _ in range(MAX_PASSES):
        new = current
        for rule in rules:
            if memo is None:
                new = rule.fn(new)
            else:
                key = (rule.fn, new)
                if key in memo:
                    new = memo[key]
                else:
                    new = memo[key] = rule.fn(new)
        if new == current:
            break
        current = new
    if current == source:
        return text, masked
    if finals is None:
        outcome = _unmasked(current, originals, sentinel)
    else:
        known = finals.get(current)
        if known is not None and known[1] == sentinel and known[0] == originals:
            outcome = known[2]
        else:
            outcome = _unmasked(current, originals, sentinel)
            finals[current] = (originals, sentinel, outcome)
    return (text, masked) if outcome is None else outcome


def _unmasked(current: str, originals: list[str], sentinel: str) -> tuple[str, Masked] | None:
    """The text the rules' masked output ``current`` stands for, and its mask; ``None`` when
    it must not be used (the input is kept). A pure function of its arguments."""
    if not originals:  # no code: the result is the masked text, if it still has no code
        if sentinel in current:
            return None
        remasked = mask(current)
        return None if remasked[1] else (current, remasked)
    pieces = masked_pieces(current, originals, sentinel)
    result = "".join(piece for _, piece in pieces)
    if sentinel in result:
        return None  # a rule broke a placeholder (e.g. a \r redraw over inline code)
    remasked = mask(result)
    if masked_pieces(*remasked) != pieces:
        return None  # the output would parse into other code spans: do not risk it
    return result, remasked


def apply_rules_stepwise(text: str, rules: Sequence[Rule]) -> tuple[str, list[str]]:
    r"""``apply_rules(text, rules)`` and the text after each rule applied alone, in turn.

    Returns ``(result, steps)``: ``result == apply_rules(text, rules)``; ``steps`` has one
    text per rule, ``steps[0] == apply_rules(text, rules[:1])`` and ``steps[k] ==
    apply_rules(steps[k - 1], rules[k : k + 1])``. This is what a per-rule report needs; it
    costs little more than :func:`apply_rules` alone: both share the calls of each rule on the
    same masked text, and each step reuses the mask that the previous one computed.

    :raises ValueError: only if ``text`` contains every private-use character.

    >>> from compactctl.layers.text_rules import RULES
    >>> apply_rules_stepwise('Done ✅  \n', [RULES['emoji'], RULES['whitespace']])
    ('Done\n', ['Done  \n', 'Done\n'])
    """
    if not rules or not text:
        return text, [text] * len(rules)
    masked = mask(text)
    source = masked[0]
    outputs: list[str] = []  # the first pass of the chain
    current = source
    for rule in rules:
        current = rule.fn(current)
        outputs.append(current)
    if outputs.count(source) == len(outputs):
        # Every rule left the masked text as it was (the usual case): so does each step.
        return text, [text] * len(rules)
    memo: dict[tuple[object, str], str] = {}
    current = source
    for rule, output in zip(rules, outputs, strict=True):
        memo[(rule.fn, current)] = output
        current = output
    finals: dict[str, _Final] = {}  # the last step usually ends where the chain does
    result = _apply_masked(text, masked, rules, memo, finals)[0]
    steps: list[str] = []
    current = text
    for rule in rules:
        if current:
            current, masked = _apply_masked(current, masked, (rule,), memo, finals)
        steps.append(current)
    return result, steps
