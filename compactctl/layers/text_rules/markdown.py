"""Markdown structure rules: ``empty_sections`` (headings) and ``tables``.

Source: MoonHub's compactor, the Layer 1 table ("删除空章节", "压缩表格").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from compactctl.layers.text_rules.lines import HEADING_RE, join_lines, split_lines

__all__ = ["TABLE_SEPARATOR", "remove_empty_sections", "table_header", "tables_to_key_value"]


# A line that HEADING_RE matches, at the start of the text or after a newline.
_HEADING_START_RE = re.compile(r" {0,3}+#{1,6}+(?:[ \t]|(?=\n)|\Z)")
_HEADING_AFTER_NEWLINE_RE = re.compile(r"\n {0,3}+#{1,6}+(?:[ \t]|(?=\n)|\Z)")


def remove_empty_sections(text: str) -> str:
    r"""Remove ATX headings (``#`` to ``######``) whose section has no content.

    A heading's section runs to the next heading of the same or a higher level (fewer ``#``),
    or to the end. It is empty when it holds only blank lines and headings that are themselves
    empty, so nested empty headings go in one pass; the blank lines of a removed section go
    with it. Setext headings (text underlined with ``===``) are not recognised. A ``# comment``
    line in prose counts as a heading: use ``is_code`` for shell or config output. Source:
    MoonHub's compactor, Layer 1 table ("删除空章节").

    >>> remove_empty_sections('# Plan\n## Empty\n\n## Steps\n- one\n## Notes\n')
    '# Plan\n## Steps\n- one\n'
    """
    if "#" not in text or (
        _HEADING_START_RE.match(text) is None and _HEADING_AFTER_NEWLINE_RE.search(text) is None
    ):
        return text  # no heading (a "#" elsewhere: an issue number, a comment, a URL)
    lines, trailing = split_lines(text)
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
        match = HEADING_RE.match(line)
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
    return join_lines(kept, trailing)


TABLE_SEPARATOR = r"[ \t]*+\|?[ \t]*+:?-++:?[ \t]*+(?:\|[ \t]*+:?-++:?[ \t]*+)*+\|?[ \t\r]*+"
"""The pattern of a table's separator row (``|---|:-:|``, ``---|---``, ``:-- | --:``): cells
of dashes with optional alignment colons, split by pipes, the outer pipes optional, blanks
around them (a ``\\r`` too at its end); no newline. :func:`table_header` fullmatches a line
against it, :func:`~compactctl.layers.text_rules.selection.select_rules` looks for it after a
newline first. Its repeats are possessive: what follows each cannot start with a
character of its class (nor the pipe groups with what the optional pipe and the line end
after them take), so giving back could never make a match, and none is tried."""
_TABLE_SEPARATOR_RE = re.compile(TABLE_SEPARATOR)
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


def table_header(lines: Sequence[str], i: int) -> list[str] | None:
    """The header cells if a table starts at ``lines[i]`` (header row, then a separator row
    with as many cells), else None.

    >>> table_header(["| a | b |", "|---|:-:|", "| 1 | 2 |"], 0)
    ['a', 'b']
    """
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
    inline code splits a cell. Source: MoonHub's compactor, Layer 1 table
    ("压缩表格", 30-50% saved).

    >>> tables_to_key_value('| name | size |\n|------|-----:|\n| x | 3 |\n| y |  |\n')
    'name: x; size: 3\nname: y\n'
    """
    if "|" not in text:
        return text
    lines, trailing = split_lines(text)
    out: list[str] = []
    i = 0
    while i < len(lines):
        header = table_header(lines, i) if "|" in lines[i] else None
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
    return join_lines(out, trailing)
