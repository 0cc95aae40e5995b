r"""Layer 1: the deterministic text rules, as pure ``str -> str`` functions.

The rules come from the Layer 1 table of seed 001 ("9 个确定性规则": CJK punctuation, whitespace,
duplicate lines, empty sections, tables, emoji, similar bullets, short bullets, decorative lines);
compactctl adds a tenth, ``ansi``, for terminal output captured in tool results.

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
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat

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

#: Version of :func:`apply_rules` itself (masking, fixpoint, fallback). Record it next to the
#: rule versions; bump it when a change would make an old CompactEvent replay differently.
APPLY_RULES_VERSION = 1
#: ``dup_lines`` only removes lines with at least this many characters (stripped).
DUP_LINE_MIN_CHARS = 10
#: ``short_bullets``: a bullet is short when its text has at most this many characters.
SHORT_BULLET_MAX_CHARS = 30
#: ``short_bullets``: the shortest run of short bullets that is merged.
SHORT_BULLET_MIN_RUN = 3
#: ``similar_bullets``: default word-bigram Jaccard similarity at which two bullets merge.
SIMILAR_BULLETS_THRESHOLD = 0.8
#: :func:`apply_rules` repeats the rule chain at most this many times.
MAX_PASSES = 4


# ---------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------


def _split_lines(text: str) -> tuple[list[str], bool]:
    """Split on ``\\n`` only (never U+2028 and friends); say whether a final newline followed."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # the empty string after the final newline (no copy of text[:-1])
        return lines, True
    return lines, False


def _join_lines(lines: list[str], trailing_newline: bool) -> str:
    if not lines:
        return ""
    return "\n".join(lines) + ("\n" if trailing_newline else "")


_HEADING_RE = re.compile(r" {0,3}(#{1,6})(?:[ \t]|$)")
# A line that _HEADING_RE matches, at the start of the text or after a newline.
_HEADING_START_RE = re.compile(r" {0,3}+#{1,6}+(?:[ \t]|(?=\n)|\Z)")
_HEADING_AFTER_NEWLINE_RE = re.compile(r"\n {0,3}+#{1,6}+(?:[ \t]|(?=\n)|\Z)")
_FENCE_LIKE_RE = re.compile(r"[ \t]*(?:>[ \t]*)*(?:`{3,}|~{3,})")
_WORD_RE = re.compile(r"\w")


# ---------------------------------------------------------------------------------------------
# ansi
# ---------------------------------------------------------------------------------------------

# Each alternative starts with its own introducer character, so the regex engine skips from one
# escape character to the next instead of trying every alternative at every position. In order:
# CSI (7-bit and 8-bit): colours, cursor, erase; OSC strings (titles, hyperlinks), ended by BEL
# or ST; DCS, SOS, PM and APC strings; two-character and nF escapes (ESC 7, ESC ( B, ...); a lone
# introducer or terminator. At each position the first alternative that matches wins, as in
# ``(?:ESC[|CSI)csi|(?:ESC]|OSC)osc|ESC[PX^_]dcs|ESC[ -/]*[0-~]|[ESC CSI ST OSC]``.
# (The repeats are possessive: what follows each cannot start with a character of its class, so
# giving one back could not make a match; the regex engine runs possessive repeats faster.)
_CSI_TAIL = r"[0-?]*+[ -/]*+[@-~]"
_OSC_TAIL = r"[^\x07\x1b\x9c\n]*+(?:\x07|\x1b\\|\x9c)?"
_DCS_TAIL = r"[^\x1b\x9c\n]*+(?:\x1b\\|\x9c)?"
_ANSI_RE = re.compile(
    rf"\x1b(?:\[{_CSI_TAIL}|\]{_OSC_TAIL}|[PX^_]{_DCS_TAIL}|[ -/]*+[0-~]|)"
    rf"|\x9b(?:{_CSI_TAIL})?"
    rf"|\x9d{_OSC_TAIL}"
    r"|\x9c"
)
# Without the 8-bit C1 characters (never in ASCII text) only the ESC alternatives can match; this
# regex is those alternatives alone, starting with a literal, so the search skips from one ESC
# to the next (a character class would be tried at every position, about 5x slower).
_ESC_ANSI_RE = re.compile(rf"\x1b(?:\[{_CSI_TAIL}|\]{_OSC_TAIL}|[PX^_]{_DCS_TAIL}|[ -/]*+[0-~]|)")
_ERASE_LINE_RE = re.compile(r"(?:\x1b\[|\x9b)[0-2]?K")


def _has_c1(text: str) -> bool:
    """Whether ``text`` contains a C1 introducer or terminator (CSI, ST, OSC)."""
    return not text.isascii() and ("\x9b" in text or "\x9c" in text or "\x9d" in text)


def _resolve_carriage_returns(line: str, escapes: bool) -> str:
    """What a terminal shows for one line containing ``\\r`` (escapes removed).

    ``escapes``: whether the line may contain an escape character (False: it has none).
    """
    shown = ""
    if not escapes or ("\x1b" not in line and not _has_c1(line)):
        # Nothing to remove, no erase-line: each segment overwrites the line from column 0, so
        # a column shows the last segment long enough to reach it. Going backwards, each
        # segment longer than what is shown so far adds its tail.
        for segment in reversed(line.split("\r")):
            if len(segment) > len(shown):
                shown += segment[len(shown) :]
        return shown
    for segment in line.split("\r"):
        visible = _ANSI_RE.sub("", segment)
        if _ERASE_LINE_RE.search(segment):
            shown = visible
        elif visible:
            shown = visible + shown[len(visible) :]
    return shown


def _resolve_lines(text: str, escapes: bool) -> str:
    """``text`` with each line that contains ``\\r`` resolved (the other lines are kept as
    they are, without being split apart)."""
    parts: list[str] = []
    position = 0  # where the text not yet copied starts: 0 or a newline
    cr = text.find("\r")
    while cr >= 0:
        start = text.rfind("\n", position, cr) + 1  # 0, or after the newline at position or later
        end = text.find("\n", cr)
        if end < 0:
            end = len(text)
        parts.append(text[position:start])
        parts.append(_resolve_carriage_returns(text[start:end], escapes))
        position = end
        cr = text.find("\r", end)
    parts.append(text[position:])
    return "".join(parts)


def strip_ansi(text: str) -> str:
    r"""Remove ANSI escape sequences and resolve carriage-return redraws.

    Removes CSI sequences (colours, cursor moves, erase), OSC strings (window titles,
    hyperlinks; ended by BEL or ST, or by the end of the line), DCS/SOS/PM/APC strings,
    two-character escapes and any lone ESC, and their 8-bit C1 forms. ``\r\n`` becomes ``\n``;
    in a line with other ``\r``, each segment overwrites the line from column 0, as a terminal
    would, and an erase-line sequence (``ESC [ K``) clears what the segment does not cover.
    Columns are counted in characters (a wide CJK character counts as one). The result contains
    no ESC and no ``\r``. Source: compactctl (not in the seed 001 table).

    >>> strip_ansi('\x1b[32mok\x1b[0m\r\n 10%\r 50%\r100%\r\n')
    'ok\n100%\n'
    """
    c1 = _has_c1(text)
    escapes = c1 or "\x1b" in text
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            text = _resolve_lines(text, escapes)
    if not escapes:  # then _ANSI_RE has nothing to match
        return text
    return (_ANSI_RE if c1 else _ESC_ANSI_RE).sub("", text)


# ---------------------------------------------------------------------------------------------
# emoji
# ---------------------------------------------------------------------------------------------

# Code point ranges derived once from the Unicode emoji properties (Unicode 16/17 data).
# Pictographs: Emoji_Presentation=Yes below U+1F000, and Emoji_Presentation or
# Extended_Pictographic from U+1F000 on (Supplemental Arrows-C, U+1F800-1F8FF, excluded: arrows
# are text). These are removed wherever they occur. Includes regional indicators (flags) and the
# skin-tone and hair modifiers.
_PICTOGRAPH_RANGES: tuple[tuple[int, int], ...] = (
    (0x231A, 0x231B), (0x23E9, 0x23EC), (0x23F0, 0x23F0), (0x23F3, 0x23F3), (0x25FD, 0x25FE),
    (0x2614, 0x2615), (0x2648, 0x2653), (0x267F, 0x267F), (0x2693, 0x2693), (0x26A1, 0x26A1),
    (0x26AA, 0x26AB), (0x26BD, 0x26BE), (0x26C4, 0x26C5), (0x26CE, 0x26CE), (0x26D4, 0x26D4),
    (0x26EA, 0x26EA), (0x26F2, 0x26F3), (0x26F5, 0x26F5), (0x26FA, 0x26FA), (0x26FD, 0x26FD),
    (0x2705, 0x2705), (0x270A, 0x270B), (0x2728, 0x2728), (0x274C, 0x274C), (0x274E, 0x274E),
    (0x2753, 0x2755), (0x2757, 0x2757), (0x2795, 0x2797), (0x27B0, 0x27B0), (0x27BF, 0x27BF),
    (0x2B1B, 0x2B1C), (0x2B50, 0x2B50), (0x2B55, 0x2B55), (0x1F004, 0x1F004), (0x1F02C, 0x1F02F),
    (0x1F094, 0x1F09F), (0x1F0AF, 0x1F0B0), (0x1F0C0, 0x1F0C0), (0x1F0CF, 0x1F0D0),
    (0x1F0F6, 0x1F0FF), (0x1F170, 0x1F171), (0x1F17E, 0x1F17F), (0x1F18E, 0x1F18E),
    (0x1F191, 0x1F19A), (0x1F1AF, 0x1F1FF), (0x1F201, 0x1F20F), (0x1F21A, 0x1F21A),
    (0x1F22F, 0x1F22F), (0x1F232, 0x1F23A), (0x1F23C, 0x1F23F), (0x1F249, 0x1F25F),
    (0x1F266, 0x1F321), (0x1F324, 0x1F393), (0x1F396, 0x1F397), (0x1F399, 0x1F39B),
    (0x1F39E, 0x1F3F0), (0x1F3F3, 0x1F3F5), (0x1F3F7, 0x1F4FD), (0x1F4FF, 0x1F53D),
    (0x1F549, 0x1F54E), (0x1F550, 0x1F567), (0x1F56F, 0x1F570), (0x1F573, 0x1F57A),
    (0x1F587, 0x1F587), (0x1F58A, 0x1F58D), (0x1F590, 0x1F590), (0x1F595, 0x1F596),
    (0x1F5A4, 0x1F5A5), (0x1F5A8, 0x1F5A8), (0x1F5B1, 0x1F5B2), (0x1F5BC, 0x1F5BC),
    (0x1F5C2, 0x1F5C4), (0x1F5D1, 0x1F5D3), (0x1F5DC, 0x1F5DE), (0x1F5E1, 0x1F5E1),
    (0x1F5E3, 0x1F5E3), (0x1F5E8, 0x1F5E8), (0x1F5EF, 0x1F5EF), (0x1F5F3, 0x1F5F3),
    (0x1F5FA, 0x1F64F), (0x1F680, 0x1F6C5), (0x1F6CB, 0x1F6D2), (0x1F6D5, 0x1F6E5),
    (0x1F6E9, 0x1F6E9), (0x1F6EB, 0x1F6F0), (0x1F6F3, 0x1F6FF), (0x1F7DC, 0x1F7F0),
    (0x1F90C, 0x1F93A), (0x1F93C, 0x1F945), (0x1F947, 0x1F9FF), (0x1FA58, 0x1FA5F),
    (0x1FA6E, 0x1FAFF), (0x1FC00, 0x1FFFD),
)  # fmt: skip

# Emoji=Yes characters that are text by default (Emoji_Presentation=No), below U+1F000: removed
# only when a VS16 (U+FE0F) asks for emoji presentation ("⚠️" goes, "⚠" stays). Arrows
# (U+2194-2199, 21A9-21AA, 27A1, 2934-2935, 2B05-2B07), letterlike and punctuation symbols
# (© ® ™ ‼ ⁉ ℹ Ⓜ) and CJK symbols (〰 〽 ㊗ ㊙) are left out: with VS16 they keep their base.
_TEXT_EMOJI_RANGES: tuple[tuple[int, int], ...] = (
    (0x2328, 0x2328), (0x23CF, 0x23CF), (0x23ED, 0x23EF), (0x23F1, 0x23F2), (0x23F8, 0x23FA),
    (0x25AA, 0x25AB), (0x25B6, 0x25B6), (0x25C0, 0x25C0), (0x25FB, 0x25FC), (0x2600, 0x2604),
    (0x260E, 0x260E), (0x2611, 0x2611), (0x2618, 0x2618), (0x261D, 0x261D), (0x2620, 0x2620),
    (0x2622, 0x2623), (0x2626, 0x2626), (0x262A, 0x262A), (0x262E, 0x262F), (0x2638, 0x263A),
    (0x2640, 0x2640), (0x2642, 0x2642), (0x265F, 0x2660), (0x2663, 0x2663), (0x2665, 0x2666),
    (0x2668, 0x2668), (0x267B, 0x267B), (0x267E, 0x267E), (0x2692, 0x2692), (0x2694, 0x2697),
    (0x2699, 0x2699), (0x269B, 0x269C), (0x26A0, 0x26A0), (0x26A7, 0x26A7), (0x26B0, 0x26B1),
    (0x26C8, 0x26C8), (0x26CF, 0x26CF), (0x26D1, 0x26D1), (0x26D3, 0x26D3), (0x26E9, 0x26E9),
    (0x26F0, 0x26F1), (0x26F4, 0x26F4), (0x26F7, 0x26F9), (0x2702, 0x2702), (0x2708, 0x2709),
    (0x270C, 0x270D), (0x270F, 0x270F), (0x2712, 0x2712), (0x2714, 0x2714), (0x2716, 0x2716),
    (0x271D, 0x271D), (0x2721, 0x2721), (0x2733, 0x2734), (0x2744, 0x2744), (0x2747, 0x2747),
    (0x2763, 0x2764),
)  # fmt: skip


def _char_class(ranges: Sequence[tuple[int, int]]) -> str:
    return "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)


# Glue that belongs to an emoji sequence: ZWJ, VS15/VS16, keycap, tag characters.
_EMOJI_GLUE = "\\u200d\\ufe0e\\ufe0f\\u20e3\\U000e0020-\\U000e007f"
_EMOJI_ELEMENT = (
    f"(?:[{_char_class(_PICTOGRAPH_RANGES)}]|[{_char_class(_TEXT_EMOJI_RANGES)}]\\ufe0f)"
)
_EMOJI_SEQUENCE = f"\\u200d*{_EMOJI_ELEMENT}(?:[{_EMOJI_GLUE}]|{_EMOJI_ELEMENT})*"
# A cluster: emoji sequences separated only by blanks ("🚀 ✨" goes as one).
_EMOJI_CLUSTER_RE = re.compile(f"{_EMOJI_SEQUENCE}(?:[ \\t]*{_EMOJI_SEQUENCE})*")
# A superset of the first characters of a cluster, in few ranges, so that scanning a long text
# is fast; the exact (large) classes above are only tried where this one matches.
_EMOJI_CANDIDATE_RE = re.compile(
    "[\\u200d\\u20e3\\u2300-\\u2bff\\u3030\\u303d\\u3297\\u3299\\ufe0e\\ufe0f"
    "\\U0001f000-\\U0001fffd\\U000e0020-\\U000e007f]"
)
_KEYCAP_RE = re.compile("([0-9#*])[\\ufe0e\\ufe0f\\u20e3\\U000e0020-\\U000e007f]*\\u20e3")
_EMOJI_LEFTOVER_RE = re.compile("[\\ufe0e\\ufe0f\\U000e0020-\\U000e007f]")
_BLANK = " \t"


def strip_emoji(text: str) -> str:
    r"""Remove emoji: pictographs, emoji dingbats, ZWJ sequences, skin tones, flags, selectors.

    Removed: characters with default emoji presentation (✅ 🚀 ✨ ❌ ⭐), every pictograph from
    U+1F000 on except the Supplemental Arrows-C block, text-default emoji written with VS16
    (``⚠️``, ``✔️``), ZWJ sequences as a whole (👨‍👩‍👧), skin-tone modifiers, regional-indicator
    flags (🇫🇷), tag-sequence flags, and every VS15/VS16 and tag character left over. A keycap
    (``1️⃣``) keeps its digit. Kept: CJK, math symbols, arrows (``→``, ``➡``; ``➡️`` becomes
    ``➡``), text symbols without VS16 (``✓ ✗ ★ ☐ ⚠``), ZWJ that is not next to an emoji
    (Indic scripts need it). When an emoji is removed, the blanks around it are tidied: none at
    the start or end of a line, one between two words. Source: seed 001 Layer 1 table
    ("删除 Emoji").

    >>> strip_emoji('✅ Tests pass 🎉\n- 👨‍👩‍👧 family, 🇫🇷 flag, 1️⃣ step → next')
    'Tests pass\n- family, flag, 1 step → next'
    """
    if text.isascii() or _EMOJI_CANDIDATE_RE.search(text) is None:  # candidates are non-ASCII
        return text
    if "\u20e3" in text:
        text = _KEYCAP_RE.sub(r"\1", text)
    parts: list[str] = []
    position, size = 0, len(text)
    for candidate in _EMOJI_CANDIDATE_RE.finditer(text):
        if candidate.start() < position:
            continue
        cluster = _EMOJI_CLUSTER_RE.match(text, candidate.start())
        if cluster is None:
            continue
        start, end = cluster.span()
        before = start  # where the blanks before the cluster start
        while before > position and text[before - 1] in _BLANK:
            before -= 1
        after = end + 1 if end < size and text[end] in _BLANK else end
        parts.append(text[position:before])
        if after < size and text[after] not in "\r\n":  # not at the end of a line
            if before < start:
                parts.append(text[before:start])  # indentation, or the blank between words
            elif before > 0 and text[before - 1] != "\n":
                parts.append(text[end:after])  # "word✅ next": keep one blank
        position = after
    parts.append(text[position:])
    return _EMOJI_LEFTOVER_RE.sub("", "".join(parts))


# ---------------------------------------------------------------------------------------------
# cjk_punct
# ---------------------------------------------------------------------------------------------

# Mapped: punctuation with no Markdown, HTML or shell meaning in its ASCII form. Left alone on
# purpose: ＃ ＊ － ＋ ｜ ＞ ＜ ｀ ～ ＝ ＿ ＼ (they would create headings, bullets, tables, HTML,
# code or decorative lines), 《》〈〉 (would look like tags), …… and —— (no shorter ASCII form).
_CJK_PUNCT_MAP = {
    "，": ",",
    "、": ",",
    "。": ".",
    "．": ".",
    "：": ":",
    "；": ";",
    "！": "!",
    "？": "?",
    "（": "(",
    "）": ")",
    "［": "[",
    "］": "]",
    "【": "[",
    "】": "]",
    "〔": "(",
    "〕": ")",
    "｛": "{",
    "｝": "}",
    "「": '"',
    "」": '"',
    "『": '"',
    "』": '"',
    "＂": '"',
    "“": '"',
    "”": '"',
    "＇": "'",
    "‘": "'",
    "’": "'",
    "％": "%",
}
_CJK_PUNCT_TABLE = str.maketrans(_CJK_PUNCT_MAP)
_CJK_PUNCT_RE = re.compile(f"[{''.join(_CJK_PUNCT_MAP)}]")
_CJK_RE = re.compile(
    "[\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)


def normalize_cjk_punct(text: str) -> str:
    r"""Replace full-width CJK punctuation by its ASCII form, where that is safe.

    Maps ，、。．：；！？（）［］【】〔〕｛｝「」『』＂＇％ and the curly quotes “”‘’ to
    ``, , . . : ; ! ? ( ) [ ] [ ] ( ) { } " " " " " ' %`` and ``" " ' '``; one character becomes
    one character, no space is added. Characters whose ASCII form has Markdown, HTML or shell
    meaning (＃＊－＋｜＜＞｀～＝＿＼, 《》〈〉) are left as they are, so the rule never creates a
    heading, a bullet, a table, a tag or a code span. Source: seed 001 Layer 1 table
    ("CJK 标点规范化", about one token saved per replacement).

    >>> normalize_cjk_punct('你好，世界。「好」（是）｜不变')
    '你好,世界."好"(是)｜不变'
    """
    if _CJK_PUNCT_RE.search(text) is None:
        return text
    return text.translate(_CJK_PUNCT_TABLE)


# ---------------------------------------------------------------------------------------------
# whitespace
# ---------------------------------------------------------------------------------------------

_TRAILING_BLANKS = " \t\f\v\u00a0\u3000\r"
_BLANKS_BUT_CR = " \t\f\v\u00a0\u3000"
_TRAILING_BLANK_ENDS = tuple(_BLANKS_BUT_CR) + tuple(f"{c}\r" for c in _TRAILING_BLANKS)
# Where collapse_whitespace has work, found at the newlines (the search skips from one newline
# to the next): a line ending with a blank other than ``\r`` before its ``\n``, or with a blank
# before a final ``\r`` (a lone ``\r`` ending a line, as in CRLF, is kept); or two lines in a
# row that are empty or only ``\r`` (the second one followed by ``\n``, or a last ``\r`` line).
# The same at the start of the text, and for a last line without ``\n``, are looked for apart.
_WHITESPACE_WORK_RE = re.compile(
    f"\n(?:(?<=[{_BLANKS_BUT_CR}]\n)|(?<=[{_TRAILING_BLANKS}]\r\n)|\r?+\n(?:\r?+\n|\r\\Z))"
)
_WHITESPACE_WORK_AT_START_RE = re.compile("\r?+\n(?:\r?+\n|\r\\Z)")


def collapse_whitespace(text: str) -> str:
    r"""Remove trailing blanks from every line and collapse runs of blank lines to one.

    Trailing spaces, tabs, form feeds, vertical tabs, no-break spaces and ideographic spaces
    (U+3000) are removed; a ``\r\n`` line ending is kept as it is. A blank line is one that is
    empty once its trailing blanks are gone; two or more in a row become one. Leading
    indentation is never touched. Lines are split on ``\n`` only. Safe for code. Source: seed
    001 Layer 1 table ("折叠空白").

    >>> collapse_whitespace('a  \n\n\n\nb\t\n')
    'a\n\nb\n'
    """
    # Most texts have nothing to do: no line ends with a blank (a CRLF ending aside) and no two
    # empty lines follow each other.
    if (
        _WHITESPACE_WORK_RE.search(text) is None
        and not text.endswith(_TRAILING_BLANK_ENDS)
        and _WHITESPACE_WORK_AT_START_RE.match(text) is None
    ):
        return text
    lines, trailing = _split_lines(text)
    stripped = list(map(str.rstrip, lines, repeat(_TRAILING_BLANKS)))
    if "\r" in text:  # a CRLF line ending stays a CRLF line ending
        stripped = [
            new + "\r" if new is not line and "\r" in line[len(new) :] else new
            for new, line in zip(stripped, lines, strict=True)
        ]
    blank = ("", "\r")
    # a line stays unless it and the one before it (as stripped) are both blank
    out = [
        new
        for new, before in zip(stripped, [None, *stripped], strict=False)
        if new not in blank or before not in blank
    ]
    if out == lines:
        return text
    return _join_lines(out, trailing)


# ---------------------------------------------------------------------------------------------
# dup_lines
# ---------------------------------------------------------------------------------------------


def _is_dup_candidate(key: str) -> bool:
    """Whether a line (trailing blanks removed) may be dropped as a duplicate."""
    body = key.lstrip()
    return (
        len(body) >= DUP_LINE_MIN_CHARS
        and _WORD_RE.search(body) is not None
        and not body.startswith("|")
        and _HEADING_RE.match(key) is None
        and _FENCE_LIKE_RE.match(key) is None
    )


def remove_dup_lines(text: str) -> str:
    r"""Remove lines that repeat an earlier line exactly, wherever it was; keep the first.

    Lines are compared without their trailing blanks. Only non-trivial lines are removed: at
    least :data:`DUP_LINE_MIN_CHARS` (10) characters once stripped, with at least one letter or
    digit, and not a heading, a table row (starts with ``|``) or a fence line. Short lines such
    as ``}``, ``end``, ``Done.``, ``---`` or a repeated label legitimately recur and carry
    structure, so they stay; blank lines are never removed. Source: seed 001 Layer 1 table
    ("行去重").

    >>> remove_dup_lines('Running the tests\n}\nok\nRunning the tests\n}\n')
    'Running the tests\n}\nok\n}\n'
    """
    if "\n" not in text:
        return text  # one line cannot repeat
    lines, trailing = _split_lines(text)
    keys = list(map(str.rstrip, lines))
    if len(set(keys)) == len(keys):
        return text
    seen: set[str] = set()
    kept: list[str] = []
    for line, key in zip(lines, keys, strict=True):
        if key in seen and _is_dup_candidate(key):
            continue
        seen.add(key)
        kept.append(line)
    if len(kept) == len(lines):
        return text
    return _join_lines(kept, trailing)


# ---------------------------------------------------------------------------------------------
# empty_sections
# ---------------------------------------------------------------------------------------------


def remove_empty_sections(text: str) -> str:
    r"""Remove ATX headings (``#`` to ``######``) whose section has no content.

    A heading's section runs to the next heading of the same or a higher level (fewer ``#``),
    or to the end. It is empty when it holds only blank lines and headings that are themselves
    empty, so nested empty headings go in one pass; the blank lines of a removed section go
    with it. Setext headings (text underlined with ``===``) are not recognised. A ``# comment``
    line in prose counts as a heading: use ``is_code`` for shell or config output. Source: seed
    001 Layer 1 table ("删除空章节").

    >>> remove_empty_sections('# Plan\n## Empty\n\n## Steps\n- one\n## Notes\n')
    '# Plan\n## Steps\n- one\n'
    """
    if "#" not in text or (
        _HEADING_START_RE.match(text) is None and _HEADING_AFTER_NEWLINE_RE.search(text) is None
    ):
        return text  # no heading (a "#" elsewhere: an issue number, a comment, a URL)
    lines, trailing = _split_lines(text)
    remove: set[int] = set()
    stack: list[list[int]] = []  # [level, line index, has content (0/1)]

    def close_top() -> None:
        _level, index, has_content = stack.pop()
        if has_content:
            if stack:
                stack[-1][2] = 1
        else:
            remove.add(index)

    for i, line in enumerate(lines):
        match = _HEADING_RE.match(line)
        if match:
            level = len(match.group(1))
            while stack and stack[-1][0] >= level:
                close_top()
            stack.append([level, i, 0])
        elif stack and line.strip():
            stack[-1][2] = 1
    while stack:
        close_top()
    if not remove:
        return text
    kept: list[str] = []
    dropping = False
    for i, line in enumerate(lines):
        if i in remove:
            dropping = True
        elif dropping and not line.strip():
            continue
        else:
            dropping = False
            kept.append(line)
    return _join_lines(kept, trailing)


# ---------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------

_TABLE_SEPARATOR_RE = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t\r]*")
# A ``|`` not preceded by a backslash; written ``\|`` first so that the search skips from pipe to
# pipe (a regex starting with a lookbehind is tried at every position).
_UNESCAPED_PIPE_RE = re.compile(r"\|(?<!\\\|)")


def _row_cells(line: str) -> list[str]:
    row = line.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [cell.strip() for cell in _UNESCAPED_PIPE_RE.split(row)]


def _table_header(lines: Sequence[str], i: int) -> list[str] | None:
    """The header cells if a table starts at ``lines[i]`` (header row, then separator row)."""
    if i + 1 >= len(lines):
        return None
    head, separator = lines[i], lines[i + 1]
    if "|" not in separator or _UNESCAPED_PIPE_RE.search(head) is None:
        return None
    if _TABLE_SEPARATOR_RE.fullmatch(separator) is None:
        return None
    header = _row_cells(head)
    return header if len(header) == len(_row_cells(separator)) else None


def _row_to_key_values(header: Sequence[str], cells: Sequence[str]) -> str:
    pairs = []
    for j, cell in enumerate(cells):
        if not cell:
            continue
        key = header[j] if j < len(header) else ""
        pairs.append(f"{key}: {cell}" if key else cell)
    return "; ".join(pairs)


def tables_to_key_value(text: str) -> str:
    r"""Rewrite Markdown (GFM) tables as one ``header: cell; header: cell`` line per row.

    A table is a row with an unescaped ``|``, then a separator row (``|---|:--:|``) with as many
    cells, then the rows that follow while they contain an unescaped ``|`` (a table also ends at
    a line without one, unlike GFM, which would take it as a one-cell row). Empty cells are
    left out, cells without a header are written alone, a row with no content is dropped, and a
    table without rows becomes the list of its headers. Escaped pipes (``\|``) stay escaped. The
    lines keep the indentation of the header row. Outside :func:`apply_rules`, a ``|`` inside
    inline code splits a cell. Source: seed 001 Layer 1 table ("压缩表格", 30-50% saved).

    >>> tables_to_key_value('| name | size |\n|------|-----:|\n| x | 3 |\n| y |  |\n')
    'name: x; size: 3\nname: y\n'
    """
    if "|" not in text:
        return text
    lines, trailing = _split_lines(text)
    out: list[str] = []
    i = 0
    while i < len(lines):
        header = _table_header(lines, i) if "|" in lines[i] else None
        if header is None:
            out.append(lines[i])
            i += 1
            continue
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        i += 2
        rows = 0
        while i < len(lines) and lines[i].strip() and _UNESCAPED_PIPE_RE.search(lines[i]):
            converted = _row_to_key_values(header, _row_cells(lines[i]))
            if converted:
                out.append(indent + converted)
            rows += 1
            i += 1
        if rows == 0 and any(header):
            out.append(indent + "; ".join(cell for cell in header if cell))
    if len(out) == len(lines):  # no table (a table always ends up in fewer lines)
        return text
    return _join_lines(out, trailing)


# ---------------------------------------------------------------------------------------------
# decorative
# ---------------------------------------------------------------------------------------------

# At least three of - * = _ ~ with blanks around and between: written with possessive repeats
# (a blank given back cannot be a mark, nor a mark a line end), which the regex engine runs much
# faster than a repeated group.
_DECORATIVE = r"[ \t]*+[-*=_~][ \t]*+[-*=_~][ \t]*+[-*=_~][-*=_~ \t]*+\r?"
_DECORATIVE_RE = re.compile(_DECORATIVE)
# A whole line that _DECORATIVE_RE matches, at the start of the text or after a newline.
_DECORATIVE_START_RE = re.compile(rf"{_DECORATIVE}(?=\n|\Z)")
_DECORATIVE_AFTER_NEWLINE_RE = re.compile(rf"\n{_DECORATIVE}(?=\n|\Z)")
_FRONT_MATTER_LINE_RE = re.compile(
    r"(?:[ \t]*#.*|[\w\"'][^:]*:(?:[ \t].*)?|[ \t]*-(?:[ \t].*)?|[ \t]+\S.*|[ \t]*)\r?"
)
_FRONT_MATTER_KEY_RE = re.compile(r"[\w\"'][^:]*:(?:[ \t].*)?\r?")


def _front_matter_end(lines: Sequence[str]) -> int:
    """Index of the line closing a YAML front matter block at the top, or -1."""
    if not lines or lines[0].rstrip() != "---":
        return -1
    has_key = False
    for i in range(1, len(lines)):
        line = lines[i]
        if line.rstrip() in ("---", "..."):
            return i if has_key else -1
        if _FRONT_MATTER_LINE_RE.fullmatch(line) is None:
            return -1
        has_key = has_key or _FRONT_MATTER_KEY_RE.fullmatch(line) is not None
    return -1


def remove_decorative_lines(text: str) -> str:
    r"""Remove lines made only of ``-``, ``*``, ``=``, ``_`` or ``~`` (three or more, blanks
    between allowed): horizontal rules, banners and setext underlines.

    Table separator rows contain ``|`` or ``:`` and are never touched. YAML front matter is kept
    only when it can be identified: the text starts with a ``---`` line, a ``---`` or ``...``
    line closes it, every line between looks like YAML (``key: value``, ``- item``, indented
    continuation, comment, blank) and at least one is a ``key:`` line. Any other ``---`` line is
    decorative, so an unidentified front matter loses its delimiters and keeps its content. A
    setext heading keeps its text and loses its underline. Inside :func:`apply_rules` a line of
    three or more tildes is a fence opener and is protected instead. Source: seed 001 Layer 1
    table ("删除装饰线").

    >>> remove_decorative_lines('Title\n=====\ntext\n- - -\n| a |\n|---|\n')
    'Title\ntext\n| a |\n|---|\n'
    """
    if (
        _DECORATIVE_START_RE.match(text) is None
        and _DECORATIVE_AFTER_NEWLINE_RE.search(text) is None
    ):
        return text  # no decorative line at all
    lines, trailing = _split_lines(text)
    front_matter_end = _front_matter_end(lines)
    kept = [
        line
        for i, line in enumerate(lines)
        if i <= front_matter_end or _DECORATIVE_RE.fullmatch(line) is None
    ]
    if len(kept) == len(lines):
        return text
    return _join_lines(kept, trailing)


# ---------------------------------------------------------------------------------------------
# bullets (similar_bullets, short_bullets)
# ---------------------------------------------------------------------------------------------

_BULLET_RE = re.compile(r"([ \t]*)([-*+])[ \t]+(\S.*)")
# A line that starts like a bullet, at the start of the text or after a newline (two regexes
# rather than one with ``^`` and re.M, so that the search can skip from newline to newline).
_BULLET_START_RE = re.compile(r"[ \t]*+[-*+][ \t]")
_BULLET_AFTER_NEWLINE_RE = re.compile(r"\n[ \t]*+[-*+][ \t]")


def _may_have_bullets(text: str) -> bool:
    """False when no line of ``text`` starts like a bullet (then the bullet rules do nothing)."""
    return (
        _BULLET_START_RE.match(text) is not None
        or _BULLET_AFTER_NEWLINE_RE.search(text) is not None
    )


_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN_RE = re.compile(f"[{_CJK_CHARS}]|[^\\W{_CJK_CHARS}]+")
_PRIVATE_USE = "\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd"
_PLACEHOLDER_RE = re.compile(f"([{_PRIVATE_USE}])([0-9]{{7}})\\1")


@dataclass(frozen=True, slots=True)
class _Bullet:
    """One single-line unordered list item."""

    line: str
    peer_key: tuple[str, str]  # (indentation, marker): items of the same list level
    text: str
    has_body: bool  # followed by a child item or an indented continuation line


def _indent_width(line: str) -> int:
    return len(line[: len(line) - len(line.lstrip(" \t"))].expandtabs(4))


def _parse_bullet(line: str, next_line: str | None) -> _Bullet | None:
    match = _BULLET_RE.fullmatch(line)
    if match is None or _DECORATIVE_RE.fullmatch(line) is not None:
        return None
    has_body = (
        next_line is not None
        and next_line.strip() != ""
        and _indent_width(next_line) > _indent_width(line)
    )
    return _Bullet(line, (match.group(1), match.group(2)), match.group(3).rstrip(), has_body)


_BULLET_MARKERS = ("-", "*", "+")


def _bullets(lines: Sequence[str]) -> list[_Bullet | None]:
    last = len(lines) - 1
    return [
        # (only a line whose first non-blank character is a marker can be a bullet)
        _parse_bullet(line, lines[i + 1] if i < last else None)
        if line.lstrip(" \t").startswith(_BULLET_MARKERS)
        else None
        for i, line in enumerate(lines)
    ]


def _code_tokens(text: str) -> frozenset[str]:
    """Inline code spans and code placeholders in one bullet's text."""
    found: set[str] = set()
    if "`" in text:  # no inline span without a backtick
        found.update(text[start:end] for start, end in _inline_code_spans(text, 0, len(text)))
    if not text.isascii():  # no placeholder without a private-use character
        found.update(match.group() for match in _PLACEHOLDER_RE.finditer(text))
    return frozenset(found)


def _grams(text: str) -> frozenset[tuple[str, ...]]:
    """Word bigrams (CJK characters count as words); unigrams for a one-word text."""
    tokens = _TOKEN_RE.findall(text.lower())
    if len(tokens) < 2:
        return frozenset((token,) for token in tokens)
    return frozenset(zip(tokens, tokens[1:], strict=False))


@dataclass(slots=True)
class _Candidate:
    bullet: _Bullet
    grams: frozenset[tuple[str, ...]]
    codes: frozenset[str]


def _candidate(bullet: _Bullet) -> _Candidate:
    return _Candidate(bullet, _grams(bullet.text), _code_tokens(bullet.text))


def _similar(a: _Candidate, b: _Candidate, threshold: float) -> bool:
    if not a.grams and not b.grams:
        return a.bullet.text == b.bullet.text
    union = len(a.grams | b.grams)
    return len(a.grams & b.grams) / union >= threshold


def _merge_pair(older: _Candidate, newer: _Candidate) -> _Candidate | None:
    """The bullet to keep (longer; newer on a tie), or None if it would lose code."""
    kept, dropped = (
        (newer, older) if len(newer.bullet.text) >= len(older.bullet.text) else (older, newer)
    )
    return kept if dropped.codes <= kept.codes else None


def merge_similar_bullets(text: str, threshold: float = SIMILAR_BULLETS_THRESHOLD) -> str:
    r"""Merge adjacent similar bullets, keeping the longer one (the newer one on a tie).

    Bullets are single-line unordered items (``-``, ``*``, ``+``) of the same list: same
    indentation and marker, on consecutive lines. Similarity is the Jaccard index of their word
    bigrams (lower-cased; each CJK character is a word; a one-word item uses its word). Merging
    repeats until no two adjacent items in the output are similar, comparing neighbours only
    (linear in the number of items). An item with a child item or an indented continuation
    line, an ordered item (``1.``) and any other line are left alone and separate runs. Two
    items are not merged if the dropped one has inline code the kept one lacks.

    :param threshold: similarity in (0, 1] at which two items merge (default 0.8).
    :raises ValueError: if ``threshold`` is not in (0, 1].

    Source: seed 001 Layer 1 table ("合并相似项目符号", bigram similarity).

    >>> merge_similar_bullets('- run the unit tests for the parser\n'
    ...                       '- run the unit tests for the parser module\n- other')
    '- run the unit tests for the parser module\n- other'
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    if not _may_have_bullets(text):
        return text
    lines, trailing = _split_lines(text)
    out: list[str] = []
    run: list[_Candidate] = []

    def flush() -> None:
        out.extend(candidate.bullet.line for candidate in run)
        run.clear()

    for line, bullet in zip(lines, _bullets(lines), strict=True):
        if bullet is None or bullet.has_body:
            if run:
                flush()
            out.append(line)
            continue
        if run and run[-1].bullet.peer_key != bullet.peer_key:
            flush()
        current = _candidate(bullet)
        while run and _similar(run[-1], current, threshold):
            kept = _merge_pair(run[-1], current)
            if kept is None:
                break
            run.pop()
            current = kept
        run.append(current)
    flush()
    if len(out) == len(lines):  # nothing merged
        return text
    return _join_lines(out, trailing)


def merge_short_bullets(text: str) -> str:
    r"""Merge each run of three or more short adjacent bullets into one, joined with ``; ``.

    A short bullet is a single-line unordered item (``-``, ``*``, ``+``) whose text has at most
    :data:`SHORT_BULLET_MAX_CHARS` (30) characters; a run is made of consecutive items with the
    same indentation and marker, without children or indented continuation lines. Ordered
    items are left alone (their numbers matter). The merged item keeps the first item's
    indentation and marker. Source: seed 001 Layer 1 table ("合并短项目符号").

    >>> merge_short_bullets('Files:\n- a.py\n- b.py\n- c.py\n- a much longer bullet that stays\n')
    'Files:\n- a.py; b.py; c.py\n- a much longer bullet that stays\n'
    """
    if not _may_have_bullets(text):
        return text
    lines, trailing = _split_lines(text)
    out: list[str] = []
    run: list[_Bullet] = []

    def flush() -> None:
        if len(run) >= SHORT_BULLET_MIN_RUN:
            indent, marker = run[0].peer_key
            out.append(f"{indent}{marker} " + "; ".join(bullet.text for bullet in run))
        else:
            out.extend(bullet.line for bullet in run)
        run.clear()

    for line, bullet in zip(lines, _bullets(lines), strict=True):
        short = (
            bullet is not None
            and not bullet.has_body
            and len(bullet.text) <= SHORT_BULLET_MAX_CHARS
        )
        if bullet is not None and short:
            if run and run[-1].peer_key != bullet.peer_key:
                flush()
            run.append(bullet)
            continue
        if run:
            flush()
        out.append(line)
    flush()
    if len(out) == len(lines):  # nothing merged
        return text
    return _join_lines(out, trailing)


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Protected spans: fenced code blocks and inline code
# ---------------------------------------------------------------------------------------------

_FENCE_OPEN_RE = re.compile(r"^[ \t]*(?:>[ \t]*)*(?:(`{3,})[^`\n]*|(~{3,})[^\n]*)$", re.M)
_FENCE_CLOSE_RE = re.compile(r"^[ \t]*(?:>[ \t]*)*(`{3,}|~{3,})[ \t\r]*$", re.M)
# "``*" rather than "`+": a regex that starts with a literal is searched for by skipping to that
# character; one that starts with a repeat is tried at every position (about 8x slower).
_BACKTICK_RUN_RE = re.compile(r"``*")


def _fence_line_starts(text: str, position: int) -> Iterator[int]:
    """The start of each line at or after ``position`` that contains three backticks or ``~~~``.

    Only these lines can open or close a fenced block, so testing :data:`_FENCE_OPEN_RE` and
    :data:`_FENCE_CLOSE_RE` at their starts finds what a search from ``position`` would (a
    multi-line ``^`` regex tries every character; ``str.find`` skips to the next fence).
    """
    ticks = text.find("```", position)
    tildes = text.find("~~~", position)
    while ticks >= 0 or tildes >= 0:
        found = ticks if tildes < 0 or 0 <= ticks < tildes else tildes
        start = text.rfind("\n", 0, found) + 1
        if start >= position:
            yield start
        end = text.find("\n", found)
        if end < 0:
            return
        if 0 <= ticks < end:
            ticks = text.find("```", end)
        if 0 <= tildes < end:
            tildes = text.find("~~~", end)


def _may_have_fence(text: str) -> bool:
    """Whether ``text`` contains three backticks or three tildes (a one-character test first:
    it is several times faster than a three-character one, and most texts have neither)."""
    return ("`" in text and "```" in text) or ("~" in text and "~~~" in text)


def _has_fence_opener(text: str) -> bool:
    """Whether ``_FENCE_OPEN_RE.search(text)`` finds a fence opener line."""
    return any(_FENCE_OPEN_RE.match(text, start) for start in _fence_line_starts(text, 0))


def _fenced_blocks(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each fenced block: opener line start to closer line end (no ``\\n``).

    The first line that opens a fence opens a block; the block ends with the next line that
    closes it (same character, at least as long), and the next block is looked for after it.
    """
    blocks: list[tuple[int, int]] = []
    lines = _fence_line_starts(text, 0)  # one pass: openers and closers come in text order
    for line_start in lines:
        opener = _FENCE_OPEN_RE.match(text, line_start)
        if opener is None:
            continue
        fence = opener.group(1) or opener.group(2)
        end = -1
        for closer_start in lines:  # the lines after the opener
            closer = _FENCE_CLOSE_RE.match(text, closer_start)
            if closer is None:
                continue
            candidate = closer.group(1)
            if candidate[0] == fence[0] and len(candidate) >= len(fence):
                end = closer.end()
                break
        if end < 0:  # unterminated: protects to the end (a final newline stays outside)
            end = len(text) - 1 if text.endswith("\n") and len(text) > opener.end() else len(text)
            blocks.append((opener.start(), end))
            return blocks
        blocks.append((opener.start(), end))
    return blocks


def _inline_code_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Inline code spans in ``text[start:end]``: CommonMark pairing, never across a newline.

    A backtick run opens a span closed by the next run of the same length on the same line;
    a run without one is literal. Linear in the length of the region.
    """
    spans: list[tuple[int, int]] = []
    runs = [match.span() for match in _BACKTICK_RUN_RE.finditer(text, start, end)]
    count = len(runs)
    i = 0
    while i < count - 1:  # a single run left cannot pair
        line_end = text.find("\n", runs[i][1], end)
        j = i + 1  # runs[i:j] are the runs of one line
        if line_end < 0:
            j = count
        else:
            while j < count and runs[j][0] < line_end:
                j += 1
        if j - i == 2:  # the usual line: two runs, a span if they are as long
            (first_start, first_end), (second_start, second_end) = runs[i], runs[i + 1]
            if first_end - first_start == second_end - second_start:
                spans.append((first_start, second_end))
        elif j - i > 2:
            _pair_runs(runs[i:j], spans)
        i = j
    return spans


def _pair_runs(runs: Sequence[tuple[int, int]], spans: list[tuple[int, int]]) -> None:
    """Pair the backtick runs of one line into spans (appended to ``spans``)."""
    following = [-1] * len(runs)  # index of the next run of the same length, or -1
    last_seen: dict[int, int] = {}
    for k in range(len(runs) - 1, -1, -1):
        size = runs[k][1] - runs[k][0]
        following[k] = last_seen.get(size, -1)
        last_seen[size] = k
    k = 0
    while k < len(runs):
        partner = following[k]
        if partner < 0:
            k += 1
        else:
            spans.append((runs[k][0], runs[partner][1]))
            k = partner + 1


def _spans(text: str) -> list[tuple[int, int, bool]]:
    """Protected spans in order as ``(start, end, is_fenced_block)``."""
    # Literal prefilters (most texts have no backtick at all): a fence line needs ``` or ~~~,
    # an inline span needs a backtick.
    if "`" not in text:
        if "~" not in text or "~~~" not in text:
            return []
        return [(start, end, True) for start, end in _fenced_blocks(text)]
    if not _may_have_fence(text):
        return [(start, end, False) for start, end in _inline_code_spans(text, 0, len(text))]
    spans: list[tuple[int, int, bool]] = []
    position = 0
    for start, end in _fenced_blocks(text):
        spans.extend((s, e, False) for s, e in _inline_code_spans(text, position, start))
        spans.append((start, end, True))
        position = end
    spans.extend((s, e, False) for s, e in _inline_code_spans(text, position, len(text)))
    return spans


def protected_spans(text: str) -> list[tuple[int, int]]:
    """Character offsets ``(start, end)`` of the fenced blocks and inline code spans in text.

    Sorted and disjoint; a fenced block runs from the start of its opening fence line to the
    end of its closing fence line (without the newline), or to the end of the text when it is
    never closed. Inline code is looked for only outside fenced blocks, one line at a time.

    >>> protected_spans('use `x`\\n```\\ncode\\n```\\n')
    [(4, 7), (8, 20)]
    """
    return [(start, end) for start, end, _ in _spans(text)]


_PRIVATE_USE_CANDIDATES = (
    range(0xE000, 0xF900),
    range(0xF0000, 0xFFFFE),
    range(0x100000, 0x10FFFE),
)


def _pick_sentinel(text: str) -> str:
    for candidates in _PRIVATE_USE_CANDIDATES:
        for code in candidates:
            if chr(code) not in text:
                return chr(code)
    raise ValueError("text uses every private-use character; no placeholder is free")


_Masked = tuple[str, list[str], str]
"""What :func:`_mask` returns for a text: ``(masked, originals, sentinel)``."""


def _mask(text: str) -> _Masked:
    """Replace protected spans by placeholders: ``(masked, originals, sentinel)``.

    Each fenced block gets its own placeholder (so no rule sees two blocks as duplicates);
    inline spans with equal text share one (so duplicate lines stay duplicates).
    """
    sentinel = _pick_sentinel(text)
    spans = _spans(text)
    if not spans:
        return text, [], sentinel
    originals: list[str] = []
    inline_ids: dict[str, int] = {}
    parts: list[str] = []
    position = 0
    for start, end, is_block in spans:
        original = text[start:end]
        if is_block:
            index = len(originals)
            originals.append(original)
        else:
            index = inline_ids.setdefault(original, len(originals))
            if index == len(originals):
                originals.append(original)
        if index >= 10_000_000:
            raise ValueError("more than 10 million protected spans in one text")
        parts.append(text[position:start])
        parts.append(f"{sentinel}{index:07d}{sentinel}")
        position = end
    parts.append(text[position:])
    return "".join(parts), originals, sentinel


@functools.lru_cache(maxsize=16)
def _placeholder_re(sentinel: str) -> re.Pattern[str]:
    """The placeholders written with ``sentinel``, the index as group 1."""
    return re.compile(f"{re.escape(sentinel)}([0-9]{{7}}){re.escape(sentinel)}")


def _pieces(masked: str, originals: Sequence[str], sentinel: str) -> list[tuple[bool, str]]:
    """The masked text as ``(is_protected, text)`` pieces, placeholders resolved."""
    if not originals:  # no placeholder can resolve
        return [(False, masked)] if masked else []
    pieces: list[tuple[bool, str]] = []
    position = 0
    # Only placeholders written with this sentinel count: searching for them alone finds the
    # same ones as _PLACEHOLDER_RE would (one made with another private-use character can
    # neither contain nor start inside them), and the search skips from sentinel to sentinel.
    for match in _placeholder_re(sentinel).finditer(masked):
        index = int(match.group(1))
        if index >= len(originals):
            continue
        pieces.append((False, masked[position : match.start()]))
        pieces.append((True, originals[index]))
        position = match.end()
    pieces.append((False, masked[position:]))
    return [piece for piece in pieces if piece[1] or piece[0]]


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

    >>> apply_rules('Done ✅\n```\nkeep ✅   \n```\n', list(RULES.values()))
    'Done\n```\nkeep ✅   \n```\n'
    """
    if not rules or not text:
        return text
    return _apply_masked(text, _mask(text), rules, None)[0]


def _apply_masked(
    text: str, masked: _Masked, rules: Sequence[Rule], memo: dict[tuple[object, str], str] | None
) -> tuple[str, _Masked]:
    """:func:`apply_rules` on ``text`` whose :func:`_mask` is ``masked``: ``(result, its mask)``.

    The mask of the result comes free with the final check, so a caller applying more rules to
    the result need not mask it again. ``memo`` maps ``(rule.fn, input)`` to ``rule.fn(input)``
    across calls on the same text (the rules are pure; it holds each intermediate text until
    the caller drops it); ``None``: no memo.
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
    if not originals:  # no code: the result is the masked text, if it still has no code
        if sentinel in current:
            return text, masked
        remasked = _mask(current)
        return (text, masked) if remasked[1] else (current, remasked)
    pieces = _pieces(current, originals, sentinel)
    result = "".join(piece for _, piece in pieces)
    if sentinel in result:
        return text, masked  # a rule broke a placeholder (e.g. a \r redraw over inline code)
    remasked = _mask(result)
    if _pieces(*remasked) != pieces:
        return text, masked  # the output would parse into other code spans: do not risk it
    return result, remasked


def apply_rules_stepwise(text: str, rules: Sequence[Rule]) -> tuple[str, list[str]]:
    r"""``apply_rules(text, rules)`` and the text after each rule applied alone, in turn.

    Returns ``(result, steps)``: ``result == apply_rules(text, rules)``; ``steps`` has one
    text per rule, ``steps[0] == apply_rules(text, rules[:1])`` and ``steps[k] ==
    apply_rules(steps[k - 1], rules[k : k + 1])``. This is what a per-rule report needs; it
    costs little more than :func:`apply_rules` alone: both share the calls of each rule on the
    same masked text, and each step reuses the mask that the previous one computed.

    :raises ValueError: only if ``text`` contains every private-use character.

    >>> apply_rules_stepwise('Done ✅  \n', [RULES['emoji'], RULES['whitespace']])
    ('Done\n', ['Done  \n', 'Done\n'])
    """
    if not rules or not text:
        return text, [text] * len(rules)
    masked = _mask(text)
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
    result = _apply_masked(text, masked, rules, memo)[0]
    steps: list[str] = []
    current = text
    for rule in rules:
        if current:
            current, masked = _apply_masked(current, masked, (rule,), memo)
        steps.append(current)
    return result, steps


# ---------------------------------------------------------------------------------------------
# Selection
# ---------------------------------------------------------------------------------------------

# Line-number prefixes and diff hunk headers are counted by regexes run once over the sample,
# its lines joined with "\n" and preceded by one: each pattern starts with the newline before a
# line, so the search jumps from newline to newline, and nothing else in it can match a newline,
# so each match stays in its line and the count of matches is the count of lines.
_NUMBERED_LINE_RE = re.compile(r"\n[ \t]*+\d++(?:\t|→|:[ \t]|\|)")
_DIFF_HUNK_RE = re.compile(r"\n@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
# A line looks like code when it starts like code (:data:`_CODE_START_RE`) or when its last
# non-blank character is ``{`` or ``;`` (:data:`_CODE_END_RES`). These regexes run over the
# whole sample, whose lines each follow a newline: no part of them can match a newline except
# the one that starts a line (``[^\S\n]`` is ``\s`` without it; ``(?=\n|\Z)`` is the end of a
# line), so each match is one line. ``_CODE_START_RE`` takes the rest of the line, so the lines
# it finds can be looked at again, joined, to count those that are both. Each regex starts with
# a literal, so the search skips to the next newline, ``{`` or ``;`` (a character class would be
# tried at every position). The possessive ``++``/``*+`` never give back what they took: what
# follows each of them cannot start with a character of their class, so giving back could not
# make a match, only cost time (``[\w.]+`` backtracking over a long word).
_CODE_START_RE = re.compile(
    r"\n[ \t]*+(?:def |class |import |from [\w.]++ import |return\b|elif\b|else[^\S\n]*+[:{]"
    r"|try[^\S\n]*+[:{]|except\b|finally[^\S\n]*+[:{]|catch[^\S\n]*+\(|function\b|const |let "
    r"|var |fn |pub |package |impl\b|#include|#define|public |private |protected |static "
    r"|async |await |@\w|//|/\*|\*/|[}\])]++[,;]?[^\S\n]*+(?=\n|\Z)|\"[^\"\n]++\"[^\S\n]*+:"
    r"|[\w.]++(?:(?:\[[^\]\n]*\])?[^\S\n]*+(?:[-+*/%|&^]|//|\*\*|<<|>>)?=(?!=)[^\S\n]*+\S"  # x = 1
    r"|\(.*\)[;,]?[^\S\n]*+(?=\n|\Z)))"  # or a call on its own line
    r"[^\n]*+"
)
_CODE_END_RES = (
    re.compile(r"\{[^\S\n]*+(?=\n|\Z)"),
    re.compile(r";[^\S\n]*+(?=\n|\Z)"),
)
_SHEBANG_RE = re.compile(r"\n[^\S\n]*+#!")
_CODE_SAMPLE_LINES = 500
# A line made only of whitespace, with the newline before it.
_BLANK_LINE_RE = re.compile(r"\n[^\S\n]*+(?=\n|\Z)")
_SAMPLE_HEAD_RE = re.compile(f"(?:\\n[^\\n]*+){{{_CODE_SAMPLE_LINES}}}")
_SAMPLE_CHUNK_CHARS = 1 << 16


def _code_sample(text: str) -> str:
    """The first :data:`_CODE_SAMPLE_LINES` non-blank lines of ``text`` (split on ``\\n``),
    each preceded by ``\\n`` (``""`` when there is none).

    Looks at about 64 KB of text at a time, so a huge text is not copied whole.
    """
    parts: list[str] = []
    found = 0
    start, size = 0, len(text)
    while True:
        end = text.find("\n", start + _SAMPLE_CHUNK_CHARS)
        if end < 0:
            end = size
        part = _BLANK_LINE_RE.sub("", "\n" + text[start:end])
        parts.append(part)
        found += part.count("\n")
        if found >= _CODE_SAMPLE_LINES or end == size:
            break
        start = end + 1  # the newline at ``end`` is the one added before the next part
    sample = "".join(parts)
    if found > _CODE_SAMPLE_LINES:
        head = _SAMPLE_HEAD_RE.match(sample)
        assert head is not None
        sample = sample[: head.end()]
    return sample


def _count_code_ends(sample: str) -> int:
    """How many lines of ``sample`` end with ``{`` or ``;`` (trailing whitespace aside)."""
    return sum(len(regex.findall(sample)) for regex in _CODE_END_RES) if sample else 0


def looks_like_code(text: str) -> bool:
    """Guess whether a tool output is code or file contents rather than prose.

    Heuristic over the first 500 non-blank lines; True when any of these holds:

    * the first non-blank line is a shebang (``#!``), or a unified-diff hunk header appears;
    * at least 60% of the lines carry a line-number prefix (``cat -n``, ``nl``, ``grep -n``,
      ``12→`` read-tool output), with at least two lines;
    * at least 35% of the lines look like code: start with a keyword (``def``, ``class``,
      ``import``, ``return``, ``function``, ``const``, ``fn``, ``#include``, ...), a
      decorator, a comment marker (``//``, ``/*``), a JSON key, an assignment (``x = 1``,
      ``a.b += f(c)``) or a call alone on its line (``main()``), or only closing brackets, or
      end with ``{`` or ``;``;
    * at least 15% look like code and at least 30% are indented by 4+ spaces or a tab.

    Wrapped prose, bullet lists and tables stay below these ratios. Fenced blocks count too,
    so a message that is mostly one code block looks like code.

    >>> looks_like_code('import os\\n\\ndef main():\\n    return os.getcwd()\\n')
    True
    >>> looks_like_code('Fixed the parser. Tests pass.\\n- next: docs\\n')
    False
    """
    sample = _code_sample(text)
    if not sample:
        return False
    if _SHEBANG_RE.match(sample) or _DIFF_HUNK_RE.search(sample):
        return True
    n = sample.count("\n")
    numbered = len(_NUMBERED_LINE_RE.findall(sample))
    if n >= 2 and numbered >= 0.6 * n:
        return True
    starts = _CODE_START_RE.findall(sample)
    code = len(starts) + _count_code_ends(sample) - _count_code_ends("".join(starts))
    if code >= 0.35 * n or code < 0.15 * n:
        return code >= 0.35 * n  # (then the indentation does not matter)
    return sample.count("\n    ") + sample.count("\n\t") >= 0.3 * n


def _has_table(text: str) -> bool:
    if "|" not in text:
        return False
    lines = text.split("\n")
    return any("|" in line and _table_header(lines, i) for i, line in enumerate(lines))


def _check_names(names: Collection[str], argument: str) -> None:
    if isinstance(names, str):
        raise TypeError(f"{argument} must be a collection of rule names, not a string")
    if _RULE_NAMES.issuperset(names):
        return
    unknown = [name for name in names if name not in RULES]
    raise KeyError(
        f"{argument}: unknown rule(s) {', '.join(map(repr, unknown))}; "
        f"known rules: {', '.join(RULES)}"
    )


_RULE_NAMES = frozenset(RULES)
_DROP_CJK, _DROP_TABLES, _DROP_BULLETS = 1, 2, 4


@functools.lru_cache(maxsize=256)
def _selection(
    only: frozenset[str] | None, skip: frozenset[str], is_code: bool, drop: int
) -> tuple[Rule, ...]:
    """The rules :func:`select_rules` returns, from its checked arguments and what the text
    lacks (``drop``: ``_DROP_*`` flags)."""
    chosen = [
        rule
        for rule in RULES.values()
        if (only is None or rule.name in only) and rule.name not in skip
    ]
    if is_code:
        return tuple(rule for rule in chosen if rule.safe_for_code)
    dropped: set[str] = set()
    if drop & _DROP_CJK:
        dropped.add("cjk_punct")
    if drop & _DROP_TABLES:
        dropped.add("tables")
    if drop & _DROP_BULLETS:
        dropped.update(("similar_bullets", "short_bullets"))
    return tuple(rule for rule in chosen if rule.name not in dropped)


def select_rules(
    text: str,
    *,
    is_code: bool = False,
    only: Collection[str] | None = None,
    skip: Collection[str] = (),
) -> list[Rule]:
    """The rules worth applying to ``text``, in canonical order (seed 001 "智能规则选择").

    Start from :data:`RULES` (or the names in ``only``) minus ``skip``, then:

    * ``is_code=True`` (a tool output that is file contents or code, e.g.
      ``looks_like_code(text)``): keep only the rules with ``safe_for_code``;
    * ``cjk_punct`` only when the text contains CJK characters or full-width forms;
    * ``tables`` only when it contains a Markdown table (header row + separator row);
    * ``similar_bullets`` and ``short_bullets`` dropped when it contains a code fence.

    Detection looks at the whole text, fenced blocks included.

    :raises KeyError: a name in ``only`` or ``skip`` is not a rule.
    :raises TypeError: ``only`` or ``skip`` is a single string.

    >>> [rule.name for rule in select_rules('你好，世界', only=['cjk_punct', 'tables'])]
    ['cjk_punct']
    >>> [rule.name for rule in select_rules('ls -la', is_code=True)]
    ['ansi', 'whitespace']
    """
    if only is not None:
        _check_names(only, "only")
    _check_names(skip, "skip")
    drop = 0
    if not is_code:
        if text.isascii() or _CJK_RE.search(text) is None:  # every CJK character is non-ASCII
            drop |= _DROP_CJK
        if not _has_table(text):
            drop |= _DROP_TABLES
        if _may_have_fence(text) and _has_fence_opener(text):
            drop |= _DROP_BULLETS
    return list(
        _selection(None if only is None else frozenset(only), frozenset(skip), is_code, drop)
    )
