"""The ``emoji`` rule: pictographs, ZWJ sequences, skin tones, flags and selectors removed.

Source: MoonHub's compactor, the Layer 1 table ("删除 Emoji"); the code point ranges come
from the Unicode emoji properties.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["strip_emoji"]


def _code_point_ranges(spec: str) -> tuple[tuple[int, int], ...]:
    """``(first, last)`` code points from hexadecimal ``FIRST-LAST`` (or ``CODE``) words.

    >>> _code_point_ranges("231A-231B 23F0")
    ((8986, 8987), (9200, 9200))
    """
    ranges = []
    for word in spec.split():
        first, _, last = word.partition("-")
        ranges.append((int(first, 16), int(last or first, 16)))
    return tuple(ranges)


# Code point ranges derived once from the Unicode emoji properties (Unicode 16/17 data).
# Pictographs: Emoji_Presentation=Yes below U+1F000, and Emoji_Presentation or
# Extended_Pictographic from U+1F000 on (Supplemental Arrows-C, U+1F800-1F8FF, excluded: arrows
# are text). These are removed wherever they occur. Includes regional indicators (flags) and the
# skin-tone and hair modifiers.
_PICTOGRAPH_RANGES = _code_point_ranges(
    """
    231A-231B 23E9-23EC 23F0 23F3 25FD-25FE 2614-2615 2648-2653 267F 2693 26A1 26AA-26AB
    26BD-26BE 26C4-26C5 26CE 26D4 26EA 26F2-26F3 26F5 26FA 26FD 2705 270A-270B 2728 274C 274E
    2753-2755 2757 2795-2797 27B0 27BF 2B1B-2B1C 2B50 2B55 1F004 1F02C-1F02F 1F094-1F09F
    1F0AF-1F0B0 1F0C0 1F0CF-1F0D0 1F0F6-1F0FF 1F170-1F171 1F17E-1F17F 1F18E 1F191-1F19A
    1F1AF-1F1FF 1F201-1F20F 1F21A 1F22F 1F232-1F23A 1F23C-1F23F 1F249-1F25F 1F266-1F321
    1F324-1F393 1F396-1F397 1F399-1F39B 1F39E-1F3F0 1F3F3-1F3F5 1F3F7-1F4FD 1F4FF-1F53D
    1F549-1F54E 1F550-1F567 1F56F-1F570 1F573-1F57A 1F587 1F58A-1F58D 1F590 1F595-1F596
    1F5A4-1F5A5 1F5A8 1F5B1-1F5B2 1F5BC 1F5C2-1F5C4 1F5D1-1F5D3 1F5DC-1F5DE 1F5E1 1F5E3 1F5E8
    1F5EF 1F5F3 1F5FA-1F64F 1F680-1F6C5 1F6CB-1F6D2 1F6D5-1F6E5 1F6E9 1F6EB-1F6F0 1F6F3-1F6FF
    1F7DC-1F7F0 1F90C-1F93A 1F93C-1F945 1F947-1F9FF 1FA58-1FA5F 1FA6E-1FAFF 1FC00-1FFFD
    """
)

# Emoji=Yes characters that are text by default (Emoji_Presentation=No), below U+1F000: removed
# only when a VS16 (U+FE0F) asks for emoji presentation ("⚠️" goes, "⚠" stays). Arrows
# (U+2194-2199, 21A9-21AA, 27A1, 2934-2935, 2B05-2B07), letterlike and punctuation symbols
# (© ® ™ ‼ ⁉ ℹ Ⓜ) and CJK symbols (〰 〽 ㊗ ㊙) are left out: with VS16 they keep their base.
_TEXT_EMOJI_RANGES = _code_point_ranges(
    """
    2328 23CF 23ED-23EF 23F1-23F2 23F8-23FA 25AA-25AB 25B6 25C0 25FB-25FC 2600-2604 260E 2611
    2618 261D 2620 2622-2623 2626 262A 262E-262F 2638-263A 2640 2642 265F-2660 2663 2665-2666
    2668 267B 267E 2692 2694-2697 2699 269B-269C 26A0 26A7 26B0-26B1 26C8 26CF 26D1 26D3 26E9
    26F0-26F1 26F4 26F7-26F9 2702 2708-2709 270C-270D 270F 2712 2714 2716 271D 2721 2733-2734
    2744 2747 2763-2764
    """
)


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
    the start or end of a line, one between two words. Source:
    MoonHub's compactor, Layer 1 table ("删除 Emoji").

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
