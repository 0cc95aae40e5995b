"""Checking probes against the effective context: as written, then with whitespace (and, for
prose, case) normalised.

:class:`Context` is the text an agent would send now (:func:`compactctl.replay.replay` of a
log): each message's text and, for assistant messages, each tool call's name, the string
values of its arguments (a command or a path is checked as written, not as a JSON-escaped
string) and a command given as a list, rendered as the probes render it
(:func:`~compactctl.summarize.extractive.tools.shell_command`: ``["cargo", "test"]`` is
``cargo test``). A probe is looked for:

1. in its source message (``Probe.source``), when the context still holds a message with
   that uuid (kept, or reduced by micro compaction or rules): found there as written, it is
   ``exact``;
2. else in the whole context, joined once (messages separated by a NUL character, so no
   probe matches across two messages) and normalised once: ``normalised`` when the
   probe's normalised text is there, ``exact`` when its text is also there as written
   (searched only after a normalised hit, so a lost probe costs one search, not two);
3. else, for a probe holding a secret, its redacted form
   (:func:`~compactctl.summarize.redact.redact`: a summary carries the fact with the secret
   as ``[REDACTED:kind]``), found as in 2, and only when no other probe of the run with
   another text has the same redacted form: once redacted, two secrets of one kind in the
   same words cannot be told apart, so neither counts as kept by such a mention.

What counts as the same fact (:func:`~compactctl.evaluate.probes.occurs`):

- **Word boundaries, every kind.** No word character, ``[A-Za-z0-9_]`` (ASCII only: a CJK
  character next to ``page_of`` does not hide it), directly before or after a match, so
  ``ls`` is not in "tools", the request "ok" not in "book", ``page_of`` not in ``pages_of``.
- **Commands and file paths** (kinds ``command`` and ``file_path``): no ``.`` or ``-``
  directly before the match, nor directly after it when a word character follows them:
  ``a.py`` is not in ``x-a.py``, ``.a.py`` or ``a.py.bak`` (nor, by the word rule, in
  ``data.py``), and ``make`` is not in ``make-dist``. A ``/`` is a boundary: the relative
  path ``src/a.py`` inside ``/home/u/src/a.py`` names the same file, and ``src/a.py``
  names the folder ``src``.
- **Case.** The code kinds (``command``, ``file_path``, ``identifier``) are matched
  case-sensitively, with whitespace runs as one space (``make`` is not "Make sure",
  ``README.md`` is not ``readme.md``); the prose kinds (requests, errors, constraints,
  decisions, pending tasks) case folded as well
  (:func:`~compactctl.evaluate.probes.normalise`), as issue 16 asks.
- **CJK punctuation.** In the prose kinds, full-width punctuation compares as the ``rules``
  layer writes it (its ``cjk_punct`` rule's table: ``，。：（）`` is ``,.:()``), so a user
  message that rule rewrote still keeps its requests and constraints (``normalised``).

Every probe stands so in its source message (:mod:`compactctl.evaluate.probes`), so an
uncompacted log keeps every probe (``tests/unit/evaluate/test_eval.py`` checks every
shipped transcript).

Cost: one search in its source message per kept probe of an uncompacted log (no copy of
the context at all); otherwise three copies of the context's text (as written, whitespace
normalised, and that case folded; about 3 bytes a character for CJK) and one search per
probe, stopping at the first bounded hit. Measured in ``make bench`` (the ``eval`` rows).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from functools import cached_property

from compactctl.evaluate.probes import CODE_KINDS, Probe, normalise, occurs
from compactctl.layers.text_rules.cjk import normalize_cjk_punct
from compactctl.model import Message
from compactctl.summarize.extractive.tools import call_arguments, shell_command
from compactctl.text import string_leaves

__all__ = ["EXACT", "NORMALISED", "Context", "message_strings"]

EXACT = "exact"
"""The match of a probe found as written."""

NORMALISED = "normalised"
"""The match of a probe found only after normalisation (whitespace; case for prose)."""

_SEPARATOR = "\n\x00\n"
_MARKER = "[REDACTED:"


def message_strings(message: Message) -> Iterator[str]:
    """The texts of one message a probe may be found in: its content text, then each tool
    call's name, the string values of its arguments and, for a command given as a list,
    its rendering (:func:`~compactctl.summarize.extractive.tools.shell_command`, the text
    of its ``command`` probe).

    >>> from compactctl.model import Message
    >>> m = Message({"type": "message", "role": "assistant", "content": "Running it.",
    ...              "toolCalls": [{"name": "bash",
    ...                             "arguments": '{"command": "ls \\\\"a b\\\\""}'},
    ...                            {"name": "shell",
    ...                             "arguments": {"command": ["git", "commit", "-m", "fix"]}}]})
    >>> list(message_strings(m))
    ['Running it.', 'bash', 'ls "a b"', 'shell', 'git', 'commit', '-m', 'fix', 'git commit -m fix']
    """
    text = message.text
    if text:
        yield text
    for call in message.tool_calls:
        yield str(call.get("name") or "")
        args = call_arguments(call)
        yield from string_leaves(args)
        value = args.get("command", args.get("cmd"))
        if value.__class__ is list:
            rendered = shell_command(args)
            if rendered and rendered != value[-1]:  # ["bash", "-lc", script]: a leaf already
                yield rendered


class Context:
    """The effective context, searchable (see the module docstring).

    Args:
        messages: the effective context (a :data:`compactctl.replay.View`), or any
            messages, in order.

    Memory: the messages' uuids; the joined text and its normalised copies only once a
    probe is not found in its source message (each built on first use, held while the
    checks run).
    """

    def __init__(self, messages: Iterable[Message]) -> None:
        self.messages = list(messages)
        self.by_uuid = {u: m for m in self.messages if (u := m.uuid) is not None}

    @cached_property
    def text(self) -> str:
        """Every message's :func:`message_strings`, joined (messages apart by a NUL)."""
        return _SEPARATOR.join(s for m in self.messages for s in message_strings(m))

    @cached_property
    def spaced(self) -> str:
        """:attr:`text` with every whitespace run one space (the code kinds' form)."""
        return " ".join(self.text.split())

    @cached_property
    def folded(self) -> str:
        """:attr:`spaced`, case folded, full-width CJK punctuation in its ASCII form:
        :func:`~compactctl.evaluate.probes.normalise` of :attr:`text` (case folding neither
        makes nor removes whitespace, nor does the punctuation mapping)."""
        folded = self.spaced.casefold()
        return folded if folded.isascii() else normalize_cjk_punct(folded)

    def match(self, probe: Probe, probes: Sequence[Probe] = ()) -> str | None:
        """How ``probe`` is found: :data:`EXACT`, :data:`NORMALISED`, or ``None`` (lost).

        First in its source message (``probe.source``), when the context still holds a
        message with that uuid: a probe stands in its source (:mod:`compactctl.evaluate.
        probes`), so a message kept or only partly reduced usually answers at the cost of
        its own size. Else in the whole context, normalised, then as written; else by its
        redacted form, when no other of ``probes`` (the run's probes) shares that form.

        >>> from compactctl.model import Message
        >>> ctx = Context([Message({"type": "message", "role": "user",
        ...                         "content": "Do  not add\\nnew deps; see QUI-8564."})])
        >>> [ctx.match(Probe(k, t, 1, 1)) for k, t in [("user_constraint", "do not add new deps"),
        ...  ("identifier", "QUI-8564"), ("identifier", "QUI-856"), ("user_constraint", "see"),
        ...  ("user_constraint", "no"), ("command", "do not add new deps")]]
        ['normalised', 'exact', None, 'exact', None, None]
        """
        kind = probe.kind
        source = self.by_uuid.get(probe.source) if probe.source is not None else None
        if source is not None and any(occurs(s, probe.text, kind) for s in message_strings(source)):
            return EXACT
        found = self._in_context(probe.text, kind)
        if found is None:  # a summary may carry the fact with its secrets redacted
            found = self._redacted(probe, probes)
        return found

    def _in_context(self, text: str, kind: str) -> str | None:
        if kind in CODE_KINDS:
            key, haystack = " ".join(text.split()), self.spaced
        else:
            key, haystack = normalise(text), self.folded
        if not key or not occurs(haystack, key, kind):
            return None
        return EXACT if occurs(self.text, text, kind) else NORMALISED

    def _redacted(self, probe: Probe, probes: Sequence[Probe]) -> str | None:
        """The match of ``probe``'s redacted form, when it has a secret and no other probe
        with another text redacts to the same form (see the module docstring, point 3)."""
        from compactctl.summarize.redact import redact

        hidden = redact(probe.text)
        if hidden == probe.text:
            return None
        head = hidden[: hidden.find(_MARKER)]
        tail = hidden[hidden.rfind("]") + 1 :]
        for other in probes:  # only probes in the same words outside the secret are redacted
            text = other.text
            if (
                text != probe.text
                and text.startswith(head)
                and text.endswith(tail)
                and redact(text) == hidden
            ):
                return None
        return self._in_context(hidden, probe.kind)

    def check(self, probes: Sequence[Probe]) -> list[str | None]:
        """:meth:`match` of each probe, in order (each one's redaction fallback against
        the others)."""
        return [self.match(p, probes) for p in probes]
