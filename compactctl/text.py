"""Text helpers shared by the layers and the summarizers: one definition of each.

What lives here is a fact about text that several modules need, written once:

- **CJK ranges.** The Unicode blocks, each named once (:data:`KANA`, :data:`HAN_UNIFIED`,
  :data:`HANGUL`, ...), and the sets built from them for each purpose (:data:`CJK_LETTERS`,
  :data:`CJK_WIDE`, :data:`CJK_SPAN_WIDE`, :data:`CJK_UNSPACED`). The sets differ on purpose
  (Hangul is one word per character for the bullet rule but not for similarity, which splits
  Korean at its spaces); two of them are frozen by a version (rule ``similar_bullets`` v1,
  similarity ``shingle-v1``), so they are kept apart and named, not merged.
- **ANSI escapes.** The terminal grammar of the ``ansi`` rule (:data:`ANSI_RE`,
  :data:`ESC_ANSI_RE`) and the older, smaller grammar frozen in similarity's ``shingle-v1``
  (:data:`SHINGLE_ANSI_RE`); they share their CSI grammar.
- **Code fences.** :data:`FENCE_RE`, a line that opens or closes a fenced block, as the
  summary formats read it.
- **Constraint words.** One word list, :data:`CONSTRAINT_WORDS`, each word tagged with the
  detectors that use it; the three detectors are built from it.
- **Case folds.** :data:`FOLDS_TO_ASCII` and :func:`folds_to_ascii`, for the "literal in
  ``text.lower()``" prefilters placed in front of case-insensitive regexes.
- **Clipping.** :func:`clip`, a text cut at a word boundary with an ellipsis.
- **Injected user text.** :data:`CLAUDE_CODE_INJECTED` and :data:`CODEX_INJECTED`, the
  openings of user-role text an agent wrote itself (docs/formats.md sections 1 and 3): the
  importers make such text a non-request, the extractive summarizer never quotes it as the
  user's.

Everything here is pure, and compiled once at import (importing costs well under a
millisecond: only :mod:`re`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "ANSI_RE",
    "CLAUDE_CODE_INJECTED",
    "CODEX_INJECTED",
    "CJK_LETTERS",
    "CJK_SPAN_WIDE",
    "CJK_UNSPACED",
    "CJK_WIDE",
    "CONSTRAINT_WORDS",
    "ELLIPSIS",
    "ESC_ANSI_RE",
    "FENCE_RE",
    "FOLDS_TO_ASCII",
    "SHINGLE_ANSI_RE",
    "clip",
    "constraint_re",
    "folds_to_ascii",
    "string_leaves",
]

#: The one-character ellipsis that marks text left out.
ELLIPSIS = "…"

# =========================================================================== CJK ranges
# Unicode blocks (Unicode 15), as the bodies of a regex character class.

#: CJK Symbols and Punctuation; U+3000 is the ideographic space.
CJK_SYMBOLS = "\u3000-\u303f"
#: Hiragana and Katakana.
KANA = "\u3040-\u30ff"
#: CJK Unified Ideographs Extension A.
HAN_EXT_A = "\u3400-\u4dbf"
#: CJK Unified Ideographs.
HAN_UNIFIED = "\u4e00-\u9fff"
#: CJK Compatibility Ideographs.
HAN_COMPAT = "\uf900-\ufaff"
#: Han ideographs outside the Basic Multilingual Plane (Extensions B to H).
HAN_SUPPLEMENTARY = "\U00020000-\U0003134f"
#: Hangul Syllables.
HANGUL = "\uac00-\ud7af"
#: Halfwidth and Fullwidth Forms (full-width Latin and punctuation, half-width Katakana).
FULLWIDTH = "\uff00-\uffef"
#: CJK Radicals Supplement and Kangxi Radicals.
CJK_RADICALS = "\u2e80-\u2fdf"
#: Bopomofo, Bopomofo Extended, Katakana Phonetic Extensions.
BOPOMOFO_AND_KANA_EXT = "\u3100-\u312f\u31a0-\u31bf\u31f0-\u31ff"
#: CJK Compatibility Forms (vertical punctuation).
CJK_COMPAT_FORMS = "\ufe30-\ufe4f"

#: Letters of the CJK scripts: kana, Han ideographs of the BMP, Hangul syllables. Each is
#: one token for :func:`compactctl.tokens.estimate_tokens` and one word for the bullet
#: similarity of the ``similar_bullets`` rule (v1).
CJK_LETTERS = KANA + HAN_EXT_A + HAN_UNIFIED + HAN_COMPAT + HANGUL
#: :data:`CJK_LETTERS` with CJK punctuation and full-width forms: a text holding one of
#: these is worth the ``cjk_punct`` rule.
CJK_WIDE = CJK_SYMBOLS + CJK_LETTERS + FULLWIDTH
#: Every block from U+3000 to the end of the unified ideographs (Bopomofo, compatibility
#: Jamo, enclosed and compatibility characters included), for the comparison keys of the
#: extractive summarizer.
CJK_SPAN = "\u3000-\u9fff"
#: :data:`CJK_SPAN` with Hangul, compatibility ideographs and full-width forms: a sentence
#: holding one is "CJK" to the extractive summarizer (a shorter length counts as long).
CJK_SPAN_WIDE = CJK_SPAN + HANGUL + HAN_COMPAT + FULLWIDTH
#: Scripts written without spaces between words, one word per character, for similarity's
#: shingles (``shingle-v1``): radicals, CJK punctuation (not the ideographic space), kana,
#: Bopomofo, Han ideographs of every plane, compatibility forms, full-width forms. Hangul is
#: not listed: Korean separates words with spaces.
CJK_UNSPACED = (
    CJK_RADICALS
    + "\u3001-\u303f"
    + KANA
    + BOPOMOFO_AND_KANA_EXT
    + HAN_EXT_A
    + HAN_UNIFIED
    + HAN_COMPAT
    + CJK_COMPAT_FORMS
    + FULLWIDTH
    + HAN_SUPPLEMENTARY
)

# =========================================================================== ANSI escapes
# Each alternative starts with its own introducer character, so the regex engine skips from
# one escape character to the next instead of trying every alternative at every position.
# The repeats are possessive: what follows each cannot start with a character of its class,
# so giving one back could not make a match; the engine runs possessive repeats faster.

_CSI_TAIL = r"[0-?]*+[ -/]*+[@-~]"
_OSC_TAIL = r"[^\x07\x1b\x9c\n]*+(?:\x07|\x1b\\|\x9c)?"
_DCS_TAIL = r"[^\x1b\x9c\n]*+(?:\x1b\\|\x9c)?"
_ESC_ANSI = rf"\x1b(?:\[{_CSI_TAIL}|\]{_OSC_TAIL}|[PX^_]{_DCS_TAIL}|[ -/]*+[0-~]|)"

ANSI_RE = re.compile(rf"{_ESC_ANSI}|\x9b(?:{_CSI_TAIL})?|\x9d{_OSC_TAIL}|\x9c")
"""Every escape a terminal acts on (the ``ansi`` rule, v1), in order: CSI (7-bit and 8-bit):
colours, cursor, erase; OSC strings (titles, hyperlinks) ended by BEL or ST, or by the end
of the line; DCS, SOS, PM and APC strings; two-character and nF escapes (``ESC 7``,
``ESC ( B``, ``ESC c``); a lone ESC, CSI, OSC or ST. At each position the first alternative
that matches wins.

>>> ANSI_RE.sub("", "\\x1b[1;31mred\\x1b[0m \\x1b]0;title\\x07done \\x9b2Kx")
'red done x'
"""

ESC_ANSI_RE = re.compile(_ESC_ANSI)
"""The ESC alternatives of :data:`ANSI_RE` alone: the same matches in a text without the 8-bit
C1 characters (U+009B-U+009D; never in ASCII text). It starts with a literal, so a search
skips from one ESC to the next (a character class is tried at every position, about 5x
slower)."""

SHINGLE_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|\x1b[ -/]+[0-~]"
    r"|\x1b[@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x1b"
)
"""The escapes :func:`compactctl.layers.similarity.normalize` removes, frozen with its
``shingle-v1`` (a change would change the shingles of a text): CSI (7-bit and 8-bit, as
:data:`ANSI_RE`), OSC only with its BEL or ESC-backslash terminator, nF escapes, two-byte Fe
escapes (``ESC @`` to ``ESC _``), a lone ESC. Unlike :data:`ANSI_RE` it leaves the text of
an unterminated OSC and of DCS/SOS/PM/APC strings (only their introducer goes), the final
character of ``ESC c`` or ``ESC =`` style escapes, and the 8-bit OSC and ST.

>>> SHINGLE_ANSI_RE.sub("", "\\x1b[31mERROR\\x1b[0m \\x1bcreset")
'ERROR creset'
"""

# =========================================================================== code fences

FENCE_RE = re.compile(r"^\s*(```|~~~)")
"""A line that opens or closes a fenced code block, as the summary formats read it: any
leading whitespace, then three backticks or three tildes (``re.match`` on one line).
The text rules use a stricter CommonMark reading (fence length, ``>`` quotes)."""

# =========================================================================== constraint words

#: Detector of user constraints in the extractive summarizer (a sentence kept in full and
#: listed as a user constraint, unless it defers something: "later", "TODO", ...).
EXTRACTIVE = "extractive"
#: Detector of user-constraint sentences pinned into the model prompt
#: (:func:`compactctl.layers.summary.user_constraints`).
PINNED = "pinned"
#: Detector of a stated preference in a summary bullet, which raises its tier priority
#: (:func:`compactctl.layers.tiers.bullet_priority`).
PREFERENCE = "preference"

_DETECTORS = {"E": EXTRACTIVE, "P": PINNED, "T": PREFERENCE}

# One row a word: the word (a regex fragment for English), then the detectors that use it:
# E extractive, P pinned, T preference (tiers).
_CONSTRAINT_TABLE = r"""
    do not              E P T
    don't               E P T
    dont                E
    never               E P T
    must                E P T
    mustn't             E
    keep                E P T
    always                P T
    only                  P
    without             E P
    avoid               E P
    make sure           E
    should not          E
    shouldn't           E
    cannot              E
    can't               E
    no new              E P
    not allowed         E P
    leave \w+ alone     E
    stay                E
    不要                E P T
    必须                E P T
    保留                E   T
    不能                E P T
    不得                E P
    禁止                E P T
    务必                E
    只能                E
    不允许              E
    保持                E P
    不可以              E
"""


def _constraint_words(table: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """The rows of a table like :data:`_CONSTRAINT_TABLE`: ``(word, detectors)``."""
    rows = []
    for line in table.strip().split("\n"):
        word, flags = re.split(r"\s{2,}", line.strip(), maxsplit=1)
        rows.append((word, frozenset(_DETECTORS[flag] for flag in flags.split())))
    return tuple(rows)


CONSTRAINT_WORDS: tuple[tuple[str, frozenset[str]], ...] = _constraint_words(_CONSTRAINT_TABLE)
"""Every word or phrase that states a constraint, with the detectors that use it. English
(ASCII) entries are regex fragments matched between word boundaries, case-insensitively;
CJK entries (no word boundaries in CJK) are matched anywhere. The detectors have always
differed ("always" and "only" pin a prompt sentence but are too common to list a user
constraint; "保留" is a preference and an extractive constraint but not a pin) and each
difference shows in output, so each keeps its own selection of the one list."""


def constraint_re(detector: str) -> re.Pattern[str]:
    """The case-insensitive regex of one detector's words in :data:`CONSTRAINT_WORDS`.

    Built as ``\\b(?:english|...)\\b|cjk|...``; callers only ask whether it matches
    (``search``), which does not depend on the order of the alternatives.

    Raises:
        ValueError: ``detector`` is not one of :data:`EXTRACTIVE`, :data:`PINNED`,
            :data:`PREFERENCE`.

    >>> bool(constraint_re(PREFERENCE).search("Always run the linter"))
    True
    >>> bool(constraint_re(EXTRACTIVE).search("Always run the linter"))
    False
    """
    if detector not in _DETECTORS.values():
        known = ", ".join(_DETECTORS.values())
        raise ValueError(f"unknown constraint detector {detector!r}; expected one of {known}")
    words = [word for word, users in CONSTRAINT_WORDS if detector in users]
    english = [w for w in words if w.isascii()]
    cjk = [w for w in words if not w.isascii()]
    return re.compile(r"\b(?:" + "|".join(english) + r")\b|" + "|".join(cjk), re.IGNORECASE)


# =========================================================================== case folds

FOLDS_TO_ASCII = ("\u0130", "\u0131", "\u017f")
"""The characters that a case-insensitive ``re`` pattern matches as an ASCII letter but
``str.lower`` does not turn into one (İ and ı as i, the long s ſ as s; the Kelvin sign
lower-cases to k). A text holding one must skip any "literal in text.lower()" prefilter;
redaction and the extractive summarizer's exit-code scan both do."""


def folds_to_ascii(text: str) -> bool:
    """Whether ``text`` holds one of :data:`FOLDS_TO_ASCII` (then a lower-cased literal
    prefilter could miss a case-insensitive match).

    >>> folds_to_ascii("EXIT CODE"), folds_to_ascii("EX\\u0130T")
    (False, True)
    """
    return not text.isascii() and any(c in text for c in FOLDS_TO_ASCII)


# =========================================================================== clipping


def clip(
    text: str,
    limit: int,
    *,
    reach: int = 20,
    keep: tuple[int, int] = (2, 3),
    trim: str | None = " ,;:，、",
) -> str:
    """Cut ``text`` to at most ``limit`` characters, ending with :data:`ELLIPSIS`, at a word
    boundary when one is near.

    The cut is at the last space before character ``limit - 1`` when that space lies within
    ``reach`` characters of it and keeps at least ``keep[0] / keep[1]`` of ``limit``;
    otherwise in the middle of a word. Then the characters of ``trim`` (all whitespace when
    ``None``) are stripped from the end and the ellipsis added. A text that fits is returned
    as is; ``limit`` 0 or less gives ``""``. Lengths are in characters (code points).

    >>> clip("retry the flush once with a fresh lease", 20)
    'retry the flush…'
    >>> clip("保留 strptime，只在 TIMESTAMP_FORMAT 里加上 %z", 12)
    '保留 strptime…'
    >>> clip("- retry the flush once with a fresh lease", 24, reach=16, keep=(1, 2), trim=None)
    '- retry the flush once…'
    """
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 1, 1)]
    space = cut.rfind(" ")
    if space >= max(limit - reach, limit * keep[0] // keep[1]):
        cut = cut[:space]
    return cut.rstrip(trim) + ELLIPSIS


# ==================================================================== injected user text

#: Openings of user-role text Claude Code injected, not typed by a person (docs/formats.md
#: section 1): slash-command echoes, local-command output, system reminders, hook output,
#: task notifications, the interruption marker and the local-command caveat.
CLAUDE_CODE_INJECTED = (
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<system-reminder>",
    "<user-prompt-submit-hook>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<task-notification>",
    "[Request interrupted by user",
    "Caveat: The messages below were generated by the user while running local commands",
)

#: Openings of user-role items Codex CLI injected (docs/formats.md section 3): its
#: environment context, the AGENTS.md instructions, permissions, shell-command echoes and
#: the aborted-turn marker.
CODEX_INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
    "<permissions instructions>",
    "<user_shell_command>",
    "<turn_aborted>",
)


def string_leaves(value: Any) -> Iterator[str]:
    """The string leaves of a JSON value (object values and list items, depth first), in
    order; numbers, booleans and ``null`` are not strings and are skipped.

    >>> list(string_leaves({"a": "x", "b": [1, "y", {"c": "z"}], "d": None}))
    ['x', 'y', 'z']
    """
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from string_leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from string_leaves(v)
