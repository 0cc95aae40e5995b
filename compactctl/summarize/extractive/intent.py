"""What the user and the assistant mean: constraints, deferrals, decisions, next steps.

Keyword rules over single sentences (English and Chinese), and the shortening of a user
message that keeps every constraint sentence whole. The constraint words are the
``extractive`` selection of :data:`compactctl.text.CONSTRAINT_WORDS`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

from compactctl.summarize.extractive.prose import (
    LEDGER_LINE_MAX,
    has_cjk,
    inline,
    join_sentences,
    split_sentences,
)
from compactctl.text import (
    CLAUDE_CODE_INJECTED,
    CODEX_INJECTED,
    CONSTRAINT_WORDS,
    ELLIPSIS,
    EXTRACTIVE,
    clip,
    constraint_re,
    folds_to_ascii,
)

__all__ = [
    "CHECKBOX_RE",
    "INSTRUCTION_FILES",
    "injected_instructions",
    "instruction_file",
    "DECISION_WORDS",
    "EXPLICIT_DECISION_WORDS",
    "DEFER_RE",
    "DEFER_WORDS",
    "holds_word",
    "may_hold",
    "NEXT_WORDS",
    "NEGATIVE_WORDS",
    "CONSTRAINT_LITERALS",
    "PENDING_WORDS",
    "NEXT_LABEL_RE",
    "NEXT_RE",
    "PENDING_RE",
    "CONTEXT_MAX",
    "clear_caches",
    "constraint_flags",
    "constraint_sentences",
    "constraint_text",
    "decision_rank",
    "long_enough",
    "NOT_SPOKEN_PREFIXES",
    "referent",
    "refers_back",
    "required_literal",
    "sentence_flags",
    "shorten_user",
    "spoken_by_user",
    "states_constraint",
]

#: A Markdown checkbox item: ``- [ ] text`` (open) or ``- [x] text`` (done).
CHECKBOX_RE = re.compile(r"^\s*[-*+]\s+\[(?P<mark>[ xX])\]\s+(?P<text>\S.*?)\s*$")

_CONSTRAINT_RE = constraint_re(EXTRACTIVE)
_ELLIPSES_RE = re.compile(r"…(?:\s*…)+")

# Prefilter tables. One row an alternative of a regex: the regex fragment (an English one
# matched between word boundaries, case-insensitively, unless the table's rows carry their
# own ``\b``; a CJK one anywhere), then the literal every match of it holds, lower-cased,
# when that is not the fragment itself. The regex and its words (the prefilter of
# :func:`holds_word`) are both built from the table (:func:`_table_re`,
# :func:`_table_words`), and each literal is checked against its fragment on import
# (:func:`required_literal`), so the two cannot drift apart.

_DEFER_TABLE = r"""
    not now
    later
    todo
    to-do
    follow[- ]up            follow
    at some point
    before the release
    eventually
    不是现在
    以后再
    稍后
    之后再
    回头再
"""
_PENDING_TABLE = r"""
    left undone             undone
    still need(?:s)? to     need
    need to .{0,40}later    need
    todo
    to-do
    later
    follow[- ]up            follow
    not done
    not yet
    still open
    remaining
    pending
    open item
    haven't
    have not (?:yet )?(?:done|started|finished)     have not
    待办
    还需要
    尚未
    未完成
    还没做
    稍后
    以后再
    之后再做
    遗留
    记下
"""
_NEXT_TABLE = r"""
    \bnext step\b                                       next
    \bnext,? (?:i|we)(?:'ll| will| should| need)\b      next
    \bnext(?: up)?:                                     next
    \bthen i(?:'ll| will)\b                             then i
    下一步
    接下来
"""
_EXPLICIT_DECISION_TABLE = r"""
    decision                deci
    decided                 deci
    decide                  deci
    we agreed               agreed
    决定                    决
    决策                    决
"""
_REASONED_DECISION_TABLE = r"""
    instead of
    rather than
    because
    so that
    trade-?off              trade
    而不是
    因为
    为了
    以免
    避免
    不引入
    改用
"""
_INTENT_DECISION_TABLE = r"""
    i'll                    'll
    i will                  will
    we'll                   'll
    we will                 will
    switching to
    going with
    chose
    choose
    opted
    prefer
    keeping
    改成
    改为
    选择
    回退
    采用
"""
_NEGATIVE_TABLE = r"""
    do not                  not
    don't                   n't
    dont
    never
    must not                not
    mustn't                 n't
    should not              not
    shouldn't               n't
    cannot                  not
    can't                   n't
    not allowed             not
    no new
    leave \w+ alone         leave
    不要
    不能
    不得
    禁止
    不允许
    不可以
"""

_REGEX_SPECIAL = frozenset("\\.^$*+?{}[]|()")


def required_literal(fragment: str) -> str:
    """The literal text every match of a regex ``fragment`` holds, lower-cased: its opening
    up to the first special character (a leading ``\\b`` skipped; the character before a
    ``?``, ``*`` or ``{`` left out, being optional). The check of the prefilter tables.

    >>> [required_literal(f) for f in ("next(?: up)?:", "trade-?off", "follow[- ]up")]
    ['next', 'trade', 'follow']
    """
    text = fragment.removeprefix("\\b")
    for index, char in enumerate(text):
        if char in _REGEX_SPECIAL:
            text = text[: index - 1 if char in "?*{" else index]
            break
    return text.strip().lower()


def _table(table: str) -> tuple[tuple[str, str], ...]:
    """The ``(fragment, literal)`` rows of a prefilter table (see the tables above).

    Raises:
        ValueError: a row's literal is empty or not in what its fragment requires
            (:func:`required_literal`): the prefilter would skip a text the regex matches.
    """
    rows = []
    for line in table.strip().split("\n"):
        fragment, *rest = re.split(r"\s{2,}", line.strip(), maxsplit=1)
        literal = rest[0] if rest else fragment
        if not literal or literal not in required_literal(fragment):
            raise ValueError(f"prefilter word {literal!r} is not in every match of {fragment!r}")
        rows.append((fragment, literal))
    return tuple(rows)


def _table_re(rows: tuple[tuple[str, str], ...], *, bounded: bool = True) -> re.Pattern[str]:
    """The case-insensitive regex of a table's fragments: ``\\b(?:english|...)\\b|cjk|...``
    (the shape of :func:`compactctl.text.constraint_re`), or with ``bounded=False`` every
    fragment as it is (its own ``\\b``), in the table's order."""
    english = [f for f, _ in rows if f.isascii()]
    cjk = [f for f, _ in rows if not f.isascii()]
    head = r"\b(?:" + "|".join(english) + r")\b" if bounded else "|".join(english)
    return re.compile("|".join([head, *cjk]), re.IGNORECASE)


def _table_words(*tables: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """The distinct literals of the tables' rows, in order: a prefilter word list."""
    return tuple(dict.fromkeys(literal for rows in tables for _, literal in rows))


_DEFER = _table(_DEFER_TABLE)
_PENDING = _table(_PENDING_TABLE)
_NEXT = _table(_NEXT_TABLE)
_DECISIONS = (
    (3, _table(_EXPLICIT_DECISION_TABLE)),
    (2, _table(_REASONED_DECISION_TABLE)),
    (1, _table(_INTENT_DECISION_TABLE)),
)
_NEGATIVE = _table(_NEGATIVE_TABLE)

#: A sentence that puts something off ("not now", "later", 以后再 ...): never a constraint;
#: in a user message it is a pending task.
DEFER_RE = _table_re(_DEFER)
#: A sentence of the assistant that leaves something open (a pending task).
PENDING_RE = _table_re(_PENDING)
_DECISION_RES = tuple((rank, _table_re(rows)) for rank, rows in _DECISIONS)
#: A sentence that states the next step.
NEXT_RE = _table_re(_NEXT, bounded=False)
_NEGATIVE_RE = _table_re(_NEGATIVE)
#: Literals, lower-cased, one of which every match of :data:`DEFER_RE`, :data:`PENDING_RE`,
#: :data:`NEXT_RE` and the patterns of :func:`decision_rank` holds (each alternative of the
#: regex holds one of its words; built from the same table): a text none of whose words
#: :func:`holds_word` cannot match the regex, nor can any sentence of it (a sentence is a
#: substring of its text). On the 32 MB bench session's assistant texts, the pending words
#: are in 2 of 2,559, the next-step words in 547, the decision words in 866.
DEFER_WORDS = _table_words(_DEFER)
PENDING_WORDS = _table_words(_PENDING)
NEXT_WORDS = _table_words(_NEXT)
DECISION_WORDS = _table_words(*(rows for _, rows in _DECISIONS))
#: The words of an explicit decision (rank 3 of :func:`decision_rank`) alone: ``eval``'s
#: decision probes (:mod:`compactctl.evaluate.probes`).
EXPLICIT_DECISION_WORDS = _table_words(_DECISIONS[0][1])
#: Literals, lower-cased, one of which every match of :data:`_NEGATIVE_RE` holds ("do not",
#: "must not", "should not", "not allowed" and "cannot" hold ``not``; "don't", "mustn't",
#: "shouldn't", "can't" hold ``n't``).
NEGATIVE_WORDS = _table_words(_NEGATIVE)


def holds_word(text: str, words: tuple[str, ...]) -> bool:
    """Whether ``text`` holds one of ``words`` (lower-case literals) in any case, as an
    ``re.IGNORECASE`` pattern would find it: the prefilter of :data:`DEFER_WORDS` and its
    siblings, a few ``str.find`` instead of a regex tried at every position of every
    sentence. Always true for a text with one of
    :data:`compactctl.text.FOLDS_TO_ASCII` (``str.lower`` keeps those).

    >>> holds_word("We DECIDED to keep it.", DECISION_WORDS), holds_word("ok", NEXT_WORDS)
    (True, False)
    """
    return may_hold(None if folds_to_ascii(text) else text.lower(), words)


#: The label in front of a next step ("Next step:", 下一步：), removed from it.
NEXT_LABEL_RE = re.compile(
    r"^(?:the )?(?:next steps?|next up|next|下一步|接下来)\s*[:：,，]\s*", re.IGNORECASE
)


NOT_SPOKEN_PREFIXES = (*CLAUDE_CODE_INJECTED, *CODEX_INJECTED)
"""Openings of user-role text the user did not type (issue 15, point 10): Claude Code's
task notifications, system reminders, slash-command echoes, hook and local-command output
(:data:`compactctl.text.CLAUDE_CODE_INJECTED`), and Codex's environment context, instruction
blocks and other items it injects (:data:`compactctl.text.CODEX_INJECTED`): the lists the
importers use. Such a message is never a request, a constraint or "the user said"."""


#: The base names of agent instruction files: Codex and others (AGENTS.md), Claude Code
#: (CLAUDE.md, CLAUDE.local.md), Gemini CLI (GEMINI.md), Cursor (.cursorrules), Windsurf
#: (.windsurfrules), Cline (.clinerules), GitHub Copilot (copilot-instructions.md).
INSTRUCTION_FILES = frozenset(
    {
        "AGENTS.md",
        "AGENT.md",
        "CLAUDE.md",
        "CLAUDE.local.md",
        "GEMINI.md",
        ".cursorrules",
        ".windsurfrules",
        ".clinerules",
        "copilot-instructions.md",
    }
)
_CONTEXT_FROM_RE = re.compile(
    r"^--- Context from: (?P<name>[^\n]+?) ---\n(?P<body>.*?)"
    r"(?:^--- End of Context from: (?P=name) ---$|\Z)",
    re.MULTILINE | re.DOTALL,
)
_USER_INSTRUCTIONS_RE = re.compile(
    r"<user_instructions>\s*(?P<body>.*?)\s*(?:</user_instructions>|\Z)", re.DOTALL
)
_CONTENTS_OF_RE = re.compile(
    r"^Contents of (?P<name>\S+) \([^\n]*\):\n\n?(?P<body>.*?)(?=^Contents of \S+ \(|\Z)",
    re.MULTILINE | re.DOTALL,
)


def instruction_file(path: str) -> bool:
    """Whether ``path`` names an agent instruction file (:data:`INSTRUCTION_FILES`).

    >>> instruction_file("/repo/CLAUDE.md"), instruction_file("CLAUDE.md.bak")
    (True, False)
    """
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] in INSTRUCTION_FILES


def injected_instructions(text: str) -> list[tuple[str, str]]:
    """The instruction files injected into a message's ``text``, as ``(name, body)``:
    Gemini CLI's ``--- Context from: GEMINI.md ---`` blocks, Claude Code's ``Contents of
    /x/CLAUDE.md (...):`` blocks, Codex's ``<user_instructions>`` (name ``AGENTS.md``).

    >>> injected_instructions("--- Context from: GEMINI.md ---\\nUse tabs.\\n"
    ...                       "--- End of Context from: GEMINI.md ---")
    [('GEMINI.md', 'Use tabs.')]
    """
    found = [(m["name"], m["body"].strip()) for m in _CONTEXT_FROM_RE.finditer(text)]
    found += [(m["name"], m["body"].strip()) for m in _CONTENTS_OF_RE.finditer(text)]
    found += [("AGENTS.md", m["body"].strip()) for m in _USER_INSTRUCTIONS_RE.finditer(text)]
    return [(name, body) for name, body in found if body]


def spoken_by_user(message: Mapping[str, Any], text: str) -> bool:
    """Whether a message is the user speaking: role ``user``, not an earlier summary
    (``summaryOf``), not injected (``isMeta``, ``isDemo``) and ``text`` (its text) not
    opening with one of :data:`NOT_SPOKEN_PREFIXES`.

    >>> spoken_by_user({"role": "user"}, "Fix the pager.")
    True
    >>> spoken_by_user({"role": "user"}, "<task-notification><status>completed</status>")
    False
    >>> spoken_by_user({"role": "user", "isMeta": True}, "Fix the pager.")
    False
    """
    if message.get("role") != "user" or message.get("summaryOf"):
        return False
    if message.get("isMeta") or message.get("isDemo"):
        return False
    return not text.lstrip().startswith(NOT_SPOKEN_PREFIXES)


_NOT_AFTER_ONLY = (
    r"the|a|an|one|two|three|four|five|half|part|partly|some|few|\d+|this|that|these|those|"
    r"it|its|i|we|you|he|she|they|my|our|your|his|her|their|"
    r"when|if|after|before|then|once|now|because|since|as|so|in|on|at|for|with|by|about|"
    r"around|recently|yesterday|today|slightly"
)
"""Words after an opening "only" that make it say which, how many or when (a determiner,
a number, a pronoun, a conjunction or preposition of time or cause), not what the user
allows: the sentence is no standing rule by its opening (:data:`_STANDING_START_RE`)."""
_STANDING_START_RE = re.compile(
    r"^(?:(?:please|and|also|but|so|just)[,\s]+)?"
    rf"(?:always|only(?!\s+(?:{_NOT_AFTER_ONLY})\b)|keep|stay|avoid|without|must)\b"
    r"|^(?:必须|务必|只能|保持|保留|始终|一律)",
    re.IGNORECASE,
)
"""A sentence that opens with a standing rule: "always", "only" followed by what it allows
("Only touch src/", "Only use the stdlib"; not when "only" says how many, which or when:
"Only the second test fails", "Only 3 tests fail now", "Only then did it work": the
words of :data:`_NOT_AFTER_ONLY`), "keep", "stay", "avoid", "without", "must", and their
Chinese forms."""
_TASK_START_RE = re.compile(
    r"^(?:(?:please|and|also|then|now|first|next)[,\s]+)?"
    r"(?:add|fix|write|create|implement|make|update|run|change|rename|move|remove|delete|"
    r"refactor|build|test|check|look|find|investigate|set|put|ensure|try|report|use|"
    r"document|bump|release|ship|split|merge|port|wire|hook|extend|support)\b",
    re.IGNORECASE,
)


#: An enumeration label in front of a sentence ("Step 3:", "2.", "(a)"): not part of a rule.
_ENUM_LABEL_RE = re.compile(
    r"^(?:(?:step|phase|part|stage|task|item)\s*\d+[a-z]?\s*[:.)-]?|\d+[.)]|\([a-z0-9]\))\s*",
    re.IGNORECASE,
)
#: A prompt to go on with the work ("keep going", "continue", "Step 3: carry on"): a turn of
#: the conversation, never a standing rule (issue 15: a new user found "Step 3: keep going"
#: listed as a constraint).
_PROGRESS_RE = re.compile(
    r"^(?:(?:ok(?:ay)?|yes|good|great|thanks|please|so|now|and|then|just)\b[,!.\s]*)*"
    r"(?:continue|keep (?:going|at it|on|working|it up|trying|pushing)|carry on|go on|"
    r"go ahead|proceed|resume|move on|press on)\b|^(?:继续|接着)",
    re.IGNORECASE,
)
_RULE_WORD_RE = re.compile(r"\b(?:always|must)\b|必须|始终|一律", re.IGNORECASE)


#: Literals, lower-cased, one of which every match of the extractive constraint regex
#: (:func:`compactctl.text.constraint_re`) holds: each of its words as far as it is literal
#: (:func:`required_literal`: "leave \w+ alone" holds ``leave``).
CONSTRAINT_LITERALS = tuple(
    required_literal(word) for word, users in CONSTRAINT_WORDS if EXTRACTIVE in users
)


def states_constraint(sentence: str) -> bool:
    """Whether a sentence states a standing user instruction (issue 15, point 2): a rule
    for the whole session, never a task.

    - a prohibition anywhere ("do not", "never", "must not", "no new", 不要 ...) is one;
    - a sentence that opens with "always", "only", "keep", "avoid", "must", 必须 ... is one
      (:data:`_STANDING_START_RE`: not "Only the second test fails");
    - another constraint word (:func:`compactctl.text.constraint_re`: "must", "keep",
      "make sure" ...) makes one unless the sentence opens with a task verb ("Add a record
      ... and make sure validation rejects it" is a task);
    - nothing deferred ("not now", "later") is a constraint, nor a prompt to go on
      ("Step 3: keep going", "continue without stopping") without a prohibition, "always"
      or "must" in it.

    >>> states_constraint("Do not add deps."), states_constraint("Do not do it now, later.")
    (True, False)
    >>> states_constraint("Add a record and make sure validation rejects it.")
    False
    >>> states_constraint("Always run ruff before you report back.")
    True
    >>> states_constraint("Without the flag the output must stay exactly as it is today.")
    True
    >>> states_constraint("Step 3: keep going."), states_constraint("Keep going, never ask.")
    (False, True)
    >>> states_constraint("Only touch src/."), states_constraint("Only the second test fails.")
    (True, False)
    """
    # Each unanchored regex below runs only when the sentence holds one of its words (the
    # body is a substring of the sentence): ~20 µs of case-insensitive searches a sentence
    # otherwise, on every user sentence that eval and the summarizer read.
    low = None if folds_to_ascii(sentence) else sentence.lower()
    if may_hold(low, DEFER_WORDS) and DEFER_RE.search(sentence) is not None:
        return False
    body = _LABEL_PREFIX_RE.sub("", sentence.strip().lstrip("-*• ")).strip()
    body = _ENUM_LABEL_RE.sub("", body).strip()
    negative = may_hold(low, NEGATIVE_WORDS) and _NEGATIVE_RE.search(body) is not None
    if _PROGRESS_RE.match(body) and not negative and _RULE_WORD_RE.search(body) is None:
        return False
    if negative or _STANDING_START_RE.match(body) is not None:
        return True
    return (
        may_hold(low, CONSTRAINT_LITERALS)
        and _CONSTRAINT_RE.search(body) is not None
        and _TASK_START_RE.match(body) is None
    )


def may_hold(low: str | None, words: tuple[str, ...]) -> bool:
    """Whether ``low`` (a lower-cased text, ``None`` for one with a character of
    :data:`compactctl.text.FOLDS_TO_ASCII`) may hold one of ``words``: :func:`holds_word`
    with the text lower-cased once for several word lists (``eval``'s probes and
    :func:`states_constraint`).

    A loop, not ``any()`` over a generator: half the time on a user sentence of the ``make
    bench`` corpus (it runs up to three times a sentence). A CJK word costs nothing in an
    ASCII text (``in`` answers at once when the word holds a wider character than the text),
    so one word list serves both.

    >>> may_hold("we decided", ("agreed", "decide")), may_hold("ok", ("no",)), may_hold(None, ())
    (True, False, True)
    """
    if low is None:
        return True
    for word in words:  # noqa: SIM110 (the point: no generator)
        if word in low:
            return True
    return False


#: A reference back to something named before the sentence: "the flag", "this option",
#: "these files", or a pronoun as the thing ruled on ("It must ...", "never touch it").
_REFERS_BACK_RE = re.compile(
    r"\b(?:the|this|that|these|those|such)\s+(?:new\s+)?(?:flag|option|switch|setting|"
    r"parameter|argument|file|function|method|class|module|field|column|command|endpoint|"
    r"test|change|fix|feature|script|variable|check|rule|tool|one)s?\b"
    r"|^(?:it|this|that|these|those|they|them)\b"
    r"|\b(?:touch|change|modify|remove|delete|rename|move|revert|edit|keep|leave)\s+"
    r"(?:it|them|this|that|these|those)\b(?! (?:is|are|was|were)\b)",
    re.IGNORECASE,
)
#: What names a thing in a sentence: code in backticks, an option, a path, a file or
#: dotted module name, a snake_case or CamelCase identifier.
_NAMES_RE = re.compile(
    r"`[^`]+`|(?<![\w-])--?[A-Za-z][\w-]+|\S+/\S*|\b\w+(?:\.[A-Za-z_]\w*)+\b"
    r"|\b[A-Za-z]+_\w+|\b[A-Z][a-z0-9]+[A-Z]\w*"
)


def refers_back(sentence: str) -> bool:
    """Whether ``sentence`` rules on something it does not name itself ("Without the flag
    the output must stay as it is"): it then needs the sentence before it.

    >>> refers_back("Without the flag the output must stay exactly as it is today.")
    True
    >>> refers_back("Without the `--dry-run` flag nothing is written."), refers_back(
    ...     "Keep src/legacy.py as it is.")
    (False, False)
    """
    return _REFERS_BACK_RE.search(sentence) is not None and _NAMES_RE.search(sentence) is None


#: The longest sentence a constraint brings along to name what it refers to, in characters.
CONTEXT_MAX = 300
#: At most this many names of the sentence before a constraint that refers back to it.
REFERENTS_MAX = 3


def referent(before: str) -> str:
    """What a constraint that :func:`refers_back` is about, for its ``(re: ...)`` note: the
    names of ``before`` (the sentence before it: code in backticks, options, paths,
    identifiers; :data:`_NAMES_RE`), the first :data:`REFERENTS_MAX`, each verbatim (a
    closing ``.`` or ``,`` of an unquoted one left out); ``before`` whole when it names
    nothing. The names, not the sentence: the sentence is often a task ("Next, add a
    `--since-days` option ..."), and a summary listing it among the standing constraints
    has the task done again (a fresh-user trial of the shipped sample).

    >>> referent("Next, add a `--since-days` option to `quillpad export` for N days.")
    '`--since-days`, `quillpad export`'
    >>> referent("Edit src/app/cli.py, then run it."), referent("Add a verbose flag.")
    ('src/app/cli.py', 'Add a verbose flag.')
    """
    names: list[str] = []
    for found in _NAMES_RE.findall(before):
        name = found if found.startswith("`") else found.rstrip(".,;:!?)\"'")
        if name and name not in names:
            names.append(name)
    return ", ".join(names[:REFERENTS_MAX]) if names else before.strip()


@overload
def constraint_sentences(
    text: str, words: re.Pattern[str] | None = ..., pairs: Literal[False] = ...
) -> list[str]: ...
@overload
def constraint_sentences(
    text: str, words: re.Pattern[str] | None, pairs: Literal[True]
) -> list[tuple[str, str]]: ...
def constraint_sentences(
    text: str, words: re.Pattern[str] | None = None, pairs: bool = False
) -> list[str] | list[tuple[str, str]]:
    """The constraints a user message states, in order, each as it is to be listed: a
    sentence for which :func:`states_constraint` holds (and ``words`` matches, when given),
    verbatim; one that :func:`refers_back` is followed by what the sentence before it names
    (:func:`referent`: "Without the flag the output must stay. (re: `--since-days`)"), or
    by that sentence itself when it names nothing; with no such sentence (the first of its
    message, a question, or one longer than :data:`CONTEXT_MAX`) it is not listed at all,
    rather than stated with the wrong meaning (issue 15: a summary states no fact the
    transcript does not support). The sentence before is never listed as the rule: it is
    often the task the rule goes with ("Add a `--since-days` option."), and a task listed as
    a standing constraint is done again by an agent that resumes from the summary.
    ``pairs=True`` gives ``(the constraint sentence alone, as listed)`` pairs.

    >>> constraint_sentences("Add a `--json` flag. Without the flag the output must stay.")
    ['Without the flag the output must stay. (re: `--json`)']
    >>> constraint_sentences("Without the flag the output must stay. Do not add deps.")
    ['Do not add deps.']
    """
    sentences, flags = sentence_flags(text)
    out = []
    for index, (sentence, listed) in enumerate(zip(sentences, flags, strict=True)):
        if not listed or (words is not None and words.search(sentence) is None):
            continue
        whole = sentence
        if refers_back(sentence):
            whole = f"{sentence} (re: {referent(sentences[index - 1])})"
        out.append((sentence, whole))
    if pairs:
        return out
    return [whole for _, whole in out]


def constraint_flags(sentences: Sequence[str]) -> tuple[bool, ...]:
    """The standing constraints of a user message: for each of its sentences (as
    :func:`~compactctl.summarize.extractive.prose.split_sentences` gives them), whether it
    is a constraint to list. It is when it states one (:func:`states_constraint`), is no
    question, and names what it rules on or follows a sentence that does
    (:func:`refers_back`; that sentence no question and at most :data:`CONTEXT_MAX`
    characters).

    The one rule of both sides: the extractive summarizer lists these
    (:func:`constraint_sentences`, through :func:`sentence_flags`) and ``eval`` makes its
    ``user_constraint`` probes of these (:mod:`compactctl.evaluate.probes`), so a
    constraint the summary leaves out on purpose ("Don't touch it." with nothing before it
    to say what "it" is: no reader could follow it) is no probe that counts as lost.

    >>> constraint_flags(["Don't touch it.", "Do not add deps.", "Must it stay?"])
    (False, True, False)
    >>> constraint_flags(["Keep `page_of` as it is.", "Don't touch it."])
    (True, True)
    """
    return tuple(_listed(sentences, i) for i in range(len(sentences)))


def _listed(sentences: Sequence[str], index: int) -> bool:
    """Whether the sentence at ``index`` is a constraint that can be listed: it states one,
    is no question, and names what it rules on or follows a sentence that does."""
    sentence = sentences[index]
    if sentence.endswith(("?", "？")) or not states_constraint(sentence):
        return False
    if not refers_back(sentence):
        return True
    before = sentences[index - 1] if index > 0 else ""
    return bool(before) and not before.endswith(("?", "？")) and len(before) <= CONTEXT_MAX


def long_enough(sentence: str) -> bool:
    """Whether a sentence is long enough to be a task: 8 characters with CJK, else 20."""
    return len(sentence) >= (8 if has_cjk(sentence) else 20)


def decision_rank(sentence: str) -> int:
    """3 for an explicit decision, 2 for a reasoned one, 1 for a stated intent, else 0.

    >>> decision_rank("Decision: keep strptime."), decision_rank("I'll add a test.")
    (3, 1)
    """
    for rank, pattern in _DECISION_RES:
        if pattern.search(sentence):
            return rank
    return 0


_LABEL_PREFIX_RE = re.compile(
    r"^(?:constraints?|requirements?|rules?|please|heads-up|note|important|also|nb|"
    r"约束|要求|注意|另外|提醒)\s*[:：]\s*",
    re.IGNORECASE,
)


def without_label(sentence: str) -> str:
    """``sentence`` without a leading label such as ``Constraints:`` (whole, unclipped).

    >>> without_label("Constraints: Keep the format.")
    'Keep the format.'
    """
    return _LABEL_PREFIX_RE.sub("", sentence).strip() or sentence


def constraint_text(sentence: str) -> str:
    """A constraint sentence without a leading label such as ``Constraints:``.

    >>> constraint_text("Heads-up: do not modify the importer.")
    'do not modify the importer.'
    """
    return clip(without_label(sentence), LEDGER_LINE_MAX)


def shorten_user(text: str, head: int, constraints: bool = True) -> str:
    """A user message for the summary, whole sentences in their order: the opening sentences
    up to ``head`` characters, every constraint sentence in full (with the sentence before it
    when it :func:`refers_back` to it), and the last sentence; ``…`` marks what was left
    out. ``head`` 0 keeps constraint sentences only (or the first 60 characters when there
    are none). ``constraints=False`` leaves constraint sentences out (they are listed on
    their own), and with them a sentence that only introduces them (one that ends with a
    colon, followed by a constraint: "两点要求：", "Two rules:"), which would otherwise
    introduce whatever comes next ("两点要求：附上 CI 失败页面的截图。", "two requirements:
    attach the CI screenshot", in a fresh-user trial).

    >>> shorten_user("Fix the pager. " + "It is slow. " * 30 + "Do not add deps. Thanks!", 30)
    'Fix the pager. It is slow. … Do not add deps. Thanks!'
    >>> shorten_user("Fix the pager. Do not add deps.", 200, constraints=False)
    'Fix the pager.'
    >>> shorten_user("Fix the pager. Two rules: Do not add deps. Attach a log.", 200, False)
    'Fix the pager. Attach a log.'
    """
    sentences, flags = sentence_flags(text)
    left_out = frozenset() if constraints else _left_out(sentences, flags)
    plain = sum(len(s) + 1 for s, c in zip(sentences, flags, strict=True) if not c)
    budget = plain if head > 0 and plain <= head + 60 else head
    parts: list[str] = []
    used, gap = 0, False
    for index, (sentence, is_constraint) in enumerate(zip(sentences, flags, strict=True)):
        if index in left_out:
            continue
        last = index == len(sentences) - 1
        if constraints and not last and flags[index + 1] and refers_back(sentences[index + 1]):
            is_constraint = True  # it names what the constraint after it is about
        if is_constraint or (budget > 0 and (used + len(sentence) <= budget or last)):
            piece = sentence if is_constraint else clip(sentence, max(budget, 80))
        elif budget > 0 and used == 0:
            piece = clip(sentence, budget)
        else:
            gap = True
            continue
        if gap:
            parts.append(ELLIPSIS)
            gap = False
        parts.append(clip(piece, LEDGER_LINE_MAX))
        used += 0 if is_constraint else len(piece) + 1
    if not parts:
        parts = [clip(inline(text), 60 if constraints else 40)]
    return _ELLIPSES_RE.sub(ELLIPSIS, join_sentences(parts))


def _left_out(sentences: Sequence[str], flags: Sequence[bool]) -> frozenset[int]:
    """The indices of the sentences :func:`shorten_user` leaves out with
    ``constraints=False``: each constraint, and a sentence that introduces one (it ends
    with a colon and a constraint comes next).

    >>> sorted(_left_out(["Fix it.", "Two rules:", "Do not add deps."], [False, False, True]))
    [1, 2]
    """
    return frozenset(
        index
        for index, sentence in enumerate(sentences)
        if flags[index]
        or (sentence.rstrip().endswith((":", "：")) and index + 1 < len(flags) and flags[index + 1])
    )


@functools.cache
def sentence_flags(text: str) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """The sentences of ``text`` and whether each is a constraint to list
    (:func:`constraint_flags`), cached: rendering shortens every user message once per
    level of detail tried (up to 15 times).

    Unbounded, and emptied after each summary request (:func:`clear_caches`): an LRU of
    1,024 entries missed every time on a session of more user messages, rendered in order
    again at each level (the 32 MB bench session: 98k constraint checks instead of 6.6k);
    it holds the request's own user texts, alive while it is summarized anyway."""
    found = tuple(split_sentences(text))
    return found, constraint_flags(found)


def clear_caches() -> None:
    """Empty the cache of :func:`sentence_flags` (it holds user messages)."""
    sentence_flags.cache_clear()
