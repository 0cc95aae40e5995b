"""The two summary formats of Layer 3: render, parse, validate, truncate.

Two formats, one module (docs/design.md section 5):

``sections`` (Coding Code's context service, its ``context.md``)
    An ``<analysis>`` block of free reasoning, then a ``<summary>`` block with the ten fixed
    ``### `` sections of :data:`SECTIONS`, each a list of ``- `` bullets::

        <analysis>
        ...
        </analysis>

        <summary>
        ### Primary Request
        - ...

        ### Key Technical Concepts
        - ...
        </summary>

``task-state`` (NeoCode's compact protocol, its ``context-compact.md``)
    One JSON object ``{"task_state": {...}, "display_summary": "[compact_summary]\\n..."}``.
    ``task_state`` holds exactly the eight fields of :data:`TASK_STATE_FIELDS`; the display
    summary starts with ``[compact_summary]`` and has the five sections of
    :data:`DISPLAY_SECTIONS` (``done:``, ``in_progress:``, ...), each with at least one
    non-empty ``- `` bullet. Its default maximum is 1200 characters (NeoCode's compact
    protocol, ``max_summary_chars: 1200``).

Everything a model answers goes through :func:`validate_sections` or :func:`parse_task_state`
before it is appended; a violation raises :class:`SummaryFormatError` naming the rule broken.
:func:`truncate_at_bullet` cuts an over-long summary at bullet boundaries so that the result
still validates. All lengths in this module are counted in characters (code points), not
bytes or tokens. Lines are split on ``\\n`` only (docs/style.md pitfalls).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from compactctl.errors import SummarizerError
from compactctl.text import FENCE_RE, clip

__all__ = [
    "DEFAULT_MAX_SUMMARY_CHARS",
    "DISPLAY_MARKER",
    "DISPLAY_SECTIONS",
    "SECTIONS",
    "TASK_STATE_FIELDS",
    "ParsedSections",
    "SummaryFormatError",
    "TaskState",
    "TaskStateSummary",
    "parse_display",
    "parse_sections",
    "parse_task_state",
    "render_display",
    "render_sections",
    "render_task_state",
    "resume_text",
    "section_key",
    "truncate_at_bullet",
    "validate_display",
    "validate_sections",
    "validate_task_state",
]

#: The ten sections of the ``sections`` format, in order (Coding Code's context service,
#: "压缩输出格式").
SECTIONS: tuple[str, ...] = (
    "Primary Request",
    "Key Technical Concepts",
    "Files and Code Sections",
    "Errors and Fixes",
    "Problem Solving",
    "Decision Rationale",
    "All User Messages",
    "Pending Tasks",
    "Current Work",
    "Optional Next Step",
)

#: The fields of ``task_state``, exactly these and no others (NeoCode's compact protocol,
#: "生成协议").
#: ``goal`` and ``next_step`` are strings; the other six are lists of strings.
TASK_STATE_FIELDS: tuple[str, ...] = (
    "goal",
    "progress",
    "open_items",
    "next_step",
    "blockers",
    "key_artifacts",
    "decisions",
    "user_constraints",
)

#: The task-state fields whose value is a string; all the others are lists of strings.
TASK_STATE_STRING_FIELDS: frozenset[str] = frozenset({"goal", "next_step"})

#: The five sections of a display summary, in order (NeoCode's compact protocol).
DISPLAY_SECTIONS: tuple[str, ...] = (
    "done",
    "in_progress",
    "decisions",
    "code_changes",
    "constraints",
)

#: The first line of every display summary (NeoCode's compact protocol).
DISPLAY_MARKER = "[compact_summary]"

#: Default maximum length of a display summary, in characters (NeoCode's compact protocol,
#: ``max_summary_chars``).
DEFAULT_MAX_SUMMARY_CHARS = 1200

#: A bullet shortened by :func:`truncate_at_bullet` keeps at least this many characters.
MIN_BULLET_CHARS = 24


class SummaryFormatError(SummarizerError, ValueError):
    """A summary does not follow its format; the message names the rule that failed.

    A :class:`~compactctl.errors.SummarizerError` (exit code 3: nothing is appended) and a
    :class:`ValueError`, so callers that only know the standard library can catch it too.
    """


class TaskState(TypedDict):
    """The durable task state of NeoCode's compact protocol: exactly these eight fields."""

    goal: str
    progress: list[str]
    open_items: list[str]
    next_step: str
    blockers: list[str]
    key_artifacts: list[str]
    decisions: list[str]
    user_constraints: list[str]


@dataclass(frozen=True)
class ParsedSections:
    """A ``sections`` summary taken apart.

    Attributes:
        analysis: the text inside ``<analysis>...</analysis>``, stripped ("" when absent).
        sections: section name -> bullet texts (without the ``- `` marker), in the order the
            sections appear in the text. Names are the canonical spellings of
            :data:`SECTIONS` even when the text used another letter case.
    """

    analysis: str
    sections: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskStateSummary:
    """A validated ``task-state`` answer.

    Attributes:
        task_state: the eight fields, in :data:`TASK_STATE_FIELDS` order.
        display_summary: the ``[compact_summary]`` text as given.
        display_sections: the display summary's sections -> bullet texts.
    """

    task_state: TaskState
    display_summary: str
    display_sections: dict[str, list[str]]


# --------------------------------------------------------------------------- line helpers

_BULLET_RE = re.compile(r"^[ \t]?(?:[-*+•]|\d{1,3}[.)])(?:[ \t]+|$)")
_HEADING_RE = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]*(?P<name>.*?)[ \t#]*$")
_SECTION_KEY_RE = re.compile(r"[\s*_`:]+")
_DISPLAY_HEADER_RE = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_ ]{0,40}?)[ \t]*:[ \t]*$")


def _is_bullet(line: str) -> bool:
    return _BULLET_RE.match(line) is not None


def _bullet_text(line: str) -> str:
    """The text of a bullet line without its marker.

    >>> _bullet_text("- fixed the slice")
    'fixed the slice'
    >>> _bullet_text("2. run the tests")
    'run the tests'
    """
    match = _BULLET_RE.match(line)
    return line[match.end() :].strip() if match is not None else line.strip()


def _continuation(line: str) -> str:
    """A continuation line with the two-space indent of :func:`_bullet_line` removed."""
    return line[2:] if line.startswith("  ") else line.strip()


def _bullet_line(text: str) -> str:
    """One ``- `` bullet; newlines in ``text`` become two-space indented continuation lines."""
    return "- " + text.strip().replace("\n", "\n  ")


def section_key(name: str) -> str:
    """A section name as compared: blanks, ``*``, ``_``, backticks and colons folded to one
    space, letter case folded.

    >>> section_key("**Primary  Request:**")
    'primary request'
    """
    return _SECTION_KEY_RE.sub(" ", name).strip().casefold()


_SECTION_BY_KEY = {section_key(name): name for name in SECTIONS}


def _heading_name(line: str) -> str | None:
    match = _HEADING_RE.match(line)
    if match is None or not line.lstrip().startswith("#"):
        return None
    name = re.sub(r"^\d{1,2}[.)]\s*", "", match.group("name")).strip().strip("*").strip()
    return name.rstrip(":").strip()


# --------------------------------------------------------------------------- sections format

_ANALYSIS_RE = re.compile(r"<analysis>(?P<body>.*?)</analysis>", re.DOTALL)
_SUMMARY_RE = re.compile(r"<summary>(?P<body>.*)</summary>", re.DOTALL)


def render_sections(sections: Mapping[str, Sequence[str]], analysis: str = "") -> str:
    """Render the ten-section summary of Coding Code's context service.

    Args:
        sections: section name -> bullet texts. Every name must be one of :data:`SECTIONS`;
            they are written in :data:`SECTIONS` order, all ten of them: a missing or empty
            section is written as its heading alone. Newlines inside a bullet become
            indented continuation lines.
        analysis: the free text of the ``<analysis>`` block (may be empty).

    Returns:
        ``<analysis>\\n...\\n</analysis>\\n\\n<summary>\\n### Primary Request\\n- ...\\n\\n
        ### ...\\n</summary>``; it always passes :func:`validate_sections`.

    Raises:
        SummaryFormatError: a name in ``sections`` is not one of :data:`SECTIONS`.

    >>> text = render_sections({"Primary Request": ["fix the pager"]}, "1 message")
    >>> print(text.split("\\n\\n")[0])
    <analysis>
    1 message
    </analysis>
    >>> parse_sections(text).sections["Primary Request"]
    ['fix the pager']
    """
    unknown = [name for name in sections if name not in SECTIONS]
    if unknown:
        raise SummaryFormatError(f"unknown section {unknown[0]!r}; expected one of {SECTIONS}")
    blocks = []
    for name in SECTIONS:
        lines = [f"### {name}"]
        lines.extend(_bullet_line(item) for item in sections.get(name, ()) if item.strip())
        blocks.append("\n".join(lines))
    body = analysis.strip()
    head = f"<analysis>\n{body}\n</analysis>" if body else "<analysis>\n</analysis>"
    return head + "\n\n<summary>\n" + "\n\n".join(blocks) + "\n</summary>"


def parse_sections(text: str) -> ParsedSections:
    """Take a ``sections`` summary apart, checking its structure.

    Inside ``<summary>``, a line starting with ``#`` is a section heading (``### Name``;
    letter case, a trailing colon, ``**bold**`` and a leading ``1.`` are tolerated). A line
    starting with ``-``, ``*``, ``+`` or ``1.`` starts a bullet; any other non-blank line,
    and every line inside a ``` fence, continues the bullet before it (or starts one when
    there is none). Empty bullets are dropped. Section order is not enforced.

    Raises:
        SummaryFormatError: no ``<summary>...</summary>`` block; text before the first
            heading; a heading that is not one of :data:`SECTIONS`; a section given twice;
            a section missing.
    """
    match = _SUMMARY_RE.search(text)
    if match is None:
        if "<summary>" in text:
            raise SummaryFormatError("the <summary> block is not closed by </summary>")
        raise SummaryFormatError("no <summary>...</summary> block in the summary text")
    before = text[: match.start()]
    analysis_match = _ANALYSIS_RE.search(before)
    analysis = analysis_match.group("body").strip() if analysis_match else ""

    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    in_fence = False
    for raw in match.group("body").split("\n"):
        line = raw.rstrip("\r")
        if FENCE_RE.match(line):
            in_fence = not in_fence
        elif not in_fence and (name := _heading_name(line)) is not None:
            canonical = _SECTION_BY_KEY.get(section_key(name))
            if canonical is None:
                raise SummaryFormatError(
                    f"unknown section heading {line.strip()!r}; the ten sections are: "
                    + ", ".join(SECTIONS)
                )
            if canonical in sections:
                raise SummaryFormatError(f"section {canonical!r} appears twice")
            current = sections[canonical] = []
            continue
        if not line.strip() and not in_fence:
            continue
        if current is None:
            raise SummaryFormatError(
                f"text before the first section heading: {line.strip()[:60]!r}"
            )
        if _is_bullet(line) and not in_fence:
            current.append(_bullet_text(line))
        elif current:
            current[-1] = current[-1] + "\n" + _continuation(line)
        else:
            current.append(line.strip())
    missing = [name for name in SECTIONS if name not in sections]
    if missing:
        raise SummaryFormatError("missing section(s): " + ", ".join(repr(m) for m in missing))
    cleaned = {
        name: [b.strip("\n") for b in bullets if b.strip()] for name, bullets in sections.items()
    }
    return ParsedSections(analysis=analysis, sections=cleaned)


def validate_sections(text: str) -> None:
    """Check a model's ``sections`` answer; return quietly when it is valid.

    Raises:
        SummaryFormatError: see :func:`parse_sections` for each rule.
    """
    parse_sections(text)


# --------------------------------------------------------------------------- display summary


def render_display(sections: Mapping[str, Sequence[str]]) -> str:
    """Render a ``[compact_summary]`` display summary (NeoCode's compact protocol).

    Args:
        sections: display section name -> bullet texts; written in :data:`DISPLAY_SECTIONS`
            order. Blank bullets are skipped.

    Raises:
        SummaryFormatError: an unknown section name, or a section without a non-empty bullet
            (the result would not validate).

    >>> print(render_display({s: ["x"] for s in DISPLAY_SECTIONS}).split("\\n\\n")[1])
    done:
    - x
    """
    unknown = [name for name in sections if name not in DISPLAY_SECTIONS]
    if unknown:
        raise SummaryFormatError(
            f"unknown display section {unknown[0]!r}; expected {DISPLAY_SECTIONS}"
        )
    blocks = [DISPLAY_MARKER]
    for name in DISPLAY_SECTIONS:
        bullets = [_bullet_line(b) for b in sections.get(name, ()) if b.strip()]
        if not bullets:
            raise SummaryFormatError(f"display section {name!r} needs at least one bullet")
        blocks.append(f"{name}:\n" + "\n".join(bullets))
    return "\n\n".join(blocks)


def parse_display(text: str) -> dict[str, list[str]]:
    """Take a display summary apart, checking every rule of NeoCode's compact protocol.

    The text starts with ``[compact_summary]`` (leading whitespace tolerated). Then each
    section is a line ``name:`` followed by ``- `` bullets; an indented line continues the
    bullet above it; blank lines are ignored.

    Returns:
        section name -> bullet texts, in text order.

    Raises:
        SummaryFormatError: missing marker; text before the first section; an unknown,
            repeated or missing section; a non-bullet line; a section without a non-empty
            bullet.
    """
    body = text.lstrip()
    if not body.startswith(DISPLAY_MARKER):
        raise SummaryFormatError(
            f"display_summary must start with {DISPLAY_MARKER}; it starts with {body[:30]!r}"
        )
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    current_name = ""
    for raw in body[len(DISPLAY_MARKER) :].split("\n"):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        header = _DISPLAY_HEADER_RE.match(line)
        if header is not None and not _is_bullet(line):
            name = header.group("name").strip()
            if name not in DISPLAY_SECTIONS:
                raise SummaryFormatError(
                    f"unknown display_summary section {name!r}; expected {DISPLAY_SECTIONS}"
                )
            if name in sections:
                raise SummaryFormatError(f"display_summary section {name!r} appears twice")
            current, current_name = sections.setdefault(name, []), name
            continue
        if current is None:
            raise SummaryFormatError(
                f"display_summary has text before its first section: {line.strip()[:60]!r}"
            )
        if _is_bullet(line):
            current.append(_bullet_text(line))
        elif line[:1] in (" ", "\t") and current:
            current[-1] = current[-1] + "\n" + _continuation(line)
        else:
            raise SummaryFormatError(
                f"display_summary section {current_name!r}: line {line.strip()[:60]!r} is "
                "not a '- ' bullet"
            )
    for name in DISPLAY_SECTIONS:
        if name not in sections:
            raise SummaryFormatError(f"display_summary is missing section {name!r}")
        if not any(b.strip() for b in sections[name]):
            raise SummaryFormatError(f"display_summary section {name!r} has no non-empty bullet")
    return {name: [b for b in bullets if b.strip()] for name, bullets in sections.items()}


def validate_display(text: str) -> None:
    """Check a display summary; raise :class:`SummaryFormatError` (see :func:`parse_display`)."""
    parse_display(text)


# --------------------------------------------------------------------------- task-state format

_FENCED_JSON_RE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\n(?P<body>.*?)\n?```$", re.DOTALL)


def validate_task_state(state: Any) -> TaskState:
    """Check a ``task_state`` value against NeoCode's compact protocol; return a :class:`TaskState`.

    Rules: a JSON object with exactly the keys of :data:`TASK_STATE_FIELDS` (none missing,
    none added: the state is the whole durable state, not a patch); ``goal`` and
    ``next_step`` strings; the others lists of non-blank strings.

    Raises:
        SummaryFormatError: naming the first field that breaks a rule.
    """
    if not isinstance(state, Mapping):
        raise SummaryFormatError(f"task_state must be a JSON object, got {type(state).__name__}")
    extra = sorted(str(k) for k in state if k not in TASK_STATE_FIELDS)
    if extra:
        raise SummaryFormatError(
            "task_state has key(s) outside the fixed fields: "
            + ", ".join(extra)
            + f"; allowed: {', '.join(TASK_STATE_FIELDS)}"
        )
    missing = [k for k in TASK_STATE_FIELDS if k not in state]
    if missing:
        raise SummaryFormatError("task_state is missing field(s): " + ", ".join(missing))
    out: dict[str, Any] = {}
    for key in TASK_STATE_FIELDS:
        value = state[key]
        if key in TASK_STATE_STRING_FIELDS:
            if not isinstance(value, str):
                raise SummaryFormatError(
                    f"task_state.{key} must be a string, got {type(value).__name__}"
                )
            out[key] = value
            continue
        if not isinstance(value, list):
            raise SummaryFormatError(
                f"task_state.{key} must be a list of strings, got {type(value).__name__}"
            )
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise SummaryFormatError(
                    f"task_state.{key}[{index}] must be a string, got {type(item).__name__}"
                )
            if not item.strip():
                raise SummaryFormatError(f"task_state.{key}[{index}] is blank")
        out[key] = list(value)
    return cast(TaskState, out)


def parse_task_state(text: str) -> TaskStateSummary:
    """Parse and validate a model's ``task-state`` answer (NeoCode's compact protocol, "生成协议").

    Accepts one JSON object, optionally wrapped in a Markdown fence (```json ... ```), with
    exactly the top-level keys ``task_state`` and ``display_summary``.

    Raises:
        SummaryFormatError: not JSON; not an object; top-level keys other than the two; an
            invalid ``task_state`` (:func:`validate_task_state`); an invalid display summary
            (:func:`parse_display`).

    >>> answer = render_task_state(
    ...     {"goal": "g", "progress": [], "open_items": [], "next_step": "", "blockers": [],
    ...      "key_artifacts": [], "decisions": [], "user_constraints": []},
    ...     render_display({s: ["x"] for s in DISPLAY_SECTIONS}))
    >>> parse_task_state("```json\\n" + answer + "\\n```").task_state["goal"]
    'g'
    """
    body = text.strip()
    fenced = _FENCED_JSON_RE.match(body)
    if fenced is not None:
        body = fenced.group("body").strip()
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise SummaryFormatError(f"the task-state answer is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SummaryFormatError(
            f"the task-state answer must be a JSON object, got {type(data).__name__}"
        )
    extra = sorted(k for k in data if k not in ("task_state", "display_summary"))
    if extra:
        raise SummaryFormatError(
            "unexpected top-level key(s): "
            + ", ".join(extra)
            + "; only task_state and display_summary are allowed"
        )
    for key in ("task_state", "display_summary"):
        if key not in data:
            raise SummaryFormatError(f"the task-state answer has no {key!r}")
    display = data["display_summary"]
    if not isinstance(display, str):
        raise SummaryFormatError(f"display_summary must be a string, got {type(display).__name__}")
    state = validate_task_state(data["task_state"])
    return TaskStateSummary(
        task_state=state, display_summary=display, display_sections=parse_display(display)
    )


def render_task_state(state: Mapping[str, Any], display: str) -> str:
    """Render the JSON answer of NeoCode's compact protocol (``task_state``, ``display_summary``).

    Fields are written in :data:`TASK_STATE_FIELDS` order, indented by two spaces, non-ASCII
    characters as themselves. The result always passes :func:`parse_task_state`.

    Raises:
        SummaryFormatError: ``state`` or ``display`` is invalid.
    """
    checked = validate_task_state(state)
    validate_display(display)
    ordered = {key: cast(Mapping[str, Any], checked)[key] for key in TASK_STATE_FIELDS}
    return json.dumps(
        {"task_state": ordered, "display_summary": display}, ensure_ascii=False, indent=2
    )


# --------------------------------------------------------------------------- truncation


@dataclass
class _Unit:
    lines: list[str]
    group: int
    kept: bool = True

    @property
    def size(self) -> int:
        return sum(len(line) for line in self.lines) + len(self.lines) - 1


@dataclass
class _Group:
    min_keep: int
    units: list[_Unit] = field(default_factory=list)

    def kept(self) -> list[_Unit]:
        return [u for u in self.units if u.kept]


def _split_for_truncation(text: str) -> tuple[list[list[str] | _Unit], list[_Group], int]:
    """Cut ``text`` into fixed lines and droppable units grouped by section.

    Returns ``(segments, groups, analysis_group)``; ``analysis_group`` is the index of the
    ``<analysis>`` body group (min_keep 0) or -1.
    """
    lines = text.split("\n")
    segments: list[list[str] | _Unit] = []
    groups: list[_Group] = []
    analysis_group = -1
    sections_mode = "<summary>" in text and "</summary>" in text
    display_mode = not sections_mode and text.lstrip().startswith(DISPLAY_MARKER)
    in_summary = not sections_mode
    in_analysis = False
    in_fence = False
    current: _Unit | None = None
    group = -1

    def fixed(line: str) -> None:
        nonlocal current
        current = None
        segments.append([line])

    for index, line in enumerate(lines):
        stripped = line.strip()
        if sections_mode and not in_fence:
            if stripped == "<analysis>" and group == -1:
                in_analysis = True
                groups.append(_Group(min_keep=0))
                group = analysis_group = len(groups) - 1
                fixed(line)
                continue
            if stripped == "</analysis>" and in_analysis:
                in_analysis = False
                group = -1
                fixed(line)
                continue
            if stripped == "<summary>" and not in_summary:
                in_summary = True
                group = -1
                fixed(line)
                continue
            if (
                stripped == "</summary>"
                and in_summary
                and index == _last_index(lines, "</summary>")
            ):
                in_summary = False
                group = -1
                fixed(line)
                continue
        if in_analysis:
            unit = _Unit([line], group)
            groups[group].units.append(unit)
            segments.append(unit)
            continue
        if not in_summary or (display_mode and index == 0):
            fixed(line)
            continue
        fence = FENCE_RE.match(line) is not None
        is_heading = not in_fence and (
            _heading_name(line) is not None
            if not display_mode
            else (_DISPLAY_HEADER_RE.match(line) is not None and not _is_bullet(line))
        )
        if not sections_mode and not display_mode and not in_fence and not _is_bullet(line):
            is_heading = is_heading or stripped.endswith(":")
        if is_heading:
            groups.append(_Group(min_keep=1))
            group = len(groups) - 1
            fixed(line)
            continue
        if not stripped and not in_fence:
            fixed(line)
            continue
        if group == -1:
            groups.append(_Group(min_keep=1))
            group = len(groups) - 1
        starts_unit = current is None or (not in_fence and _is_bullet(line) and not fence)
        if display_mode and current is not None and not in_fence and line[:1] in (" ", "\t"):
            starts_unit = False
        if starts_unit:
            current = _Unit([line], group)
            groups[group].units.append(current)
            segments.append(current)
        else:
            assert current is not None
            current.lines.append(line)
        if fence:
            in_fence = not in_fence
    return segments, groups, analysis_group


def _last_index(lines: list[str], wanted: str) -> int:
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].strip() == wanted:
            return index
    return -1


def _join(segments: list[list[str] | _Unit]) -> str:
    out: list[str] = []
    for segment in segments:
        if isinstance(segment, _Unit):
            if segment.kept:
                out.extend(segment.lines)
        else:
            out.extend(segment)
    return "\n".join(out)


def truncate_at_bullet(
    text: str,
    max_chars: int = DEFAULT_MAX_SUMMARY_CHARS,
    keep: Callable[[str], bool] | None = None,
) -> str:
    """Cut a summary to at most ``max_chars`` characters at bullet boundaries.

    Works on both formats (a ``<summary>`` text, or a ``[compact_summary]`` display
    summary) and on plain Markdown bullet lists. Headings, the marker and the
    ``<analysis>``/``<summary>`` tags are never removed, so a valid input stays valid.
    The cut, in order, stops as soon as the text fits:

    1. the ``<analysis>`` body (free reasoning) loses lines from its end, down to nothing;
    2. the section with the most characters of bullets, among those with two or more,
       loses its last bullet (ties: the later section); repeat. Each section keeps its
       first bullet, so the earliest, usually most important, item survives;
    3. the longest remaining bullet is shortened with ``…``, to no less than
       :data:`MIN_BULLET_CHARS` characters; repeat.

    A bullet for which ``keep(bullet text)`` is true (e.g. one quoting a pinned user
    constraint) is never dropped nor shortened.

    If the skeleton (tags, headings, kept bullets and one shortened bullet per section) is
    itself longer than ``max_chars``, that skeleton is returned: longer than asked, but still
    valid.
    The default maximum, 1200, is NeoCode's compact protocol's ``max_summary_chars``.

    >>> text = "[compact_summary]\\n\\ndone:\\n- a\\n- bbbbbbbbbb\\n\\nin_progress:\\n- c"
    >>> truncate_at_bullet(text, 40)
    '[compact_summary]\\n\\ndone:\\n- a\\n\\nin_progress:\\n- c'
    """
    if max_chars < 0:
        raise ValueError(f"max_chars must be >= 0, got {max_chars}")
    if len(text) <= max_chars:
        return text
    segments, groups, analysis_group = _split_for_truncation(text)
    total = len(text)
    protected = (
        {id(u) for g in groups for u in g.units if keep("\n".join(u.lines))} if keep else set()
    )

    def droppable(g: _Group) -> list[_Unit]:
        return [u for u in g.kept() if id(u) not in protected]

    def drop(unit: _Unit) -> None:
        nonlocal total
        unit.kept = False
        total -= unit.size + 1

    if analysis_group >= 0:
        for unit in reversed(groups[analysis_group].units):
            if total <= max_chars:
                break
            drop(unit)
    while total > max_chars:
        candidates = [
            (sum(u.size for u in g.kept()), index)
            for index, g in enumerate(groups)
            # a section keeps its first bullet besides those quoting a constraint
            if index != analysis_group
            and len(g.kept()) > max(g.min_keep, 1)
            and len(droppable(g)) > (1 if protected & {id(u) for u in g.kept()} else 0)
        ]
        if not candidates:
            break
        _, index = max(candidates)
        drop(droppable(groups[index])[-1])
    while total > max_chars:
        kept = [
            u
            for g in groups
            for u in g.kept()
            if u.size > MIN_BULLET_CHARS and id(u) not in protected
        ]
        if not kept:
            break
        longest = max(kept, key=lambda u: u.size)
        before = longest.size
        joined = "\n".join(longest.lines)
        limit = max(MIN_BULLET_CHARS, before - (total - max_chars))
        lines = clip(joined, limit, reach=16, keep=(1, 2), trim=None).split("\n")
        if sum(1 for line in lines if FENCE_RE.match(line)) % 2:
            lines.append("```")  # never leave a code fence open: it would swallow headings
        after = sum(len(line) for line in lines) + len(lines) - 1
        if after >= before:
            break
        total -= before - after
        longest.lines = lines
    return _join(segments)


# --------------------------------------------------------------------------- resuming

#: The first words of every summary as an agent resumes from it (:func:`resume_text`).
RESUME_PREAMBLE = "This session continues from a compacted conversation"


def resume_text(summary_text: str, transcript_path: str | None = None) -> str:
    """A summary framed for the agent that resumes from it (issue 15, point 12).

    The agent receives the summary in place of the messages it replaces; a bare user
    message starting with ``<analysis>`` reads like a request. So, as Claude Code's
    continuation message does, the text says that the session continues from a compacted
    conversation, where the full transcript is (when ``transcript_path`` is given), and
    to continue from the summary and the messages after it. The ``<analysis>`` block of a
    ``sections`` summary (the summarizer's notes) is left out; the ``<summary>`` block,
    and a ``task-state`` JSON answer, follow whole.

    Args:
        summary_text: a ``summaryText`` or a tier of either format.
        transcript_path: the transcript's path, or ``None`` (``-``, stdin, is not named).

    Returns:
        The framed text: the preamble paragraph, a blank line, the summary.

    >>> print(resume_text("<analysis>\\nnotes\\n</analysis>\\n\\n<summary>\\n### Primary Request\\n"
    ...                   "- fix it\\n</summary>", "/tmp/s.jsonl").split("\\n\\n", 1)[1])
    <summary>
    ### Primary Request
    - fix it
    </summary>
    """
    body = summary_text
    match = _ANALYSIS_RE.search(body)
    if match is not None and "<summary>" in body[match.end() :]:
        body = (body[: match.start()] + body[match.end() :]).strip()
    where = (
        f"; the full transcript is at {transcript_path}"
        if transcript_path and transcript_path != "-"
        else ""
    )
    preamble = (
        f"{RESUME_PREAMBLE}: the summary below replaces its earlier messages{where}. "
        + (
            "Read it there when you need an exact detail the summary leaves out (a code "
            "snippet, an error message, a command's output). "
            if where
            else ""
        )
        + "Continue the work from the summary and the messages after it, with the user's "
        "latest request and the next step it names; do not ask the user to repeat what "
        "the summary already says."
    )
    return f"{preamble}\n\n{body}"
